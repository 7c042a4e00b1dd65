// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Which GPU a process of a multi-process run uses: the one of its local rank (its rank
/// among the processes of its node), modulo the node's device count, so that R ranks on a node
/// of G GPUs spread evenly over them.
///
/// The choice is a pure function (tested without a GPU); `use_local_rank_device` applies it
/// with the CUDA runtime and exists only under nvcc.

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

#include "datamask/core/error.hpp"

#if defined(__CUDACC__)
#include <cuda_runtime_api.h>
#endif

namespace datamask {

namespace detail {
inline std::string no_cuda_device_message() {
  return "datamask: built for CUDA, but no CUDA device was found (is a GPU visible to this process? check "
         "nvidia-smi and CUDA_VISIBLE_DEVICES), or rebuild without CUDA to run on the CPU";
}
}  // namespace detail

/// @brief The local rank a launcher gave this process, read through `getenv`: Open MPI's
/// OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, then Slurm's SLURM_LOCALID (srun, with
/// or without MPI); none set, or none a number >= 0: no local rank.
[[nodiscard]] inline std::optional<int> local_rank_from_environment(
    const std::function<const char*(const char*)>& getenv = [](const char* name) { return std::getenv(name); }) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* v = getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long r = std::strtol(v, &end, 10);
    if (*end == '\0' && r >= 0 && r <= 1 << 20) return static_cast<int>(r);
  }
  return std::nullopt;
}

/// @brief The device of a process with local rank `local_rank` (none: device 0) on a node with
/// `devices` devices: the local rank modulo the count.
/// @throws error when `devices` < 1, saying that the program was built for CUDA and found none
[[nodiscard]] inline int device_for_local_rank(std::optional<int> local_rank, int devices) {
  if (devices < 1) throw error(detail::no_cuda_device_message());
  return local_rank ? *local_rank % devices : 0;
}

#if defined(__CUDACC__)
/// @brief Makes the device of `local_rank` (`device_for_local_rank`) this thread's current CUDA
/// device and returns its index; with no local rank, keeps the current device (the caller's
/// choice, or the first of CUDA_VISIBLE_DEVICES) and returns it.
/// @throws error when the runtime finds no device or cannot select it (the runtime's message)
inline int use_local_rank_device(std::optional<int> local_rank) {
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e == cudaErrorMemoryAllocation) {
    // Seen on a GPU machine under `ulimit -v 4G`: the driver maps more address space than that.
    throw error("datamask: the CUDA runtime could not start: out of memory (cudaGetDeviceCount); an "
                "address-space limit (ulimit -v, or a batch system's) below what the CUDA driver maps "
                "stops it even with a GPU present");
  } else if (e != cudaSuccess) {
    throw error(detail::no_cuda_device_message() + " (cudaGetDeviceCount: " + cudaGetErrorString(e) + ")");
  }
  int device = device_for_local_rank(local_rank, devices);
  if (!local_rank) {
    if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
      throw error(std::string("datamask: cudaGetDevice failed: ") + cudaGetErrorString(e));
    }
    return device;
  }
  if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    throw error("datamask: cudaSetDevice(" + std::to_string(device) + ") failed: " + cudaGetErrorString(e));
  }
  return device;
}
#endif

}  // namespace datamask
