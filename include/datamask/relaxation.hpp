// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Relaxations F(p) of diversity objectives: a smooth function of the inclusion
/// probabilities p in [0, 1]^n that equals the objective at every integral p with sum p = S,
/// with its gradient dF/dp. The continuous learner (continuous.hpp, method.md section 6)
/// ascends the relaxation of f instead of sampling rollouts.
///
/// The capability (`relax_view`, `relaxable_objective`) is in concepts.hpp; each built-in
/// objective owns its relaxation: pairwise similarity's is defined in objectives/pairwise.hpp.
/// DiSF's (`relax_disf`) is still here, reached from `disf::relax` by argument-dependent lookup;
/// it moves into objectives/disf.hpp once its tuning settles.
///
/// Why a separate capability and not a generic one: a relaxation is only useful when its value
/// and gradient cost about one pass over the block (O(n d) for pairwise similarity, O(n d^2) for
/// DiSF); evaluating the objective per coordinate would cost n times the objective. So each
/// objective that has a cheap closed form opts in with a `relax` member.
///
/// Determinism: every reduction runs over fixed chunks of rows (their number depends only on n),
/// each chunk summed in row order on one thread and the chunks added in chunk order, so the value
/// and the gradient are the same bits whatever the thread count.

#include <algorithm>
#include <cmath>
#include <concepts>
#include <span>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "datamask/concepts.hpp"
#include "datamask/detail/parallel.hpp"
#include "datamask/objectives/detail/relax_sums.hpp"
#include "datamask/objectives/disf.hpp"
#include "datamask/objectives/pairwise.hpp"
#include "datamask/types.hpp"

