// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Binary search in an ascending index array, callable in device code (the Thrust
/// backend's functors and the objectives' device passes). Not API.

#include "datamask/config.hpp"
#include "datamask/types.hpp"

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

}  // namespace datamask::detail
