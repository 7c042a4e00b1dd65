// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Small trivially copyable functors for an executor's `for_each` and `reduce`, callable
/// on host and device (`DATAMASK_HOST_DEVICE`): what a relaxation or a device evaluation writes
/// its passes with, ours and a user's alike (examples/relaxed_metric.cpp).

#include "datamask/core/config.hpp"
#include "datamask/core/types.hpp"

namespace datamask::ops {

/// @brief a + b, the operation of a sum (`reduce(n, term, plus{}, 0.0)`).
struct plus {
  DATAMASK_HOST_DEVICE double operator()(double a, double b) const { return a + b; }
};
/// @brief The larger of a and b (identity: -infinity, or 0 for magnitudes).
struct max {
  DATAMASK_HOST_DEVICE double operator()(double a, double b) const { return a < b ? b : a; }
};
/// @brief The smaller of a and b (identity: +infinity).
struct min {
  DATAMASK_HOST_DEVICE double operator()(double a, double b) const { return b < a ? b : a; }
};

/// @brief values[i], a term of `reduce`.
struct read {
  const double* values;
  DATAMASK_HOST_DEVICE double operator()(index_t i) const { return values[i]; }
};
/// @brief values[i]^2, a term of `reduce`.
struct square {
  const double* values;
  DATAMASK_HOST_DEVICE double operator()(index_t i) const { return values[i] * values[i]; }
};
/// @brief a[i] b[i], a term of `reduce` (a dot product).
struct product {
  const double* a;
  const double* b;
  DATAMASK_HOST_DEVICE double operator()(index_t i) const { return a[i] * b[i]; }
};
/// @brief |values[i]|, a term of `reduce` (a largest magnitude with `max` and 0).
struct magnitude {
  const double* values;
  DATAMASK_HOST_DEVICE double operator()(index_t i) const { return values[i] < 0.0 ? -values[i] : values[i]; }
};

/// @brief out[i] = value, for `for_each`.
struct fill {
  double* out;
  double value;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const { out[i] = value; }
};
/// @brief out[i] *= factor, for `for_each`.
struct scale {
  double* out;
  double factor;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const { out[i] *= factor; }
};
/// @brief out[i] += factor * v[i], for `for_each`.
struct add_scaled {
  double* out;
  const double* v;
  double factor;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const { out[i] += factor * v[i]; }
};

}  // namespace datamask::ops
