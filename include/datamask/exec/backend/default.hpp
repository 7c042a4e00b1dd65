// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief `datamask::default_backend`: the backend `learner<>` and `datamask::select` use when
/// none is named.
///
/// It follows the compiler: under nvcc (`__CUDACC__`) it is `thrust_backend` on the GPU; under
/// any other compiler it is `eigen_backend`, and this header then includes nothing of Thrust.
/// Override before including any datamask header:
/// - `#define DATAMASK_DEFAULT_BACKEND_EIGEN` keeps the CPU backend under nvcc;
/// - `#define DATAMASK_DEFAULT_BACKEND_THRUST` picks the Thrust backend under a host compiler
///   (Thrust's device system then decides where it runs: OMP with `datamask::thrust_omp`).
/// A backend named as a template argument (`learner<thrust_backend>`) always wins.

#include "datamask/exec/backend/eigen.hpp"

#if defined(DATAMASK_DEFAULT_BACKEND_EIGEN) && defined(DATAMASK_DEFAULT_BACKEND_THRUST)
#error "datamask: define at most one of DATAMASK_DEFAULT_BACKEND_EIGEN and DATAMASK_DEFAULT_BACKEND_THRUST"
#endif

#if defined(DATAMASK_DEFAULT_BACKEND_THRUST) || \
    (defined(__CUDACC__) && !defined(DATAMASK_DEFAULT_BACKEND_EIGEN))
#include "datamask/exec/backend/thrust.hpp"
namespace datamask {
/// @brief The backend used when none is named: here the Thrust backend.
using default_backend = thrust_backend;
}  // namespace datamask
#else
namespace datamask {
/// @brief The backend used when none is named: here the CPU backend.
using default_backend = eigen_backend;
}  // namespace datamask
#endif
