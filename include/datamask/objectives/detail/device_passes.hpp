// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Passes several objectives' device evaluations share (`device_evaluable`).
///
/// Trivially copyable functors with `DATAMASK_HOST_DEVICE` call operators, for an executor's
/// `for_each`; they know nothing of Thrust.

#include "datamask/concepts.hpp"
#include "datamask/config.hpp"
#include "datamask/detail/sorted_search.hpp"
#include "datamask/executor/ops.hpp"
#include "datamask/types.hpp"

namespace datamask::detail::device_passes {

/// out[g] = (scale * sum_a values[g count + a]) / divisor, the sum in index order (the host's
/// order, so the two agree bit for bit).
struct scaled_row_sum {
  const double* values;
  index_t count;
  double scale;
  double divisor;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t g) const {
    double s = 0.0;
    for (index_t a = 0; a < count; ++a) s += values[g * count + a];
    out[g] = scale * s / divisor;
  }
};

/// out[g k, (g + 1) k) = row g of the G x k `rows`, ascending, so that membership in a row is a
/// binary search (`contains`). Heapsort in place: O(k log k) per row, no allocation.
struct sorted_rows {
  matrix_view<const index_t> rows;
  index_t* out;
  DATAMASK_HOST_DEVICE void operator()(index_t g) const {
    const index_t k = rows.cols;
    index_t* a = out + g * k;
    for (index_t t = 0; t < k; ++t) a[t] = rows(g, t);
    for (index_t root = k / 2 - 1; root >= 0; --root) sift_down(a, root, k);
    for (index_t end = k - 1; end > 0; --end) {
      const index_t top = a[0];
      a[0] = a[end];
      a[end] = top;
      sift_down(a, 0, end);
    }
  }
  /// Restores the max-heap below `root` in a[0, end).
  DATAMASK_HOST_DEVICE static void sift_down(index_t* a, index_t root, index_t end) {
    for (index_t child = 2 * root + 1; child < end; child = 2 * root + 1) {
      if (child + 1 < end && a[child] < a[child + 1]) ++child;
      if (!(a[root] < a[child])) return;
      const index_t t = a[root];
      a[root] = a[child];
      a[child] = t;
      root = child;
    }
  }
};

/// Whether `x` is among the `count` ascending values at `sorted`: O(log count).
DATAMASK_HOST_DEVICE inline bool contains(const index_t* sorted, index_t count, index_t x) {
  const index_t at = detail::lower_bound(sorted, count, x);
  return at < count && sorted[at] == x;
}

/// The value of a subset too small to score (fewer rows than an objective needs) is 0: writes
/// it for all G subsets of `b` and returns true when `empty`, else does nothing.
template <class Exec, class T>
bool zero_when(bool empty, Exec& exec, const batch_view<T>& b, double* out) {
  if (empty) exec.for_each(b.subsets.rows, ops::fill{out, 0.0});
  return empty;
}

}  // namespace datamask::detail::device_passes
