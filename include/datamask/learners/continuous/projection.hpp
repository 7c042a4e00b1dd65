// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The continuous ascent's parameterisations (its Projection policy): how the iterate x
/// becomes inclusion probabilities p with sum p = S over the candidates. Written once against an
/// executor (executor/concept.hpp); every sum is its fixed-tree `reduce`, so p has the same bits
/// on every executor and thread count.
/// - `capped_simplex_projection` (projected): p is the Euclidean projection of x onto
///   {0 <= p <= 1, sum p = S}, p_i = clamp(x_i - tau, 0, 1), and x becomes p;
/// - `sigmoid_projection` (logits): p_i = sigmoid(x_i - tau).

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <utility>

#include "datamask/core/config.hpp"
#include "datamask/exec/ops.hpp"
#include "datamask/exec/reduce.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

/// @brief The candidates of an ascent in the executor's memory: `count` rows, and `count` more
/// indices of scratch for the projection's narrowed band.
struct candidate_rows {
  const index_t* rows = nullptr;
  index_t count = 0;
  index_t* band = nullptr;
};

namespace detail::continuous {

DATAMASK_HOST_DEVICE inline double sigmoid(double z) {
  return z >= 0.0 ? 1.0 / (1.0 + ::exp(-z)) : ::exp(z) / (1.0 + ::exp(z));
}

/// std::clamp(z, 0.0, 1.0), callable on a device.
DATAMASK_HOST_DEVICE inline double clamp01(double z) { return z < 0.0 ? 0.0 : (1.0 < z ? 1.0 : z); }

/// Terms of the projections' reductions over candidates k (rows[k] is the row).
struct value_at {
  const index_t* rows;
  const double* y;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const { return y[rows[k]]; }
};
/// The most sums one pass of `bisect` asks for: 2^4 - 1 midpoints.
inline constexpr int max_search_depth = 4;
inline constexpr int max_midpoints = (1 << max_search_depth) - 1;
/// Sum j's term of candidate k: clamp(y_i - tau_j, 0, 1), or (sigmoid) sigmoid(y_i - tau_j).
struct mapped_at {
  const index_t* rows;
  const double* y;
  bool sigmoid_map;
  double tau[max_midpoints];
  DATAMASK_HOST_DEVICE double operator()(index_t j, index_t k) const {
    const double z = y[rows[k]] - tau[j];
    return sigmoid_map ? sigmoid(z) : clamp01(z);
  }
};
/// 1 where y_i >= `at`: the rows whose p is 1 for every tau in the narrowed bracket.
struct at_least {
  const index_t* rows;
  const double* y;
  double at;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const { return y[rows[k]] >= at ? 1.0 : 0.0; }
};
/// Whether lo < y_i < hi: the band whose p depends on tau within the bracket.
struct strictly_between {
  const index_t* rows;
  const double* y;
  double lo;
  double hi;
  DATAMASK_HOST_DEVICE bool operator()(index_t k) const { return y[rows[k]] > lo && y[rows[k]] < hi; }
};
/// band[j] = rows[band[j]]: candidate positions to rows, in place.
struct positions_to_rows {
  const index_t* rows;
  index_t* band;
  DATAMASK_HOST_DEVICE void operator()(index_t j) const { band[j] = rows[band[j]]; }
};
/// part 0: y_i on the free set {0 < y_i - tau < 1}; 1: 1 on the ones; 2: 1 on the free set.
struct free_part {
  const index_t* rows;
  const double* y;
  double tau;
  int part;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const {
    const double z = y[rows[k]] - tau;
    if (part == 1) return z >= 1.0 ? 1.0 : 0.0;
    if (z >= 1.0 || !(z > 0.0)) return 0.0;
    return part == 0 ? y[rows[k]] : 1.0;
  }
};
/// 1 where tau and `exact` put y_i in different parts (zeros, free, ones).
struct part_changed {
  const index_t* rows;
  const double* y;
  double tau;
  double exact;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const {
    const double z0 = y[rows[k]] - tau;
    const double z1 = y[rows[k]] - exact;
    return ((z0 >= 1.0) != (z1 >= 1.0) || (z0 > 0.0) != (z1 > 0.0)) ? 1.0 : 0.0;
  }
};
/// p_i = clamp(y_i - tau, 0, 1), or (sigmoid) sigmoid(y_i - tau); and copy_to[i] = p_i unless
/// `copy_to` is null.
struct write_p {
  const index_t* rows;
  const double* y;
  double tau;
  double* p;
  bool sigmoid_map;
  double* copy_to;
  DATAMASK_HOST_DEVICE void operator()(index_t k) const {
    const index_t i = rows[k];
    p[i] = sigmoid_map ? sigmoid(y[i] - tau) : clamp01(y[i] - tau);
    if (copy_to != nullptr) copy_to[i] = p[i];
  }
};

/// Levels of a bisection decided per trip to the host: the executor's `search_depth` (1 when it
/// has none), at most `max_search_depth`.
template <class Exec>
constexpr int search_depth() {
  if constexpr (requires { Exec::search_depth; }) {
    return Exec::search_depth < 1 ? 1 : (Exec::search_depth > max_search_depth ? max_search_depth : Exec::search_depth);
  } else {
    return 1;
  }
}

/// Halves [lo, hi] from iteration `it` until iteration `last` or until hi - lo <= tol max(1, |hi|):
/// the midpoint replaces lo where its sum exceeds s, else hi. `depth` halvings are decided per
/// pass: `sums(taus, count, out)` gives the sums at the midpoints of every path of the next
/// `depth` levels (count = 2^depth - 1, in heap order: node j's children are 2j, where the sum
/// did not exceed s, and 2j + 1), each computed as the one-at-a-time bisection computes it, so
/// lo and hi end with its bits on any depth. Returns the iteration reached.
template <class Sums>
int bisect(double& lo, double& hi, int it, int last, int depth, double s, double tol, const Sums& sums) {
  auto wide = [&] { return hi - lo > tol * std::max(1.0, std::abs(hi)); };
  double a[max_midpoints + 1];
  double b[max_midpoints + 1];
  double taus[max_midpoints];
  double got[max_midpoints];
  while (it < last && wide()) {
    const int count = (1 << std::min(depth, last - it)) - 1;
    a[0] = lo;  // node j's bracket is [a[j - 1], b[j - 1]]
    b[0] = hi;
    for (int j = 1; j <= count; ++j) {
      const double mid = 0.5 * (a[j - 1] + b[j - 1]);
      taus[j - 1] = mid;
      if (2 * j + 1 <= count) {
        a[2 * j - 1] = a[j - 1];
        b[2 * j - 1] = mid;
        a[2 * j] = mid;
        b[2 * j] = b[j - 1];
      }
    }
    sums(taus, count, got);
    for (int j = 1; j <= count && it < last && wide(); ++it) {
      const bool above = got[j - 1] > s;
      (above ? lo : hi) = taus[j - 1];
      j = 2 * j + (above ? 1 : 0);
    }
  }
  return it;
}

/// The sums of `mapped_at` over `count` candidates at `taus`, plus `offset`, for `bisect`.
template <class Exec>
struct mapped_sums {
  Exec& exec;
  double* partials;  // (2^depth - 1) tree_reduce_scratch(count)
  const index_t* rows;
  index_t count;
  const double* y;
  bool sigmoid_map;
  double offset;
  void operator()(const double* taus, int n, double* out) const {
    mapped_at term{rows, y, sigmoid_map, {}};
    std::copy(taus, taus + n, term.tau);
    tree_reduce_many(exec, partials, count, n, term, ops::plus{}, 0.0, std::span<double>(out, static_cast<std::size_t>(n)));
    for (int j = 0; j < n; ++j) out[j] = offset + out[j];
  }
};

/// The smallest and the largest y over the candidates.
template <class Exec>
std::pair<double, double> range_of(Exec& exec, const candidate_rows& c, const double* y) {
  const value_at at{c.rows, y};
  return {exec.reduce(c.count, at, ops::min{}, std::numeric_limits<double>::infinity()),
          exec.reduce(c.count, at, ops::max{}, -std::numeric_limits<double>::infinity())};
}

}  // namespace detail::continuous

