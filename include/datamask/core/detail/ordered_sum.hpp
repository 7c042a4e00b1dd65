// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief A sum in a fixed order whose terms are computed a batch ahead of their addition.

#include "datamask/core/config.hpp"
#include "datamask/core/types.hpp"

namespace datamask::detail {

/// Terms computed ahead of their addition by `ordered_sum`.
inline constexpr int sum_ahead = 32;

/// @brief term(0) + term(1) + ... + term(k - 1), added in that order from 0.0: the bits of the
/// plain loop `acc += term(t)`. Why the batches: a GPU thread that sums a long run of gathered
/// values (a subset's rows, in draw order) waits for each load before the next in the plain
/// loop; here the loads of `sum_ahead` terms are in flight together. On a CPU it is the plain
/// loop.
template <class Term>
DATAMASK_HOST_DEVICE double ordered_sum(index_t k, const Term& term) {
  double acc = 0.0;
  index_t t = 0;
  for (; t + sum_ahead <= k; t += sum_ahead) {
    double v[sum_ahead];
    for (int l = 0; l < sum_ahead; ++l) v[l] = term(t + l);
    for (int l = 0; l < sum_ahead; ++l) acc += v[l];
  }
  for (; t < k; ++t) acc += term(t);
  return acc;
}

}  // namespace datamask::detail
