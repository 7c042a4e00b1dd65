// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Pairwise similarity (PWS): minus the mean cosine similarity over ordered pairs.

#include <string_view>

#include <Eigen/Core>

#include "datamask/concepts.hpp"

namespace datamask {

/// @brief F_pws(U) = -(1 / (k (k - 1))) * sum_{i != j in U} cos(e_i, e_j). Larger is more diverse.
///
/// Computed as -(||s||^2 - sum_i ||u_i||^2) / (k (k - 1)) with s the sum of the unit rows u_i:
/// O(k d) per subset, accumulated in double. A subset of fewer than two items scores 0.
struct pairwise_similarity {
  static constexpr std::string_view name = "pairwise";

  /// @brief Scores one subset.
  template <class T>
  [[nodiscard]] double operator()(const subset_view<T>& s) const {
    const index_t k = s.subset.size;
    if (k < 2) return 0.0;
    const index_t d = s.embeddings.cols;
    Eigen::VectorXd acc = Eigen::VectorXd::Zero(d);
    double self = 0.0;
    for (index_t i : s.subset) {
      const double w = s.inv_norms[i];
      acc += Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(s.embeddings.row(i), d)
                 .template cast<double>() *
             w;
      self += s.sq_norms[i] * w * w;
    }
    return -(acc.squaredNorm() - self) / (static_cast<double>(k) * static_cast<double>(k - 1));
  }

  /// @brief The relaxation of pairwise similarity at the probabilities `v.p` (a `relax_view`): returns F(p)
  /// and writes dF/dp into `grad` (the `relaxable_objective` capability). Defined by
  /// `relax_pairwise` in datamask/relaxation.hpp, which a caller includes (the umbrella of the
  /// continuous learner does); found at instantiation, so this header needs no new include.
  template <class View>
  double relax(const View& v, std::span<double> grad) const {
    return relax_pairwise(*this, v, grad);
  }
};

}  // namespace datamask
