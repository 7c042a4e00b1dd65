// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Pairwise similarity (PWS): minus the mean cosine similarity over ordered pairs, with
/// everything the backends and the greedy baselines need from it: host evaluation, the greedy
/// state (`incremental_objective`), the device evaluator (`device_evaluable`) and the
/// relaxation the continuous learner ascends (`relaxable_objective`).

#include <algorithm>
#include <cmath>
#include <span>
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "datamask/core/concepts.hpp"
#include "datamask/core/config.hpp"
#include "datamask/core/detail/chunked_sum.hpp"
#include "datamask/core/detail/parallel.hpp"
#include "datamask/core/detail/row_map.hpp"
#include "datamask/exec/host.hpp"
#include "datamask/objectives/detail/device_passes.hpp"
#include "datamask/objectives/detail/pairwise_bound.hpp"
#include "datamask/exec/ops.hpp"

namespace datamask {

namespace detail::pairwise_impl {

/// The value of position t of subset g that pairwise similarity sums for column j: x[r, j] /
/// ||x_r|| with r the subset's t-th row.
template <class T>
struct unit_entry {
  const batch_view<T>* b;
  index_t g;
  index_t j;
  DATAMASK_HOST_DEVICE double operator()(index_t t) const {
    const index_t r = b->subsets(g, t);
    return static_cast<double>(b->embeddings(r, j)) * b->inv_norms[r];
  }
};

/// ||u_r||^2 = ||x_r||^2 / ||x_r||^2 (1, or 0 for a zero row) of position t of subset g.
template <class T>
struct self_entry {
  const batch_view<T>* b;
  index_t g;
  DATAMASK_HOST_DEVICE double operator()(index_t t) const {
    const index_t r = b->subsets(g, t);
    const double w = b->inv_norms[r];
    return b->sq_norms[r] * w * w;
  }
};

/// Device pass 1: the chunk sums (core/detail/chunked_sum.hpp) of every subset's unit rows and
/// of their squared norms: part[(g nc + c) (d + 1) + j] for column j < d, and the squared norms'
/// at j = d. One output per call, in double. A subset of one chunk sums in the host's order (the
/// same column sums as the host's evaluation); a longer one in chunks.
template <class T>
struct chunk_pass {
  batch_view<T> b;
  index_t nc;  ///< chunks per subset
  double* part;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const {
    const index_t d = b.embeddings.cols;
    const index_t j = i % (d + 1);
    const index_t gc = i / (d + 1);
    const index_t g = gc / nc;
    const index_t c = gc % nc;
    const index_t k = b.subsets.cols;
    part[i] = j < d ? chunk_sum(k, c, unit_entry<T>{&b, g, j}) : chunk_sum(k, c, self_entry<T>{&b, g});
  }
};

/// Device pass 2 (after the chunk sums' totals, `chunk_totals`, where a subset has several
/// chunks): out[g] = -(||s_g||^2 - sum_i ||u_i||^2) / (k (k - 1)), k >= 2.
template <class T>
struct finish {
  batch_view<T> b;
  const double* sums;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t g) const {
    const index_t k = b.subsets.cols;
    const index_t d = b.embeddings.cols;
    const double* s = sums + g * (d + 1);
    double sq = 0.0;
    for (index_t j = 0; j < d; ++j) sq += s[j] * s[j];
    out[g] = -(sq - s[d]) / (static_cast<double>(k) * static_cast<double>(k - 1));
  }
};

/// The greedy state. With s = sum of the unit rows of S and P = ||s||^2 - sum ||u||^2 (the sum
/// of cosines over ordered pairs), F(S + i) = -(P + 2 s.u_i) / ((k + 1) k). Each pick is a
/// rank-one change of the Gram matrix, carried by the update of s; a gain costs one dot
/// product. The candidate part -2 s.u_i / ((k + 1) k) can grow as S grows (F is normalised by
/// |S|, so not submodular): no `diminishing_gains`, lazy greedy re-scores it every round.
template <class T>
struct state {
  matrix_view<const T> x;
  std::span<const double> inv;
  Eigen::VectorXd s;
  double pairs = 0.0;
  index_t k = 0;
  int threads = 0;

