// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Relaxations F(p) of diversity objectives: a smooth function of the inclusion
/// probabilities p in [0, 1]^n that equals the objective at every integral p with sum p = S,
/// with its gradient dF/dp. The continuous learner (continuous.hpp, method.md section 6)
/// ascends the relaxation of f instead of sampling rollouts.
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
#include "datamask/objectives/disf.hpp"
#include "datamask/objectives/pairwise.hpp"
#include "datamask/types.hpp"

namespace datamask {

/// @brief What a relaxation sees: the block, the probabilities and the selection size.
///
/// `embeddings`, `inv_norms` and `sq_norms` are as in `subset_view` (n rows). `p` holds one
/// probability per row, in [0, 1] (rows outside the candidate set hold 0). `total` is S, the
/// number of items a selection holds: objectives whose normaliser depends on the set size use
/// it (the relaxation is exact where sum p = S). `threads` as in `options::threads` (0: all).
template <class T>
struct relax_view {
  matrix_view<const T> embeddings;
  const double* inv_norms = nullptr;
  const double* sq_norms = nullptr;
  std::span<const double> p;
  double total = 0.0;
  int threads = 0;
};

/// @brief Refinement of `diversity_objective`: a relaxation F(p) with its gradient,
/// `double d.relax(const relax_view<T>& v, std::span<double> grad) const`, which returns F(p)
/// and writes dF/dp_i into grad[i] for every row i (grad.size() == n).
///
/// Rules the compiler cannot check: at every p in {0, 1}^n with sum p = v.total, F(p) equals
/// the objective on the set {i : p_i = 1} (up to rounding); F is differentiable in p on the
/// box, and grad is its exact gradient (the continuous learner's tests compare it with finite
/// differences); the value and gradient are deterministic and do not depend on v.threads; the
/// call is thread-safe. Larger is more diverse, as for the objective.
template <class D, class T = float>
concept relaxable_objective =
    diversity_objective<D, T> &&
    requires(const D& d, const relax_view<T>& v, std::span<double> grad) {
      { d.relax(v, grad) } -> std::convertible_to<double>;
    };

namespace detail::relax {

/// Rows per chunk: at least `min_rows`, and at most `max_chunks` chunks. Depends on n only.
inline index_t chunk_rows(index_t n, index_t max_chunks, index_t min_rows = 1024) {
  return std::max<index_t>(min_rows, (n + max_chunks - 1) / max_chunks);
}

template <class T>
using row_map = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>;

/// Rows multiplied by a per-row factor `w(i)`, centred on `mu` first when given, as a dense
/// double block (rows in [r0, r1)).
template <class T, class W>
void gather_rows(const matrix_view<const T>& x, index_t r0, index_t r1, const Eigen::VectorXd* mu,
                 W&& w, Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>& out) {
  const index_t d = x.cols;
  out.resize(r1 - r0, d);
  for (index_t i = r0; i < r1; ++i) {
    auto row = out.row(i - r0);
    row = row_map<T>(x.row(i), d).template cast<double>().transpose();
    if (mu != nullptr) row -= mu->transpose();
    row *= w(i);
  }
}

/// sum_i w(i) x_i (a d-vector) and sum_i a(i), over the rows with p_i != 0, in fixed chunks
/// summed in chunk order.
template <class T, class W, class A>
std::pair<Eigen::VectorXd, double> weighted_sum(const matrix_view<const T>& x, std::span<const double> p,
                                                int threads, W&& w, A&& a) {
  const index_t n = x.rows;
  const index_t d = x.cols;
  const index_t rows = chunk_rows(n, 64);
  const index_t chunks = (n + rows - 1) / rows;
  Eigen::MatrixXd vpart = Eigen::MatrixXd::Zero(d, chunks);
  std::vector<double> spart(static_cast<std::size_t>(chunks), 0.0);
  parallel_for(chunks, threads, [&](index_t c) {
    for (index_t i = c * rows; i < std::min(n, (c + 1) * rows); ++i) {
      if (p[i] == 0.0) continue;
      vpart.col(c) += row_map<T>(x.row(i), d).template cast<double>() * w(i);
      spart[static_cast<std::size_t>(c)] += a(i);
    }
  });
  std::pair<Eigen::VectorXd, double> out{Eigen::VectorXd::Zero(d), 0.0};
  for (index_t c = 0; c < chunks; ++c) {
    out.first += vpart.col(c);
    out.second += spart[static_cast<std::size_t>(c)];
  }
  return out;
}

}  // namespace detail::relax

/// @brief The relaxation of pairwise similarity (method.md section 6): with u_i the unit rows
/// (u_i = e_i / ||e_i||, 0 for a zero row), c_i = ||u_i||^2 (1, or 0 for a zero row, as the
/// objective counts it) and s = sum_i p_i u_i,
///   F(p) = -(||s||^2 - sum_i p_i^2 c_i) / (S (S - 1)),
///   dF/dp_i = -(2 u_i . s - 2 p_i c_i) / (S (S - 1)).
/// The numerator is the expected sum of cosines over ordered pairs when each item is included
/// independently with probability p_i; the normaliser is the fixed S (S - 1), so F is that
/// expectation divided by S (S - 1), and at an integral p of sum S it is F_pws exactly. O(n d).
/// S < 2 gives F = 0 and a zero gradient, as the objective scores sets of fewer than two items.
template <class T>
double relax_pairwise(const pairwise_similarity& /*objective*/, const relax_view<T>& v,
                      std::span<double> grad) {
  const matrix_view<const T>& x = v.embeddings;
  const index_t n = x.rows;
  const index_t d = x.cols;
  const double norm = v.total * (v.total - 1.0);
  if (!(v.total >= 2.0)) {
    std::fill(grad.begin(), grad.end(), 0.0);
    return 0.0;
  }
  const auto [s, self_sum] = detail::relax::weighted_sum(
      x, v.p, v.threads, [&](index_t i) { return v.p[i] * v.inv_norms[i]; },
      [&](index_t i) { return v.p[i] * v.p[i] * v.sq_norms[i] * v.inv_norms[i] * v.inv_norms[i]; });
  const index_t rows = detail::relax::chunk_rows(n, 64);
  const index_t chunks = (n + rows - 1) / rows;
  detail::parallel_for(chunks, v.threads, [&](index_t c) {
    for (index_t i = c * rows; i < std::min(n, (c + 1) * rows); ++i) {
      const double w = v.inv_norms[i];
      const double us = detail::relax::row_map<T>(x.row(i), d).template cast<double>().dot(s) * w;
      grad[i] = -(2.0 * us - 2.0 * v.p[i] * v.sq_norms[i] * w * w) / norm;
    }
  });
  return -(s.squaredNorm() - self_sum) / norm;
}

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
/// the gradient from one (rows x d) (d x d) product per block. W <= 1 gives F = 0 and a zero
/// gradient, as the objective scores sets of fewer than two items.
template <class T>
double relax_disf(const disf& /*objective*/, const relax_view<T>& v, std::span<double> grad) {
  using rmat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const matrix_view<const T>& x = v.embeddings;
  const index_t n = x.rows;
  const index_t d = x.cols;
  constexpr index_t block = 128;
  // Few chunks: each holds a d x d partial.
  const index_t rows = detail::relax::chunk_rows(n, 16);
  const index_t chunks = (n + rows - 1) / rows;

  // Pass 1: W and X^T p.
  auto [mu, wsum] = detail::relax::weighted_sum(
      x, v.p, v.threads, [&](index_t i) { return v.p[i]; }, [&](index_t i) { return v.p[i]; });
  if (!(wsum > 1.0)) {
    std::fill(grad.begin(), grad.end(), 0.0);
    return 0.0;
  }
  mu /= wsum;
  const double wm1 = wsum - 1.0;

  // Pass 2: Sigma, centred on mu (no cancellation), only the rows with p_i > 0.
  std::vector<Eigen::MatrixXd> spart(static_cast<std::size_t>(chunks));
  detail::parallel_for(chunks, v.threads, [&](index_t c) {
    Eigen::MatrixXd acc = Eigen::MatrixXd::Zero(d, d);
    std::vector<index_t> nz;
    for (index_t i = c * rows; i < std::min(n, (c + 1) * rows); ++i) {
      if (v.p[i] != 0.0) nz.push_back(i);
    }
    rmat y(block, d);
    for (std::size_t b0 = 0; b0 < nz.size(); b0 += block) {
      const auto cnt = static_cast<index_t>(std::min<std::size_t>(block, nz.size() - b0));
      y.resize(cnt, d);
      for (index_t r = 0; r < cnt; ++r) {
        const index_t i = nz[b0 + static_cast<std::size_t>(r)];
        y.row(r) = (detail::relax::row_map<T>(x.row(i), d).template cast<double>() - mu).transpose() *
                   std::sqrt(v.p[i]);
      }
      acc.selfadjointView<Eigen::Lower>().rankUpdate(y.transpose());
    }
    spart[static_cast<std::size_t>(c)] = std::move(acc);
  });
  Eigen::MatrixXd sigma = Eigen::MatrixXd::Zero(d, d);
  for (index_t c = 0; c < chunks; ++c) sigma += spart[static_cast<std::size_t>(c)];
  spart.clear();
  sigma = sigma.selfadjointView<Eigen::Lower>();
  sigma /= wm1;

  // F, G and <G, Sigma>.
  const double sc = disf::scale;
  Eigen::VectorXd var = sigma.diagonal().array() + disf::epsilon;
  Eigen::MatrixXd g(d, d);
  double f = 0.0;
  double gs = 0.0;
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
  for (index_t b = 0; b < d; ++b) {
    for (index_t a = 0; a < d; ++a) gs += g(a, b) * sigma(a, b);
  }

  // Pass 3: (x_i - mu)^T G (x_i - mu) for every row, blocks of rows times G.
  const index_t grows = detail::relax::chunk_rows(n, 64);
  const index_t gchunks = (n + grows - 1) / grows;
  detail::parallel_for(gchunks, v.threads, [&](index_t c) {
    rmat y;
    rmat z;
    for (index_t r0 = c * grows; r0 < std::min(n, (c + 1) * grows); r0 += block) {
      const index_t r1 = std::min({n, (c + 1) * grows, r0 + block});
      detail::relax::gather_rows(x, r0, r1, &mu, [](index_t) { return 1.0; }, y);
      z.noalias() = y * g;
      for (index_t i = r0; i < r1; ++i) {
        grad[i] = (y.row(i - r0).dot(z.row(i - r0)) - gs) / wm1;
      }
    }
  });
  return -sc * f;
}

}  // namespace datamask
