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
#include <utility>

#include "datamask/config.hpp"
#include "datamask/executor/ops.hpp"
#include "datamask/types.hpp"

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
struct clamped_at {
  const index_t* rows;
  const double* y;
  double tau;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const { return clamp01(y[rows[k]] - tau); }
};
struct sigmoid_at {
  const index_t* rows;
  const double* y;
  double tau;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const { return sigmoid(y[rows[k]] - tau); }
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
/// in between only (after the ascent's first steps, a few per cent of them).
template <class Exec>
double project_capped_simplex(Exec& exec, const candidate_rows& c, double* y, double s, double* p, bool copy_back) {
  namespace dc = detail::continuous;
  auto [lo, hi] = dc::range_of(exec, c, y);
  lo -= 1.0;  // sum = |c| >= s
  const index_t* rows = c.rows;
  index_t count = c.count;
  double ones_fixed = 0.0;
  for (int it = 0; it < 100 && hi - lo > 1e-15 * std::max(1.0, std::abs(hi)); ++it) {
    if (it == 8) {
      ones_fixed = exec.reduce(c.count, dc::at_least{c.rows, y, hi + 1.0}, ops::plus{}, 0.0);
      count = exec.keep_if(c.count, dc::strictly_between{c.rows, y, lo, hi + 1.0}, c.band);
      exec.for_each(count, dc::positions_to_rows{c.rows, c.band});
      rows = c.band;
    }
    const double mid = 0.5 * (lo + hi);
    (ones_fixed + exec.reduce(count, dc::clamped_at{rows, y, mid}, ops::plus{}, 0.0) > s ? lo : hi) = mid;
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
  for (int it = 0; it < 200 && hi - lo > 1e-13 * std::max(1.0, std::abs(hi)); ++it) {
    const double mid = 0.5 * (lo + hi);
    (exec.reduce(c.count, dc::sigmoid_at{c.rows, l, mid}, ops::plus{}, 0.0) > s ? lo : hi) = mid;
  }
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
