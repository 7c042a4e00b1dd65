// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The upper bound of pairwise similarity with a modular part (docs/method.md 7.1), written
/// once against an executor: Frank-Wolfe with exact line search on the concave relaxation
///   g(p) = a . p - b ||X^T p||^2,
/// where X holds the unit rows u_i, b = weight / (S (S - 1)) and a_i = linear_i + b c_i
/// (c_i = ||u_i||^2: 1, or 0 for a zero row). At a set U of S items g equals
/// f(U) = linear(U) - b (||sum_U u_i||^2 - sum_U c_i), weight times F_pws plus the modular part.
/// g is concave on all of R^n (b >= 0), so for every p
///   max_{|U| = S} f(U) <= max_P g <= g(p) + max_{v in P} grad g(p) . (v - p),
/// P = {0 <= p <= 1, sum p = S}, and the linear maximum is the sum of the S largest gradient
/// entries. Any p certifies a bound; no feasibility test is needed. The host check recomputes it.

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "datamask/core/concepts.hpp"
#include "datamask/core/config.hpp"
#include "datamask/core/error.hpp"
#include "datamask/exec/ops.hpp"
#include "datamask/core/types.hpp"

namespace datamask::detail::pairwise_bound {

/// Frank-Wolfe steps when the view asks for the default: within 0.05 points of 300 steps on the
/// study's synthetic blocks, about 1 point on the real ones (benchmarks/certificates/STUDY.md).
inline constexpr index_t default_iterations = 30;

/// out[i] = linear[i] (0 when absent) + b c_i.
struct shifted_linear {
  const double* linear;
  const double* inv;
  const double* sq;
  double b;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const {
    out[i] = (linear != nullptr ? linear[i] : 0.0) + b * sq[i] * inv[i] * inv[i];
  }
};

/// w[i] = p[i] / ||e_i||: the row weights of X^T p on the raw rows.
struct unit_weights {
  const double* p;
  const double* inv;
  double* w;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const { w[i] = p[i] * inv[i]; }
};

/// grad[i] = a[i] - 2 b u_i . s, from grad[i] = e_i . s (`row_dots`).
struct gradient {
  const double* a;
  const double* inv;
  double b;
  double* grad;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const {
    grad[i] = a[i] - 2.0 * b * inv[i] * grad[i];
  }
};

/// 1 when v[i] > t, a term of a count.
struct above {
  const double* v;
  double t;
  DATAMASK_HOST_DEVICE double operator()(index_t i) const { return v[i] > t ? 1.0 : 0.0; }
};

/// max(0, v[i] - t), a term of S t + sum_i max(0, v_i - t) >= the sum of the S largest v_i.
struct excess {
  const double* v;
  double t;
  DATAMASK_HOST_DEVICE double operator()(index_t i) const { return v[i] > t ? v[i] - t : 0.0; }
};

/// The Frank-Wolfe vertex: 1 above `hi`, `share` in (lo, hi] (the items tied at the threshold),
/// 0 below; `vw` its row weights for `column_sums`.
struct vertex {
  const double* grad;
  double hi;
  double lo;
  double share;
  const double* inv;
  double* v;
  double* vw;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const {
    const double x = grad[i] > hi ? 1.0 : (grad[i] > lo ? share : 0.0);
    v[i] = x;
    vw[i] = x * inv[i];
  }
};

/// out[i] = a[i] - b[i].
struct difference {
  const double* a;
  const double* b;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const { out[i] = a[i] - b[i]; }
};

/// p[i] += gamma (v[i] - p[i]).
struct move_towards {
  double* p;
  const double* v;
  double gamma;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const { p[i] += gamma * (v[i] - p[i]); }
};

/// out[i] = from[i].
struct copy {
  const double* from;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const { out[i] = from[i]; }
};

/// out[i] = 1 for the rows of the selection (a for_each over the selection).
struct mark {
  const index_t* rows;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t t) const { out[rows[t]] = 1.0; }
};

/// The threshold of the S largest of n values by bisection on counts: `hi` with
/// c(hi) = #{v > hi} <= S < c(lo), lo < hi, and no value strictly between (adjacent doubles, or
/// c(hi) == S exactly). Then the S largest are the c(hi) above hi and S - c(hi) of those in
/// (lo, hi], which all equal hi unless the bisection ran out of steps; S hi + sum max(0, v - hi)
/// bounds their sum from above in every case.
struct threshold {
  double lo = 0.0;
  double hi = 0.0;
  double count_lo = 0.0;
  double count_hi = 0.0;
};