  explicit state(const greedy_block<T>& b)
      : x(b.embeddings), inv(b.inv_norms), s(Eigen::VectorXd::Zero(b.embeddings.cols)), threads(b.threads) {}

  /// u_i . s.
  [[nodiscard]] double dot(index_t i) const {
    double v = 0.0;
    row_dots_of(x, &i, 1, s.data(), &v);
    return v * inv[i];
  }
  [[nodiscard]] double value() const {
    return k < 2 ? 0.0 : -pairs / (static_cast<double>(k) * static_cast<double>(k - 1));
  }
  void accumulate(std::span<const index_t> cands, std::span<double> out, double w) const {
    if (k == 0) return;  // a singleton scores 0
    const double div = static_cast<double>(k + 1) * static_cast<double>(k);
    const auto nc = static_cast<index_t>(cands.size());
    // A dot product (2 d operations) per candidate: below parallel_min_work the round opens no
    // region (a region per round costs more than it saves then, and far more on a loaded machine).
    detail::parallel_for((nc + 255) / 256, threads, [&](index_t b) {
      const index_t first = b * 256;
      const index_t count = std::min<index_t>(nc - first, 256);
      double dots[256];
      row_dots_of(x, cands.data() + first, count, s.data(), dots);
      for (index_t c = 0; c < count; ++c) out[first + c] += w * (-2.0 * (dots[c] * inv[cands[first + c]]) / div);
    }, 256.0 * 2.0 * static_cast<double>(x.cols));
  }
  [[nodiscard]] double common() const {
    if (k == 0) return 0.0;
    return -pairs / (static_cast<double>(k + 1) * static_cast<double>(k)) - value();
  }
  void add(index_t j) {
    pairs += 2.0 * dot(j);
    s += detail::row_as<double>(x, j) * inv[j];
    ++k;
  }
};

/// The relaxation's row weights: w_i = p_i / ||e_i||, so that sum_i w_i e_i = sum_i p_i u_i.
template <class T>
struct unit_weight {
  relax_view<T> v;
  double* w;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const { w[i] = v.p.data()[i] * v.inv_norms[i]; }
};

/// p_i^2 c_i, a term of sum_i p_i^2 c_i (c_i = ||u_i||^2: 1, or 0 for a zero row).
template <class T>
struct self_weight {
  relax_view<T> v;
  DATAMASK_HOST_DEVICE double operator()(index_t i) const {
    const double* p = v.p.data();
    return p[i] * p[i] * v.sq_norms[i] * v.inv_norms[i] * v.inv_norms[i];
  }
};

/// grad_i = -(2 u_i . s - 2 p_i c_i) / norm, from grad_i = e_i . s (`row_dots`).
template <class T>
struct relax_gradient {
  relax_view<T> v;
  double norm;
  double* grad;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const {
    const double w = v.inv_norms[i];
    grad[i] = -(2.0 * grad[i] * w - 2.0 * v.p.data()[i] * v.sq_norms[i] * w * w) / norm;
  }
};

/// Pairwise similarity: P = ||s||^2 - sum c_i over the set; a swap changes P by
/// 2 c_r - 2 u_r.s + 2 u_a.s - 2 u_r.u_a. O(d) per pair once u.s is known for the candidates.
template <class T>
struct swaps {
  subset_view<T> base;
  Eigen::VectorXd s;
  double k = 0.0;
  // u_i . s for the rows last prepared (the round's candidates: a few dozen). Why not one value
  // per row of the block: the polish's double-swap search copies the state once per first swap,
  // and n values a copy made it copy 36 x 8 MB at 10^6 rows.
  std::vector<index_t> us_rows;
  std::vector<double> us;
  index_t d = 0;

