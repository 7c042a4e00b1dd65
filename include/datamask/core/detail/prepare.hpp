// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Input validation and the per-row quantities every backend needs (norms, ids, the
/// combined quality column), computed once on the host.

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "datamask/core/detail/parallel.hpp"
#include "datamask/core/error.hpp"
#include "datamask/core/input_checks.hpp"
#include "datamask/core/options.hpp"

namespace datamask::detail {

struct prepared {
  index_t n = 0;
  index_t d = 0;
  std::vector<double> inv_norms;  ///< 1/||e_i||; 0 for a zero row (its cosine with anything is 0)
  std::vector<double> sq_norms;   ///< ||e_i||^2
  std::vector<id_t> ids;
  std::vector<double> quality;    ///< sum_a w_a q_a per row; empty without quality columns
};

template <class T>
void check_embeddings(matrix_view<const T> x, int threads) {
  DATAMASK_EXPECTS(x.rows > 0, "embeddings", "empty input: 0 rows");
  DATAMASK_EXPECTS(x.cols > 0, "embeddings", "empty input: 0 columns");
  DATAMASK_EXPECTS(x.data != nullptr, "embeddings", "null data pointer for ", x.rows, " x ",
                   x.cols, " matrix");
  DATAMASK_EXPECTS(x.stride >= x.cols, "embeddings", "row stride ", x.stride,
                   " is smaller than the ", x.cols, " columns");
  constexpr index_t chunk = 1024;
  const index_t chunks = (x.rows + chunk - 1) / chunk;
  std::vector<index_t> bad(static_cast<std::size_t>(chunks), -1);
  parallel_for(chunks, threads, [&](index_t c) {
    for (index_t i = c * chunk; i < std::min(x.rows, (c + 1) * chunk) && bad[c] < 0; ++i) {
      for (index_t j = 0; j < x.cols; ++j) {
        if (!std::isfinite(static_cast<double>(x(i, j)))) {
          bad[c] = i * x.cols + j;
          break;
        }
      }
    }
  }, static_cast<double>(chunk * x.cols));
  for (index_t b : bad) {
    if (b >= 0) {
      const double v = static_cast<double>(x(b / x.cols, b % x.cols));
      throw invalid_input("embeddings", concat("row ", b / x.cols, ", column ", b % x.cols, " is ",
                                               std::isnan(v) ? "NaN" : "infinite",
                                               "; every value must be finite"));
    }
  }
}

/// Validates a problem and computes the per-row quantities.
template <class T>
prepared prepare(const problem<T>& p, bool normalized, int threads) {
  check_embeddings(p.embeddings, threads);
  prepared out;
  out.n = p.embeddings.rows;
  out.d = p.embeddings.cols;
  const index_t n = out.n;
  out.inv_norms.resize(static_cast<std::size_t>(n));
  out.sq_norms.resize(static_cast<std::size_t>(n));
  parallel_for((n + 1023) / 1024, threads, [&](index_t c) {
    for (index_t i = c * 1024; i < std::min(n, (c + 1) * 1024); ++i) {
      double s = 0.0;
      for (index_t j = 0; j < out.d; ++j) {
        const double v = static_cast<double>(p.embeddings(i, j));
        s += v * v;
      }
      if (normalized) {
        out.sq_norms[i] = 1.0;
        out.inv_norms[i] = 1.0;
      } else {
        out.sq_norms[i] = s;
        out.inv_norms[i] = s > 0.0 ? 1.0 / std::sqrt(s) : 0.0;
      }
    }
  }, static_cast<double>(1024 * out.d));

  for (std::size_t a = 0; a < p.quality.size(); ++a) {
    const auto& col = p.quality[a];
    const std::string name = concat("quality[", a, "]");
    DATAMASK_EXPECTS(static_cast<index_t>(col.scores.size()) == n, name, "has ",
                     col.scores.size(), " scores, expected ", n, " (one per embedding row)");
    DATAMASK_EXPECTS(std::isfinite(col.weight) && col.weight >= 0.0, name,
                     "weight must be finite and >= 0, found ", col.weight);
    check_finite_scores(name, col.scores);
  }
  if (!p.quality.empty()) {
    out.quality.assign(static_cast<std::size_t>(n), 0.0);
    for (const auto& col : p.quality) {
      for (index_t i = 0; i < n; ++i) out.quality[i] += col.weight * col.scores[i];
    }
  }

  if (p.ids.empty()) {
    out.ids.resize(static_cast<std::size_t>(n));
    std::iota(out.ids.begin(), out.ids.end(), id_t{0});
  } else {
    DATAMASK_EXPECTS(static_cast<index_t>(p.ids.size()) == n, "ids", "has ", p.ids.size(),
                     " ids, expected ", n, " (one per embedding row)");
    out.ids.assign(p.ids.begin(), p.ids.end());
    check_unique_ids("ids", std::span<const id_t>(out.ids));
  }
  return out;
}

/// The preparation of `p`: `given` (a caller's, the `prepared` argument of a learner's `select`)
/// when there is one, after a check that it is of `p`'s shape (the caller vouches for the rest:
/// that it is `p`'s, under the same `normalized`), else `prepare`'s.
template <class T>
prepared prepared_of(const problem<T>& p, const prepared* given, bool normalized, int threads) {
  if (given == nullptr) return prepare(p, normalized, threads);
  DATAMASK_EXPECTS(given->n == p.embeddings.rows && given->d == p.embeddings.cols, "prepared",
                   "is the preparation of a ", given->n, " x ", given->d, " block, not of this ",
                   p.embeddings.rows, " x ", p.embeddings.cols, " one");
  return *given;
}

/// The selection size S for n items. @throws invalid_input for an impossible ratio or count.
inline index_t selection_size(const settings& o, index_t n) {
  if (o.count > 0) {
    DATAMASK_EXPECTS(o.count <= n, "count", "asks for ", o.count, " items but the input has only ",
                     n);
    return o.count;
  }
  DATAMASK_EXPECTS(o.count == 0, "count", "must be >= 0, found ", o.count);
  DATAMASK_EXPECTS(std::isfinite(o.ratio) && o.ratio > 0.0 && o.ratio <= 1.0, "ratio",
                   "must be in (0, 1], found ", o.ratio);
  const auto s = static_cast<index_t>(std::llround(o.ratio * static_cast<double>(n)));
  DATAMASK_EXPECTS(s >= 1, "ratio", o.ratio, " of ", n, " items selects S = ", s,
                   " items; S must be at least 1");
  return s;
}

/// The prune threshold: the value at rank floor(p * n) of the sorted quality (items strictly
/// below it are dropped), or the caller's global threshold.
inline double prune_threshold(const settings& o, const std::vector<double>& q) {
  if (o.prune_threshold) {
    DATAMASK_EXPECTS(!std::isnan(*o.prune_threshold), "prune_threshold", "is NaN");
    return *o.prune_threshold;
  }
  DATAMASK_EXPECTS(std::isfinite(o.prune) && o.prune >= 0.0 && o.prune < 1.0, "prune",
                   "must be in [0, 1), found ", o.prune);
  if (o.prune == 0.0) return -std::numeric_limits<double>::infinity();
  std::vector<double> s(q);
  const auto r = static_cast<std::size_t>(std::floor(o.prune * static_cast<double>(s.size())));
  std::nth_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(r), s.end());
  return s[r];
}

}  // namespace datamask::detail