template <class Exec>
threshold top_threshold(Exec& exec, index_t n, const double* v, index_t size) {
  threshold t;
  const double low =
      exec.reduce(n, ops::read{v}, ops::min{}, std::numeric_limits<double>::infinity());
  t.hi = exec.reduce(n, ops::read{v}, ops::max{}, -std::numeric_limits<double>::infinity());
  t.lo = std::nextafter(low, -std::numeric_limits<double>::infinity());
  t.count_lo = static_cast<double>(n);
  t.count_hi = 0.0;
  const auto s = static_cast<double>(size);
  if (size >= n) {  // every item: the threshold below the smallest
    t.hi = t.lo;
    t.count_hi = t.count_lo;
    return t;
  }
  // 1100 halvings reach adjacent doubles from any finite range; a count per halving.
  for (int it = 0; it < 1100; ++it) {
    const double mid = t.lo + (t.hi - t.lo) / 2.0;
    if (!(mid > t.lo && mid < t.hi)) break;
    const double c = exec.reduce(n, above{v, mid}, ops::plus{}, 0.0);
    if (c > s) {
      t.lo = mid;
      t.count_lo = c;
    } else {
      t.hi = mid;
      t.count_hi = c;
      if (c == s) break;
    }
  }
  return t;
}

/// The sum of the S largest of n values from above: S hi + sum max(0, v - hi) (exact when the
/// threshold is exact; valid for any hi).
template <class Exec>
double top_sum(Exec& exec, index_t n, const double* v, index_t size, const threshold& t) {
  return static_cast<double>(size) * t.hi + exec.reduce(n, excess{v, t.hi}, ops::plus{}, 0.0);
}

/// Frank-Wolfe with exact line search from the selection's indicator; returns the best bound
/// seen and its p (the certificate). Per step: X s (`row_dots`, one pass over X), the vertex's
/// X^T v (`column_sums` over its S rows) and O(n) reduces for the threshold; s = X^T p is
/// updated, not recomputed. Every pointer of `v` lives in the executor's memory.
template <class Exec, class T>
bound_certificate frank_wolfe(Exec& exec, const bound_view<T>& v) {
  const index_t n = v.embeddings.rows;
  const index_t d = v.embeddings.cols;
  const index_t size = v.size;
  const index_t iterations = v.iterations > 0 ? v.iterations : default_iterations;
  const double b =
      size >= 2 ? v.weight / (static_cast<double>(size) * static_cast<double>(size - 1)) : 0.0;
  auto scope = exec.scope();
  double* a = scope.template scratch<double>(n);
  double* p = scope.template scratch<double>(n);
  double* w = scope.template scratch<double>(n);
  double* grad = scope.template scratch<double>(n);
  double* vp = scope.template scratch<double>(n);
  double* best_p = scope.template scratch<double>(n);
  double* s = scope.template scratch<double>(d);
  double* sv = scope.template scratch<double>(d);
  double* dir = scope.template scratch<double>(d);
  scope.for_each(n, shifted_linear{v.linear.empty() ? nullptr : v.linear.data(), v.inv_norms,
                                   v.sq_norms, b, a});
  scope.for_each(n, ops::fill{p, 0.0});
  scope.for_each(static_cast<index_t>(v.selection.size()), mark{v.selection.data(), p});
  scope.for_each(n, unit_weights{p, v.inv_norms, w});
  scope.column_sums(v.embeddings, w, s);
  bound_certificate out;
  out.method = "frank-wolfe";
  for (index_t t = 0; t <= iterations; ++t) {
    scope.row_dots(v.embeddings, s, grad);
    scope.for_each(n, gradient{a, v.inv_norms, b, grad});
    const double g = scope.reduce(n, ops::product{a, p}, ops::plus{}, 0.0) -
                     b * scope.reduce(d, ops::square{s}, ops::plus{}, 0.0);
    const double gp = scope.reduce(n, ops::product{grad, p}, ops::plus{}, 0.0);
    const threshold th = top_threshold(scope, n, grad, size);
    const double gap = top_sum(scope, n, grad, size, th) - gp;
    ++out.evaluations;
    if (g + gap < out.bound) {
      out.bound = g + gap;
      scope.for_each(n, copy{p, best_p});
    }
    if (t == iterations || !(gap > 0.0)) break;
    const double share = (static_cast<double>(size) - th.count_hi) / (th.count_lo - th.count_hi);
    scope.for_each(n, vertex{grad, th.hi, th.lo, share, v.inv_norms, vp, w});
    scope.column_sums(v.embeddings, w, sv);
    scope.for_each(d, difference{sv, s, dir});
    const double gain = scope.reduce(n, ops::product{grad, vp}, ops::plus{}, 0.0) - gp;
    if (!(gain > 0.0)) break;
    const double curvature = 2.0 * b * scope.reduce(d, ops::square{dir}, ops::plus{}, 0.0);
    const double gamma = curvature > 0.0 ? std::min(1.0, gain / curvature) : 1.0;
    scope.for_each(n, move_towards{p, vp, gamma});
    scope.for_each(d, ops::add_scaled{s, dir, gamma});
  }
  out.certificate.resize(static_cast<std::size_t>(n));
  scope.download(static_cast<const double*>(best_p), std::span<double>(out.certificate));
  return out;
}