/// @brief tau such that sum_{candidates} clamp(y_i - tau, 0, 1) = s, by bisection and then the
/// exact value for the free set found; writes p_i = clamp(y_i - tau, 0, 1) (and, with
/// `copy_back`, y_i = p_i) on the candidates. Returns tau.
///
/// Why the narrowing after 8 halvings: at n = 10^6 a hundred passes over every candidate cost
/// more than the relaxation's gradient; once tau is known to lie in [lo, hi], rows with y <= lo
/// give 0 and rows with y >= hi + 1 give 1 for every tau there, so later passes run over the rows
/// in between only (after the ascent's first steps, a few per cent of them). An executor whose
/// round trips cost more than passes (`search_depth`, the Thrust executor under CUDA) decides
/// several halvings per pass, with the same bits (`bisect`).
template <class Exec>
double project_capped_simplex(Exec& exec, const candidate_rows& c, double* y, double s, double* p, bool copy_back) {
  namespace dc = detail::continuous;
  auto [lo, hi] = dc::range_of(exec, c, y);
  lo -= 1.0;  // sum = |c| >= s
  constexpr double tol = 1e-15;
  constexpr int depth = dc::search_depth<Exec>();
  auto scope = exec.scope();
  double* partials = scope.template scratch<double>(((1 << depth) - 1) * tree_reduce_scratch(c.count));
  int it = dc::bisect(lo, hi, 0, 8, depth, s, tol, dc::mapped_sums<Exec>{exec, partials, c.rows, c.count, y, false, 0.0});
  if (it == 8 && hi - lo > tol * std::max(1.0, std::abs(hi))) {
    const double ones_fixed = exec.reduce(c.count, dc::at_least{c.rows, y, hi + 1.0}, ops::plus{}, 0.0);
    const index_t count = exec.keep_if(c.count, dc::strictly_between{c.rows, y, lo, hi + 1.0}, c.band);
    exec.for_each(count, dc::positions_to_rows{c.rows, c.band});
    it = dc::bisect(lo, hi, it, 100, depth, s, tol, dc::mapped_sums<Exec>{exec, partials, c.band, count, y, false, ones_fixed});
  }
  double tau = 0.5 * (lo + hi);
  // The exact tau for the free set {0 < y - tau < 1}, kept when it leaves that set unchanged.
  const double free_sum = exec.reduce(c.count, dc::free_part{c.rows, y, tau, 0}, ops::plus{}, 0.0);
  const double ones = exec.reduce(c.count, dc::free_part{c.rows, y, tau, 1}, ops::plus{}, 0.0);
  const double free_count = exec.reduce(c.count, dc::free_part{c.rows, y, tau, 2}, ops::plus{}, 0.0);
  if (free_count > 0.0) {
    const double exact = (free_sum + ones - s) / free_count;
    if (exec.reduce(c.count, dc::part_changed{c.rows, y, tau, exact}, ops::plus{}, 0.0) == 0.0) tau = exact;
  }
  exec.for_each(c.count, dc::write_p{c.rows, y, tau, p, false, copy_back ? y : nullptr});
  return tau;
}

