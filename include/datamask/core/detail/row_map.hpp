// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief A row of a block as an Eigen vector, for the host code of the objectives and the polish,
/// and a prefetch of scattered rows.

#include <Eigen/Core>

#include "datamask/core/half.hpp"
#include "datamask/core/types.hpp"

namespace datamask::detail {

/// `count` values at `p` as an Eigen column vector of C, without a copy: a cast of a map of them,
/// or for a 16-bit element (which Eigen does not know) each value widened to float, then cast.
template <class C, class T>
[[nodiscard]] auto values_as(const T* p, index_t count) {
  if constexpr (half_precision<T>) {
    return Eigen::Matrix<C, Eigen::Dynamic, 1>::NullaryExpr(
        count, [p](Eigen::Index j) { return static_cast<C>(static_cast<float>(p[j])); });
  } else {
    return Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(p, count).template cast<C>();
  }
}

/// Row `i` of `x` as an Eigen column vector of C (`values_as`).
template <class C, class T>
[[nodiscard]] auto row_as(const matrix_view<const T>& x, index_t i) {
  return values_as<C>(x.row(i), x.cols);
}

/// Asks the CPU to start loading the 64-byte line holding `p` into its caches. On x86 an asm
/// statement: GCC 12 deletes some `__builtin_prefetch` calls (a loop of them under a branch
/// compiled to nothing), and an asm statement stays. A no-op on compilers without either.
inline void request_line(const void* p) {
#if DATAMASK_X86_F16C
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#elif defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p);
#else
  (void)p;
#endif
}

/// Asks the CPU to start loading `count` values at `p` (one request per 64-byte line), for a
/// loop over rows scattered in memory, which the hardware prefetcher cannot predict.
template <class T>
void prefetch(const T* p, index_t count) {
  constexpr index_t line = 64 / static_cast<index_t>(sizeof(T)) > 0 ? 64 / static_cast<index_t>(sizeof(T)) : 1;
  for (index_t j = 0; j < count; j += line) request_line(p + j);
}

}  // namespace datamask::detail