/// The sum of the S largest values (host; nth_element on a copy).
inline double host_top_sum(std::vector<double> values, index_t size) {
  if (size <= 0) return 0.0;
  const auto k = static_cast<std::ptrdiff_t>(
      std::min<std::size_t>(static_cast<std::size_t>(size), values.size()));
  std::nth_element(values.begin(), values.begin() + (k - 1), values.end(), std::greater<>());
  double sum = 0.0;
  for (std::ptrdiff_t i = 0; i < k; ++i) sum += values[static_cast<std::size_t>(i)];
  return sum;
}

/// The bound p certifies, recomputed on the host from the data alone in plain loops:
/// g(p) + (sum of the S largest entries of grad g(p)) - grad g(p) . p. Valid for every finite p.
template <class T>
double check(const bound_view<T>& v, std::span<const double> p) {
  const index_t n = v.embeddings.rows;
  const index_t d = v.embeddings.cols;
  DATAMASK_EXPECTS(static_cast<index_t>(p.size()) == n, "certificate", "has ", p.size(),
                   " values, expected one per row (", n, ")");
  for (double x : p)
    DATAMASK_EXPECTS(std::isfinite(x), "certificate", "holds a value that is not finite");
  DATAMASK_EXPECTS(v.weight >= 0.0 && std::isfinite(v.weight), "weight",
                   "the relaxation is concave only for a finite weight >= 0, found ", v.weight);
  const index_t size = v.size;
  const double b =
      size >= 2 ? v.weight / (static_cast<double>(size) * static_cast<double>(size - 1)) : 0.0;
  std::vector<double> s(static_cast<std::size_t>(d), 0.0);
  for (index_t i = 0; i < n; ++i) {
    const double w = p[static_cast<std::size_t>(i)] * v.inv_norms[i];
    if (w == 0.0) continue;
    for (index_t j = 0; j < d; ++j)
      s[static_cast<std::size_t>(j)] += w * static_cast<double>(v.embeddings(i, j));
  }
  double sq = 0.0;
  for (double x : s) sq += x * x;
  std::vector<double> grad(static_cast<std::size_t>(n));
  double g = -b * sq;
  double gp = 0.0;
  for (index_t i = 0; i < n; ++i) {
    double dot = 0.0;
    for (index_t j = 0; j < d; ++j)
      dot += static_cast<double>(v.embeddings(i, j)) * s[static_cast<std::size_t>(j)];
    const double inv = v.inv_norms[i];
    const double a = (v.linear.empty() ? 0.0 : v.linear[static_cast<std::size_t>(i)]) +
                     b * v.sq_norms[i] * inv * inv;
    const double gi = a - 2.0 * b * inv * dot;
    grad[static_cast<std::size_t>(i)] = gi;
    g += a * p[static_cast<std::size_t>(i)];
    gp += gi * p[static_cast<std::size_t>(i)];
  }
  return g + host_top_sum(std::move(grad), size) - gp;
}

}  // namespace datamask::detail::pairwise_bound