/// @brief tau such that sum_{candidates} sigmoid(l_i - tau) = s, by bisection; writes
/// p_i = sigmoid(l_i - tau) on the candidates. Returns tau.
template <class Exec>
double sigmoid_shift(Exec& exec, const candidate_rows& c, const double* l, double s, double* p) {
  namespace dc = detail::continuous;
  auto [lo, hi] = dc::range_of(exec, c, l);
  lo -= 50.0;
  hi += 50.0;
  constexpr int depth = dc::search_depth<Exec>();
  auto scope = exec.scope();
  double* partials = scope.template scratch<double>(((1 << depth) - 1) * tree_reduce_scratch(c.count));
  (void)dc::bisect(lo, hi, 0, 200, depth, s, 1e-13,
                   dc::mapped_sums<Exec>{exec, partials, c.rows, c.count, l, true, 0.0});
  const double tau = 0.5 * (lo + hi);
  exec.for_each(c.count, dc::write_p{c.rows, l, tau, p, true, nullptr});
  return tau;
}

/// @brief The projected parameterisation: the iterate is p itself; after each step x is
/// projected onto the capped simplex and becomes p. Keeps exact zeros and ones (the read-out
/// loses little, and DiSF's scatter skips the zero rows).
struct capped_simplex_projection {
  static constexpr bool logits = false;
  /// p from the stepped iterate x (x becomes p); returns tau.
  template <class Exec>
  double operator()(Exec& exec, const candidate_rows& c, double* x, double s, double* p) const {
    return project_capped_simplex(exec, c, x, s, p, true);
  }
};

/// @brief The logits parameterisation: the iterate is L, p_i = sigmoid(L_i - tau) with tau by
/// bisection so that sum p = S; the ascent's direction is dF/dL_i = p_i (1 - p_i) dF/dp_i.
struct sigmoid_projection {
  static constexpr bool logits = true;
  /// p from the stepped logits x; returns tau.
  template <class Exec>
  double operator()(Exec& exec, const candidate_rows& c, double* x, double s, double* p) const {
    return sigmoid_shift(exec, c, x, s, p);
  }
};

}  // namespace datamask