  Eigen::VectorXd unit(index_t i) const {
    return row_as<double>(base.embeddings, i) * base.inv_norms[i];
  }
  double c(index_t i) const { return base.sq_norms[i] * base.inv_norms[i] * base.inv_norms[i]; }
  swaps(const subset_view<T>& v, std::span<const index_t> sel)
      : base(v), s(Eigen::VectorXd::Zero(v.embeddings.cols)), k(static_cast<double>(sel.size())),
        d(v.embeddings.cols) {
    for (index_t i : sel) s += unit(i);
  }
  void prepare(std::span<const index_t> removals, std::span<const index_t> additions) {
    us_rows.assign(removals.begin(), removals.end());
    us_rows.insert(us_rows.end(), additions.begin(), additions.end());
    us.resize(us_rows.size());
    for (std::size_t t = 0; t < us_rows.size(); ++t) us[t] = unit(us_rows[t]).dot(s);
  }
  /// u_i . s: the prepared value, or (a row not prepared) the same product now.
  [[nodiscard]] double us_of(index_t i) const {
    const auto at = std::find(us_rows.begin(), us_rows.end(), i);
    return at != us_rows.end() ? us[static_cast<std::size_t>(at - us_rows.begin())] : unit(i).dot(s);
  }
  double delta(index_t r, index_t a) const {
    if (k < 2.0) return 0.0;
    const double dp = 2.0 * c(r) - 2.0 * us_of(r) + 2.0 * us_of(a) - 2.0 * unit(r).dot(unit(a));
    return -dp / (k * (k - 1.0));
  }
  void apply(index_t r, index_t a) { s += unit(a) - unit(r); }
};

}  // namespace detail::pairwise_impl

/// @brief F_pws(U) = -(1 / (k (k - 1))) * sum_{i != j in U} cos(e_i, e_j). Larger is more diverse.
///
/// Computed as -(||s||^2 - sum_i ||u_i||^2) / (k (k - 1)) with s the sum of the unit rows u_i:
/// O(k d) per subset, accumulated in double. A subset of fewer than two items scores 0.
/// Models `incremental_objective`, `marginal_objective`, `device_evaluable`,
/// `relaxable_objective`, `swappable_objective`, `boundable_objective` and `subset_mean_objective`.
struct pairwise_similarity {
  static constexpr std::string_view name = "pairwise";

  /// @brief Its cost per item (`costed_objective`): d for a greedy gain (one dot product with the
  /// selection's sum), 2 d for the relaxation (the weighted column sums, then the row dots).
  static constexpr item_costs costs_per_item(index_t dims, index_t /*neighbors*/) {
    return {static_cast<double>(dims), 2.0 * static_cast<double>(dims)};
  }

  /// @brief Scores one subset.
  template <class T>
  [[nodiscard]] double operator()(const subset_view<T>& s) const {
    const index_t k = s.subset.size;
    if (k < 2) return 0.0;
    const index_t d = s.embeddings.cols;
    // acc = sum of the unit rows, one slice of columns per thread (long slices: rows are read in
    // subset order, which is random in memory, so each read should be long): one thread sums
    // each acc_j over the rows in subset order, so the bits do not depend on the thread count.
    // Why: the continuous learner evaluates its read-out (10^5 rows of a 10^6 block) every
    // iteration, and that tracking, on one thread, was three quarters of a GPU run
    // (benchmarks/GPU.md).
    const index_t slices = std::clamp<index_t>(detail::resolve_threads(s.threads), 1, std::max<index_t>(1, d / 64));
    const index_t slice = (d + slices - 1) / slices;
    Eigen::VectorXd acc = Eigen::VectorXd::Zero(d);
    detail::parallel_for(slices, s.threads, [&](index_t c) {
      const index_t j0 = c * slice;
      const index_t len = std::min(slice, d - j0);
      if (len <= 0) return;
      const matrix_view<const T> columns(s.embeddings.data + j0, s.embeddings.rows, len, s.embeddings.stride);
      row_sums_of(columns, s.subset.data, k, s.inv_norms, acc.data() + j0);
    }, static_cast<double>(k) * static_cast<double>(slice));
    double self = 0.0;
    for (index_t i : s.subset) {
      const double w = s.inv_norms[i];
      self += s.sq_norms[i] * w * w;
    }
    return -(acc.squaredNorm() - self) / (static_cast<double>(k) * static_cast<double>(k - 1));
  }

