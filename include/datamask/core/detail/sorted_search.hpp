// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Binary search in an ascending index array, callable in device code (the Thrust
/// backend's functors and the objectives' device passes). Not API.

#include "datamask/core/config.hpp"
#include "datamask/core/types.hpp"

namespace datamask::detail {

/// The first position in sorted[0, n) whose value is not less than x.
DATAMASK_HOST_DEVICE inline index_t lower_bound(const index_t* sorted, index_t n, index_t x) {
  index_t lo = 0;
  index_t hi = n;
  while (lo < hi) {
    const index_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < x) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

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

}  // namespace datamask::detail
