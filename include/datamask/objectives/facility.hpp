// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Facility location (FL) with four similarity kernels, tiled over the reference set.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "datamask/concepts.hpp"
#include "datamask/detail/parallel.hpp"
#include "datamask/error.hpp"

namespace datamask {

/// @brief The similarity kernel of facility location.
enum class similarity_kernel {
  cosine,   ///< cos(a, b)
  cosine2,  ///< cos(a, b)^2
  dot,      ///< a . b
  rbf       ///< exp(-gamma * ||a - b||^2)
};

/// @brief Parses "cosine", "cosine2", "dot" or "rbf".
/// @throws invalid_input naming `input` for any other text.
inline similarity_kernel parse_kernel(std::string_view text, const char* input = "kernel") {
  if (text == "cosine") return similarity_kernel::cosine;
  if (text == "cosine2") return similarity_kernel::cosine2;
  if (text == "dot") return similarity_kernel::dot;
  if (text == "rbf") return similarity_kernel::rbf;
  throw invalid_input(input, detail::concat("expected cosine, cosine2, dot or rbf, found '", text, "'"));
}

/// @brief F_fl(U) = (1 / |V|) * sum_{v in V} max_{j in U} sim(e_v, e_j). Larger is more diverse
/// (better covered). V is `subset_view::reference`.
///
/// Cost 2 |V| k d per subset. The reference set is processed in tiles of `tile` rows, each tile
/// one matrix product against the gathered subset, so the only buffer is tile x k: never
/// |V| x k, never n x n. An empty subset or reference scores 0.
struct facility_location {
  static constexpr std::string_view name = "facility";

  similarity_kernel kernel = similarity_kernel::cosine;
  double gamma = 1.0;  ///< rbf bandwidth
  index_t tile = 256;  ///< reference rows per matrix product

  /// @brief Scores one subset against `s.reference`.
  template <class T>
  [[nodiscard]] double operator()(const subset_view<T>& s) const {
    using mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const index_t k = s.subset.size;
    const index_t nv = s.reference.size;
    if (k == 0 || nv == 0) return 0.0;
    const index_t d = s.embeddings.cols;
    const bool unit = kernel == similarity_kernel::cosine || kernel == similarity_kernel::cosine2;
    auto row = [&](index_t i) {
      return Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(s.embeddings.row(i), d);
    };
    mat xu(k, d);
    for (index_t j = 0; j < k; ++j) {
      const index_t r = s.subset[j];
      if (unit) {
        xu.row(j) = (row(r).template cast<double>() * s.inv_norms[r]).template cast<T>();
      } else {
        xu.row(j) = row(r);
      }
    }
    // Tiles are scored independently (on several threads when this call is not already inside
    // a parallel region) and their sums added in tile order: the value does not depend on the
    // thread count.
    const index_t tl = std::max<index_t>(1, std::min(tile, nv));
    const index_t tiles = (nv + tl - 1) / tl;
    std::vector<double> partial(static_cast<std::size_t>(tiles), 0.0);
    detail::parallel_for(tiles, 0, [&](index_t c) {
      const index_t v0 = c * tl;
      const index_t t = std::min(tl, nv - v0);
      mat xv(t, d);
      for (index_t a = 0; a < t; ++a) {
        const index_t r = s.reference[v0 + a];
        if (unit) {
          xv.row(a) = (row(r).template cast<double>() * s.inv_norms[r]).template cast<T>();
        } else {
          xv.row(a) = row(r);
        }
      }
      mat sim(t, k);
      sim.noalias() = xv * xu.transpose();
      double sum = 0.0;
      for (index_t a = 0; a < t; ++a) sum += best(sim.row(a), s, s.reference[v0 + a]);
      partial[c] = sum;
    });
    double total = 0.0;
    for (double p : partial) total += p;
    return total / static_cast<double>(nv);
  }

 private:
  template <class Row, class T>
  [[nodiscard]] double best(const Row& dots, const subset_view<T>& s, index_t v) const {
    const index_t k = s.subset.size;
    switch (kernel) {
      case similarity_kernel::cosine:
      case similarity_kernel::dot: {
        double m = -std::numeric_limits<double>::infinity();
        for (index_t j = 0; j < k; ++j) m = std::max(m, static_cast<double>(dots(j)));
        return m;
      }
      case similarity_kernel::cosine2: {
        double m = 0.0;
        for (index_t j = 0; j < k; ++j) {
          const double c = static_cast<double>(dots(j));
          m = std::max(m, c * c);
        }
        return m;
      }
      case similarity_kernel::rbf: {
        // max_j exp(-gamma ||v - j||^2) = exp(-gamma * min_j (||v||^2 + ||j||^2 - 2 v.j)).
        double m = std::numeric_limits<double>::infinity();
        for (index_t j = 0; j < k; ++j) {
          m = std::min(m, s.sq_norms[s.subset[j]] - 2.0 * static_cast<double>(dots(j)));
        }
        return std::exp(-gamma * std::max(0.0, s.sq_norms[v] + m));
      }
    }
    return 0.0;
  }
};

}  // namespace datamask