  /// @brief The mean of F_pws over every set of `size` rows of `s.subset` (`subset_mean_objective`):
  /// each ordered pair of the n rows lies in such a set with probability S (S - 1) / (n (n - 1)), so
  /// the mean of the sets' sums of cosines over S (S - 1) is F_pws of all n rows. S < 2: 0, as
  /// those sets score.
  template <class T>
  [[nodiscard]] double subset_mean(const subset_view<T>& s, index_t size) const {
    return size < 2 ? 0.0 : (*this)(s);
  }

  /// @brief d(s) and every item's marginal d(s) - d(s without it) (`marginal_objective`): with
  /// P = ||acc||^2 - self (the sum of cosines over ordered pairs) as in the call operator,
  /// removing u_t leaves P - 2 u_t . acc + 2 c_t over (k - 1)(k - 2) pairs. O(k d).
  static constexpr bool cheap_marginals = true;  ///< `cheap_marginal_objective`: O(k d), as d(s)
  template <class T>
  double marginals(const subset_view<T>& s, std::span<double> out) const {
    const index_t k = s.subset.size;
    const index_t d = s.embeddings.cols;
    std::fill(out.begin(), out.end(), 0.0);
    if (k < 2) return 0.0;
    auto unit = [&](index_t i) {
      return detail::row_as<double>(s.embeddings, i) * s.inv_norms[i];
    };
    Eigen::VectorXd acc = Eigen::VectorXd::Zero(d);
    double self = 0.0;
    for (index_t i : s.subset) {
      const double w = s.inv_norms[i];
      acc += unit(i);
      self += s.sq_norms[i] * w * w;
    }
    const double pairs = acc.squaredNorm() - self;
    const double kk = static_cast<double>(k);
    const double value = -pairs / (kk * (kk - 1.0));
    for (index_t t = 0; t < k; ++t) {
      const index_t i = s.subset[t];
      const double c = s.sq_norms[i] * s.inv_norms[i] * s.inv_norms[i];
      const double rest = k < 3 ? 0.0 : -(pairs - 2.0 * unit(i).dot(acc) + 2.0 * c) / ((kk - 1.0) * (kk - 2.0));
      out[t] = value - rest;
    }
    return value;
  }

  /// @brief The greedy state over a block (see `incremental_objective`).
  template <class T>
  [[nodiscard]] detail::pairwise_impl::state<T> greedy_state(const greedy_block<T>& b) const {
    return detail::pairwise_impl::state<T>(b);
  }

  /// @brief Exact swap gains on a selection (`swappable_objective`): O(d) per swap once each
  /// round's candidates know their dot product with the selection's sum.
  template <class T>
  [[nodiscard]] detail::pairwise_impl::swaps<T> swap_state(const subset_view<T>& block,
                                                           std::span<const index_t> selection) const {
    return detail::pairwise_impl::swaps<T>(block, selection);
  }

  /// @brief Scores G subsets through a backend's executor (see `device_evaluable`): the chunk
  /// sums of the unit rows and their squared norms (a long subset, a read-out of 10^5 rows, in
  /// many chunks: core/detail/chunked_sum.hpp), their totals (G (d + 1) values), then one
  /// finishing pass per subset. Agrees with the host's evaluation to rounding (the host sums
  /// each column in subset order).
  template <class Exec, class T>
  void evaluate_device(Exec& exec, const batch_view<T>& b, double* out) const {
    namespace pi = detail::pairwise_impl;
    if (detail::device_passes::zero_when(b.subsets.cols < 2, exec, b, out)) return;
    const index_t g_count = b.subsets.rows;
    const index_t width = b.embeddings.cols + 1;
    const index_t nc = detail::subset_chunks(b.subsets.cols);
    double* part = exec.template scratch<double>(g_count * nc * width);
    exec.for_each(g_count * nc * width, pi::chunk_pass<T>{b, nc, part},
                  static_cast<double>(std::min(b.subsets.cols, detail::subset_chunk)));
    double* sums = part;  // one chunk: its sums are the subset's
    if (nc > 1) {
      sums = exec.template scratch<double>(g_count * width);
      exec.for_each(g_count * width, detail::chunk_totals{part, nc, width, sums}, static_cast<double>(nc));
    }
    exec.for_each(g_count, pi::finish<T>{b, sums, out}, static_cast<double>(width));
  }

