// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief A row of a block as an Eigen vector, for the host code of the objectives and the polish.

#include <Eigen/Core>

#include "datamask/types.hpp"

namespace datamask::detail {

/// Row `i` of `x` as an Eigen column vector of T (no copy).
template <class T>
[[nodiscard]] auto row_map(const matrix_view<const T>& x, index_t i) {
  return Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(x.row(i), x.cols);
}

}  // namespace datamask::detail
