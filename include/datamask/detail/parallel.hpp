// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief A parallel for over an index range on OpenMP threads (serial without OpenMP).
/// Exceptions thrown by the body are caught on the worker and rethrown on the caller.

#include <exception>
#include <mutex>

#include "datamask/config.hpp"
#include "datamask/types.hpp"

#if DATAMASK_HAS_OPENMP
#include <omp.h>
#endif

namespace datamask::detail {

/// The number of threads a setting of 0 (all) or t > 0 resolves to.
inline int resolve_threads(int requested) {
#if DATAMASK_HAS_OPENMP
  return requested > 0 ? requested : omp_get_max_threads();
#else
  (void)requested;
  return 1;
#endif
}

/// Runs body(i) for i in [0, n). Each i is handled by exactly one thread; callers write results
/// into slot i so the outcome never depends on the thread count. Inside another parallel region
/// the loop runs on the calling thread (no nested teams).
template <class Body>
void parallel_for(index_t n, int threads, Body&& body) {
  std::exception_ptr failure;
  std::mutex guard;
#if DATAMASK_HAS_OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(resolve_threads(threads)) if (n > 1 && !omp_in_parallel())
#endif
  for (index_t i = 0; i < n; ++i) {
    try {
      body(i);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(guard);
      if (!failure) failure = std::current_exception();
    }
  }
  (void)threads;
  if (failure) std::rethrow_exception(failure);
}

}  // namespace datamask::detail
