// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief DiSF: the dimensional-collapse objective (squared off-diagonal correlation).

#include <algorithm>
#include <cmath>
#include <string_view>

#include <Eigen/Core>

#include "datamask/concepts.hpp"

namespace datamask {

/// @brief F_disf(U) = -(1 / 10^4) * sum_{a != b} C_ab^2 on the raw embeddings of the subset.
///
/// Each column of X_U (k x d) is standardised over the selected rows with the unbiased variance,
/// z = (x - mean) / sqrt(var + 1e-8); C = Z^T Z / (k - 1) is the d x d correlation. Cost
/// O(k d min(k, d)) per subset:
/// - 4 k <= d (small rollouts): sum_{a != b} (Z^T Z)_ab^2 = ||Z Z^T||_F^2 - sum_a (Z^T Z)_aa^2,
///   with the k x k Gram Z Z^T in double: k^2 d instead of k d^2 flops. The margin keeps the
///   float d x d update where the two costs are close (double flops are dearer).
/// - otherwise: one symmetric rank-k update of the d x d matrix Z^T Z in the embeddings'
///   precision, the squares summed in double.
/// A subset of fewer than two items scores 0.
struct disf {
  static constexpr std::string_view name = "disf";
  static constexpr double epsilon = 1e-8;
  static constexpr double scale = 1e-4;

  /// @brief Scores one subset.
  template <class T>
  [[nodiscard]] double operator()(const subset_view<T>& s) const {
    using mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const index_t k = s.subset.size;
    if (k < 2) return 0.0;
    const index_t d = s.embeddings.cols;
    Eigen::VectorXd mean = Eigen::VectorXd::Zero(d);
    for (index_t i : s.subset) {
      mean += Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(s.embeddings.row(i), d)
                  .template cast<double>();
    }
    mean /= static_cast<double>(k);
    Eigen::VectorXd var = Eigen::VectorXd::Zero(d);
    for (index_t i : s.subset) {
      var += (Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(s.embeddings.row(i), d)
                  .template cast<double>() -
              mean)
                 .cwiseAbs2();
    }
    var /= static_cast<double>(k - 1);
    const Eigen::VectorXd inv_sd = (var.array() + epsilon).rsqrt().matrix();
    const double km1 = static_cast<double>(k - 1);
    if (4 * k <= d) {
      Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> zd(k, d);
      index_t r = 0;
      for (index_t i : s.subset) {
        zd.row(r++) = ((Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(s.embeddings.row(i), d)
                            .template cast<double>() -
                        mean)
                           .cwiseProduct(inv_sd))
                          .transpose();
      }
      Eigen::MatrixXd gram = Eigen::MatrixXd::Zero(k, k);
      gram.selfadjointView<Eigen::Lower>().rankUpdate(zd);
      double frob = 0.0;  // ||Z Z^T||_F^2 = ||Z^T Z||_F^2
      for (index_t j = 0; j < k; ++j) {
        frob += gram(j, j) * gram(j, j);
        for (index_t i = j + 1; i < k; ++i) frob += 2.0 * gram(i, j) * gram(i, j);
      }
      const double diag = zd.colwise().squaredNorm().squaredNorm();  // sum_a (Z^T Z)_aa^2
      return -scale * std::max(0.0, frob - diag) / (km1 * km1);
    }
    mat z(k, d);
    index_t r = 0;
    for (index_t i : s.subset) {
      z.row(r++) =
          ((Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(s.embeddings.row(i), d)
                .template cast<double>() -
            mean)
               .cwiseProduct(inv_sd))
              .transpose()
              .template cast<T>();
    }
    Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> c =
        Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>::Zero(d, d);
    c.template selfadjointView<Eigen::Lower>().rankUpdate(z.transpose());
    double off = 0.0;
    for (index_t b = 0; b < d; ++b) {
      for (index_t a = b + 1; a < d; ++a) {
        const double v = static_cast<double>(c(a, b));
        off += v * v;
      }
    }
    return -scale * 2.0 * off / (km1 * km1);
  }

  /// @brief The relaxation of DiSF at the probabilities `v.p` (a `relax_view`): returns F(p)
  /// and writes dF/dp into `grad` (the `relaxable_objective` capability). Defined by
  /// `relax_disf` in datamask/relaxation.hpp, which a caller includes (the umbrella of the
  /// continuous learner does); found at instantiation, so this header needs no new include.
  template <class View>
  double relax(const View& v, std::span<double> grad) const {
    return relax_disf(*this, v, grad);
  }
};

}  // namespace datamask
