// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief A program's OpenMP wait policy: passive unless the user chose one. datamask-select,
/// the examples and the benchmarks call `passive_wait_unless_set` first in main(); a program of
/// your own that links the library should too.
///
/// Why: under OpenMP's default policy (libgomp: spin for about 300,000 iterations) a worker that
/// finishes a parallel region busy-waits for the next one. On a machine whose cores other work
/// also uses, those spinning workers take the cores from the thread that has work, and each join
/// waits for a descheduled worker: two threads ran several times slower than one
/// (docs/tuning.md, "Threads", has the measurements). Passive waiting costs a futex wake per region
/// (microseconds). The runtime reads the policy once, when it loads, before main(), so setting
/// it then is too late for the process: the program executes itself again, once, with
/// OMP_WAIT_POLICY=PASSIVE in its environment.

#include <cstdlib>
#include <initializer_list>

#include "datamask/core/config.hpp"

#if defined(__linux__)
#include <unistd.h>
#endif

namespace datamask {

/// @brief Re-executes this program (same pid, arguments and descriptors) with OMP_WAIT_POLICY=PASSIVE
/// when none of OMP_WAIT_POLICY, GOMP_SPINCOUNT (libgomp) and KMP_BLOCKTIME (LLVM's libomp) is
/// set: a user's explicit setting is kept.
/// Returns only when nothing was done or the exec failed (the run then goes on as it is). Call
/// it first in main(), before any thread or output exists. Linux only (/proc/self/exe).
inline void passive_wait_unless_set(char** argv) {
#if defined(__linux__) && DATAMASK_HAS_OPENMP
  for (const char* chosen : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME"}) {
    if (std::getenv(chosen) != nullptr) return;
  }
  // Set before the exec, so the new image sees it and does not execute itself again.
  if (::setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
#else
  (void)argv;
#endif
}

}  // namespace datamask
