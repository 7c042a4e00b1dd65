// SPDX-License-Identifier: Apache-2.0
//
// block_backend.hpp's functions on the backend this translation unit is compiled for: nvcc
// (CUDA): `thrust_backend` on the GPU; DATAMASK_BLOCK_BACKEND_THRUST with a host compiler and
// datamask::thrust_omp: `thrust_backend` on OpenMP threads; otherwise `eigen_backend`.

#include "datamask/frontend/block_backend.hpp"

#include <datamask/exec/backend/device_choice.hpp>

#if defined(__CUDACC__) || defined(DATAMASK_BLOCK_BACKEND_THRUST)
#include <datamask/exec/backend/thrust.hpp>
#endif

namespace dmfront {

namespace {
#if defined(__CUDACC__)
using backend_type = datamask::thrust_backend;
constexpr const char* backend_name = "cuda";
#elif defined(DATAMASK_BLOCK_BACKEND_THRUST)
using backend_type = datamask::thrust_backend;
constexpr const char* backend_name = "thrust-omp";
#else
using backend_type = datamask::eigen_backend;
constexpr const char* backend_name = "eigen";
#endif
}  // namespace

std::string block_backend_name() { return backend_name; }

int use_block_device(std::optional<int> local_rank) {
#if defined(__CUDACC__)
  return datamask::use_local_rank_device(local_rank);
#else
  (void)local_rank;
  return -1;
#endif
}

// One overload per element type, each instantiating the library's templates for its blocks.
#define DATAMASK_BLOCK_FUNCTIONS(T)                                                                                  \
  datamask::block_result select_block(const datamask::problem<T>& p, datamask::index_t b, datamask::index_t s_b,    \
                                      std::optional<double> threshold, const datamask::block_run_settings& s,       \
                                      const datamask::block_hooks& h) {                                             \
    return datamask::select_block<backend_type>(p, b, s_b, threshold, s, h);                                        \
  }                                                                                                                 \
  datamask::block_result evaluate_rows(const datamask::problem<T>& p, datamask::index_t b,                          \
                                       std::span<const datamask::index_t> rows, std::optional<double> threshold,    \
                                       const datamask::block_run_settings& s) {                                     \
    return datamask::evaluate_rows<backend_type>(p, b, rows, threshold, s);                                         \
  }
DATAMASK_BLOCK_FUNCTIONS(float)
DATAMASK_BLOCK_FUNCTIONS(datamask::float16)
DATAMASK_BLOCK_FUNCTIONS(datamask::bfloat16)
#undef DATAMASK_BLOCK_FUNCTIONS

std::vector<datamask::term_value> calibrate_sample(const datamask::problem<float>& sample, datamask::index_t subset,
                                                   const datamask::block_run_settings& s) {
  return datamask::calibrate_sample<backend_type>(sample, subset, s);
}

}  // namespace dmfront
