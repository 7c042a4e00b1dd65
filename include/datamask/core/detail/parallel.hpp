// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief A parallel for over an index range on OpenMP threads (serial without OpenMP).
/// Exceptions thrown by the body are caught on the worker and rethrown on the caller.

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>

#if __has_include(<sched.h>)
#include <sched.h>
#endif

#include "datamask/core/config.hpp"
#include "datamask/core/types.hpp"

#if DATAMASK_HAS_OPENMP
#include <omp.h>
#endif

namespace datamask::detail {

/// The CPUs this process may run on: its affinity mask where the platform tells it (a Slurm
/// task's or an MPI rank's share), else the hardware's threads; at least 1. Read once.
inline int usable_cpus() {
  static const int cpus = [] {
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return cpus;
}

/// The number of threads a setting of 0 (all) or t > 0 resolves to: never more than the CPUs
/// this process may run on, where more threads only wait on each other.
inline int resolve_threads(int requested) {
#if DATAMASK_HAS_OPENMP
  return std::min(requested > 0 ? requested : omp_get_max_threads(), usable_cpus());
#else
  (void)requested;
  return 1;
#endif
}

/// Work (about one arithmetic operation per unit) below which a parallel region costs more than
/// it saves. Opening and joining an OpenMP team costs microseconds on an idle machine, and on a
/// loaded one a join waits for a descheduled worker's next time slice (milliseconds): a hot loop
/// of small regions then runs many times slower than on one thread (issue 9, "threads under load").
inline constexpr double parallel_min_work = 1e5;

/// Runs body(i) for i in [0, n). Each i is handled by exactly one thread; callers write results
/// into slot i so the outcome never depends on the thread count. Inside another parallel region,
/// even a one-thread one (threads = 1), the loop runs on the calling thread: no nested teams.
/// `work_per_item` estimates the cost of one body call (operations); when n times it is below
/// `parallel_min_work` the loop runs on the calling thread. The default always opens a region
/// (for n > 1): callers that cannot estimate their work keep the old behaviour.
template <class Body>
void parallel_for(index_t n, int threads, Body&& body, double work_per_item = parallel_min_work) {
  if (n <= 0) return;
  // One thread asked for: no region either. A team of one is not "in parallel" for Eigen
  // (omp_get_num_threads() == 1), so an Eigen product inside it would open a nested team of
  // its own; see docs/tuning.md, "Threads", on EIGEN_DONT_PARALLELIZE.
  if (n == 1 || resolve_threads(threads) == 1 || static_cast<double>(n) * work_per_item < parallel_min_work) {
    // No region: a single item may parallelise inside (facility location's tiles); small work
    // stays on this thread. Exceptions propagate as they are.
    for (index_t i = 0; i < n; ++i) body(i);
    return;
  }
  std::exception_ptr failure;
  std::mutex guard;
#if DATAMASK_HAS_OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(resolve_threads(threads)) if (omp_get_level() == 0)
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
