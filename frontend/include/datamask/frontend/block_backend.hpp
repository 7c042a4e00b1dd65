// SPDX-License-Identifier: Apache-2.0
#pragma once

// The backend a front end's blocks run on (datamask-select and the Python module), chosen when
// it is built: one translation unit, block_backend.cpp, instantiates the library's
// `select_block` and `evaluate_rows` on it, compiled by the C++ compiler for the CPU backend or
// by nvcc (as CUDA) for the GPU. The rest of the front end (arguments, files, MPI, nanobind)
// stays C++ and calls these functions, so nvcc compiles only the selection.

#include <optional>
#include <span>
#include <string>

#include <datamask/run/block_select.hpp>

namespace dmfront {

/// The backend of this build's blocks: "eigen" (the CPU), "cuda" (`thrust_backend` on the GPU,
/// built by nvcc) or "thrust-omp" (`thrust_backend` on OpenMP threads: a test build).
[[nodiscard]] std::string block_backend_name();

/// On the GPU: makes the device of `local_rank` (`datamask::device_for_local_rank`) the current
/// one and returns its index; on the CPU: -1.
/// @throws datamask::error when built for CUDA and no device is found
[[nodiscard]] int use_block_device(std::optional<int> local_rank);

/// `datamask::select_block` on this build's backend, on a block of float32, float16 or bfloat16
/// rows (`corpus::with_block`).
[[nodiscard]] datamask::block_result select_block(const datamask::problem<float>& p, datamask::index_t b,
                                                  datamask::index_t s_b, std::optional<double> threshold,
                                                  const datamask::block_run_settings& s,
                                                  const datamask::block_hooks& h = {});
[[nodiscard]] datamask::block_result select_block(const datamask::problem<datamask::float16>& p, datamask::index_t b,
                                                  datamask::index_t s_b, std::optional<double> threshold,
                                                  const datamask::block_run_settings& s,
                                                  const datamask::block_hooks& h = {});
[[nodiscard]] datamask::block_result select_block(const datamask::problem<datamask::bfloat16>& p, datamask::index_t b,
                                                  datamask::index_t s_b, std::optional<double> threshold,
                                                  const datamask::block_run_settings& s,
                                                  const datamask::block_hooks& h = {});

/// `datamask::calibrate_sample` on this build's backend.
[[nodiscard]] std::vector<datamask::term_value> calibrate_sample(const datamask::problem<float>& sample,
                                                                 datamask::index_t subset,
                                                                 const datamask::block_run_settings& s);
/// `datamask::evaluate_rows` on this build's backend (its calibration: that of `select_block`).
[[nodiscard]] datamask::block_result evaluate_rows(const datamask::problem<float>& p, datamask::index_t b,
                                                   std::span<const datamask::index_t> rows,
                                                   std::optional<double> threshold,
                                                   const datamask::block_run_settings& s);
[[nodiscard]] datamask::block_result evaluate_rows(const datamask::problem<datamask::float16>& p, datamask::index_t b,
                                                   std::span<const datamask::index_t> rows,
                                                   std::optional<double> threshold,
                                                   const datamask::block_run_settings& s);
[[nodiscard]] datamask::block_result evaluate_rows(const datamask::problem<datamask::bfloat16>& p, datamask::index_t b,
                                                   std::span<const datamask::index_t> rows,
                                                   std::optional<double> threshold,
                                                   const datamask::block_run_settings& s);

}  // namespace dmfront