  /// @brief The relaxation (docs/method.md section 6, the `relaxable_objective` capability): with
  /// u_i the unit rows (u_i = e_i / ||e_i||, 0 for a zero row), c_i = ||u_i||^2 (1, or 0 for a
  /// zero row, as the objective counts it) and s = sum_i p_i u_i,
  ///   F(p) = -(||s||^2 - sum_i p_i^2 c_i) / (S (S - 1)),
  ///   dF/dp_i = -(2 u_i . s - 2 p_i c_i) / (S (S - 1)).
  /// The numerator is the expected sum of cosines over ordered pairs when each item is included
  /// independently with probability p_i; the normaliser is the fixed S (S - 1), so F is that
  /// expectation divided by S (S - 1), and at an integral p of sum S it is F_pws exactly.
  /// Through `exec`: s by `column_sums`, the two sums by `reduce`, u_i . s by `row_dots`: O(n d).
  /// S < 2 gives F = 0 and a zero gradient, as the objective scores sets of fewer than two items.
  template <class Exec, class T>
  double relax(Exec& exec, const relax_view<T>& v, double* grad) const {
    namespace pi = detail::pairwise_impl;
    const index_t n = v.embeddings.rows;
    const index_t d = v.embeddings.cols;
    if (!(v.total >= 2.0)) {
      exec.for_each(n, ops::fill{grad, 0.0});
      return 0.0;
    }
    const double norm = v.total * (v.total - 1.0);
    auto scope = exec.scope();
    double* w = scope.template scratch<double>(n);
    double* s = scope.template scratch<double>(d);
    scope.for_each(n, pi::unit_weight<T>{v, w});
    scope.column_sums(v.embeddings, w, s);
    const double self = scope.reduce(n, pi::self_weight<T>{v}, ops::plus{}, 0.0);
    const double sq = scope.reduce(d, ops::square{s}, ops::plus{}, 0.0);
    scope.row_dots(v.embeddings, s, grad);
    scope.for_each(n, pi::relax_gradient<T>{v, norm, grad});
    return -(sq - self) / norm;
  }

  /// @brief An upper bound on max f over sets of S items for f = linear + weight * F_pws, with its
  /// certificate p (`boundable_objective`, docs/method.md 7.1): Frank-Wolfe with exact line search on
  /// the concave relaxation g(p) = a . p - b ||X^T p||^2 (unit rows, b = weight / (S (S - 1))),
  /// which equals f at every set of S items, started at the selection; the bound at p is
  /// g(p) + (sum of the S largest entries of grad g(p)) - grad g(p) . p, valid for every p.
  /// Written once against `exec` (`column_sums`, `row_dots`, `reduce`; the S largest by a
  /// bisection of counts): every pointer of `v` lives in the executor's memory. Per step one pass
  /// over the block and the S rows of the vertex; `v.iterations` steps (0: 30).
  template <class Exec, class T>
  [[nodiscard]] bound_certificate bound(Exec& exec, const bound_view<T>& v) const {
    DATAMASK_EXPECTS(v.weight >= 0.0 && std::isfinite(v.weight), "weight",
                     "the relaxation is concave only for a finite weight >= 0, found ", v.weight);
    return detail::pairwise_bound::frank_wolfe(exec, v);
  }
  /// @brief `bound` on the host's threads (`v.threads`).
  template <class T>
  [[nodiscard]] bound_certificate bound(const bound_view<T>& v) const {
    host_executor exec(v.threads);
    return bound(exec, v);
  }
  /// @brief The bound p certifies, recomputed on the host in plain loops (valid for every
  /// finite p: g is concave on all of R^n).
  template <class T>
  [[nodiscard]] double check_bound(const bound_view<T>& v, std::span<const double> p) const {
    return detail::pairwise_bound::check(v, p);
  }
};

}  // namespace datamask
