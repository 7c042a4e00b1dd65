// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Passes several objectives' device evaluations share (`device_evaluable`).
///
/// Trivially copyable functors with `DATAMASK_HOST_DEVICE` call operators, for an executor's
/// `for_each`; they know nothing of Thrust.

#include "datamask/core/concepts.hpp"
#include "datamask/core/config.hpp"
#include "datamask/core/detail/sorted_search.hpp"
#include "datamask/exec/ops.hpp"
#include "datamask/core/types.hpp"

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

// Each subset's rows sorted, and membership in them (detail/sorted_search.hpp), as the
// evaluations name them.
using detail::contains;
using detail::sorted_rows;

/// The value of a subset too small to score (fewer rows than an objective needs) is 0: writes
/// it for all G subsets of `b` and returns true when `empty`, else does nothing.
template <class Exec, class T>
bool zero_when(bool empty, Exec& exec, const batch_view<T>& b, double* out) {
  if (empty) exec.for_each(b.subsets.rows, ops::fill{out, 0.0});
  return empty;
}

}  // namespace datamask::detail::device_passes
