// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Compiler switches shared by every header.
///
/// User-settable macros (define before including any datamask header):
/// - `DATAMASK_DEFAULT_BACKEND_EIGEN` / `DATAMASK_DEFAULT_BACKEND_THRUST`: which backend
///   `datamask::default_backend` names (backend/default.hpp); otherwise every behaviour is chosen
///   through template arguments or `datamask::settings`.

#if defined(__CUDACC__) || defined(__HIPCC__)
/// Marks a function callable from host and device code under a CUDA compiler; empty otherwise.
#define DATAMASK_HOST_DEVICE __host__ __device__
#else
#define DATAMASK_HOST_DEVICE
#endif

#if defined(_OPENMP)
#define DATAMASK_HAS_OPENMP 1
#else
#define DATAMASK_HAS_OPENMP 0
#endif