namespace datamask {

namespace detail::relax {

/// Rows from which relax_disf computes in the embedding precision T instead of double. Why a
/// threshold: the O(n d^2) products in float run at about twice the double rate (half the memory
/// traffic, twice the SIMD lanes), and at large n the ascent only needs the gradient's direction;
/// but float rounding (relative 1e-7 per entry) is far above the step of a central finite
/// difference, so small blocks (the tests' gradient checks, tiny selections) stay in double,
/// where F and dF/dp are exact to double rounding. The choice depends on n only: deterministic.
inline constexpr index_t disf_float_rows = 4096;

/// Rows per block of the DiSF products: a fixed number, so the block partials (and their sum in
/// block order, in double) do not depend on the thread count; 512 rows x 256 columns of float is
/// 512 KiB, about an L2 cache.
inline constexpr index_t disf_block_rows = 512;

/// Pass 2 of relax_disf: Sigma from the rows with p_i > 0, centred on mu (no cancellation), in
/// double, divided by W - 1. A fixed number of chunks (16: each holds a d x d double partial);
/// inside a chunk, blocks of `disf_block_rows` such rows, each a symmetric rank update Y^T Y in
/// C added to the chunk's double partial in block order; the chunks added in chunk order.
template <class C, class T>
Eigen::MatrixXd disf_sigma(const relax_view<T>& v, const Eigen::Matrix<C, Eigen::Dynamic, 1>& muc, double wm1) {
  using cmat = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const matrix_view<const T>& x = v.embeddings;
  const index_t n = x.rows;
  const index_t d = x.cols;
  constexpr index_t block = disf_block_rows;
  const index_t rows = chunk_rows(n, 16);
  const index_t chunks = (n + rows - 1) / rows;
  std::vector<Eigen::MatrixXd> spart(static_cast<std::size_t>(chunks));
  parallel_for(chunks, v.threads, [&](index_t c) {
    Eigen::MatrixXd acc = Eigen::MatrixXd::Zero(d, d);
    Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic> part(d, d);
    cmat y(block, d);
    index_t cnt = 0;
    auto flush = [&] {
      if (cnt == 0) return;
      part.setZero();
      part.template selfadjointView<Eigen::Lower>().rankUpdate(y.topRows(cnt).transpose());
      acc.template triangularView<Eigen::Lower>() += part.template cast<double>();
      cnt = 0;
    };
    for (index_t i = c * rows; i < std::min(n, (c + 1) * rows); ++i) {
      if (v.p[i] == 0.0) continue;
      y.row(cnt) = (row_map<T>(x.row(i), d).template cast<C>() - muc).transpose() *
                   static_cast<C>(std::sqrt(v.p[i]));
      if (++cnt == block) flush();
    }
    flush();
    spart[static_cast<std::size_t>(c)] = std::move(acc);
  });
  Eigen::MatrixXd sigma = Eigen::MatrixXd::Zero(d, d);
  for (index_t c = 0; c < chunks; ++c) sigma += spart[static_cast<std::size_t>(c)];
  spart.clear();
  sigma = sigma.selfadjointView<Eigen::Lower>();
  sigma /= wm1;
  return sigma;
}

/// F / (-scale) = sum_{a != b} Sigma_ab^2 / (v_a v_b) and G = dF/dSigma into g (double, O(d^2)).
inline double disf_sum_and_gradient(const Eigen::MatrixXd& sigma, Eigen::MatrixXd& g) {
  const index_t d = sigma.rows();
  const double sc = disf::scale;
  const Eigen::VectorXd var = sigma.diagonal().array() + disf::epsilon;
  g.resize(d, d);
  double f = 0.0;
  for (index_t b = 0; b < d; ++b) {
    double diag = 0.0;
    for (index_t a = 0; a < d; ++a) {
      if (a == b) continue;
      const double sab = sigma(a, b);
      const double q = sab * sab / (var(a) * var(b));
      f += q;
      g(a, b) = -2.0 * sc * sab / (var(a) * var(b));
      diag += q;
    }
    g(b, b) = 2.0 * sc * diag / var(b);
  }
  return f;
}

/// Pass 3 of relax_disf: grad_i = ((x_i - mu)^T G (x_i - mu) - gs) / (W - 1) for every row: one
/// (block x d) (d x d) product per block of rows, blocks in parallel (each writes its own rows).
template <class C, class T>
void disf_quadratic_forms(const relax_view<T>& v, const Eigen::Matrix<C, Eigen::Dynamic, 1>& muc,
                          const Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic>& gc, double gs, double wm1,
                          std::span<double> grad) {
  using cmat = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const matrix_view<const T>& x = v.embeddings;
  const index_t n = x.rows;
  const index_t d = x.cols;
  constexpr index_t block = disf_block_rows;
  const index_t blocks = (n + block - 1) / block;
  parallel_for(blocks, v.threads, [&](index_t bi) {
    const index_t r0 = bi * block;
    const index_t r1 = std::min(n, r0 + block);
    cmat y(r1 - r0, d);
    for (index_t i = r0; i < r1; ++i) {
      y.row(i - r0) = (row_map<T>(x.row(i), d).template cast<C>() - muc).transpose();
    }
    cmat z(r1 - r0, d);
    z.noalias() = y * gc;
    for (index_t i = r0; i < r1; ++i) {
      const double quad = static_cast<double>(y.row(i - r0).dot(z.row(i - r0)));
      grad[i] = (quad - gs) / wm1;
    }
  });
}

/// relax_disf computed with products in C (float or double), partials accumulated in double.
template <class C, class T>
double disf_relax_in(const relax_view<T>& v, std::span<double> grad) {
  using cvec = Eigen::Matrix<C, Eigen::Dynamic, 1>;
  const index_t d = v.embeddings.cols;
  // Pass 1: W and X^T p (double, O(n d)).
  auto [mu, wsum] = weighted_sum(
      v.embeddings, v.p, v.threads, [&](index_t i) { return v.p[i]; }, [&](index_t i) { return v.p[i]; });
  if (!(wsum > 1.0)) {
    std::fill(grad.begin(), grad.end(), 0.0);
    return 0.0;
  }
  mu /= wsum;
  const double wm1 = wsum - 1.0;
  const cvec muc = mu.template cast<C>();
  const Eigen::MatrixXd sigma = disf_sigma<C>(v, muc, wm1);  // pass 2
  // F, G and <G, Sigma> (double, O(d^2)).
  Eigen::MatrixXd g(d, d);
  const double f = disf_sum_and_gradient(sigma, g);
  const double gs = (g.array() * sigma.array()).sum();
  const Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic> gc = g.template cast<C>();
  disf_quadratic_forms<C>(v, muc, gc, gs, wm1, grad);  // pass 3
  return -disf::scale * f;
}

}  // namespace detail::relax

/// @brief The relaxation of DiSF on p-weighted column statistics (method.md section 6): with
/// W = sum p, mu = X^T p / W, Sigma = sum_i p_i (x_i - mu)(x_i - mu)^T / (W - 1) and
/// v_a = Sigma_aa + 1e-8,
///   F(p) = -(1 / 10^4) sum_{a != b} Sigma_ab^2 / (v_a v_b),
///   dF/dp_i = ((x_i - mu)^T G (x_i - mu) - <G, Sigma>) / (W - 1),
/// G = dF/dSigma (off-diagonal -(2 / 10^4) Sigma_ab / (v_a v_b), diagonal
/// (2 / 10^4) sum_{b != a} Sigma_ab^2 / (v_a^2 v_b)). At integral p, Sigma is the unbiased
/// covariance of the set and Sigma_ab^2 / (v_a v_b) its squared correlation C_ab^2: F_disf
/// exactly. W is sum p (not v.total), so the gradient is that of F on the whole box.
/// Cost O(n d^2): Sigma from the rows with p_i > 0 (one symmetric rank update per block of rows),
/// the gradient from one (rows x d) (d x d) product per block. From `disf_float_rows` rows on,
/// the products run in the embedding precision T (accumulated in double); below, in double (see
/// there why). W <= 1 gives F = 0 and a zero gradient, as the objective scores sets of fewer than
/// two items.
template <class T>
double relax_disf(const disf& /*objective*/, const relax_view<T>& v, std::span<double> grad) {
  if (v.embeddings.rows >= detail::relax::disf_float_rows) return detail::relax::disf_relax_in<T>(v, grad);
  return detail::relax::disf_relax_in<double>(v, grad);
}

}  // namespace datamask
