// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief datamask-select's main, for a program of one's own objectives: register them, then
/// call `select_main`. That program has every option, output, checkpoint, shard and MPI behaviour
/// of datamask-select, and `--objective` names its objectives too (examples/own_program.cpp):
///
///     int main(int argc, char** argv) {
///       dmfront::objective_registry objectives;  // the built-in ones
///       objectives.add("centred-mean", centred_mean{});
///       return dmfront::select_main(argc, argv, objectives);
///     }
///
/// CMake: `find_package(datamask CONFIG REQUIRED COMPONENTS program)`, then link
/// `datamask::program`.

#include <datamask/frontend/registry.hpp>

namespace dmfront {

/// @brief Runs datamask-select on `argv` with the objectives of `objectives`; returns its exit
/// code (0 success, 2 bad input or usage, 1 internal error, 128 + a signal when interrupted).
/// Call it once, first in `main`: it sets OpenMP's wait policy before any thread exists (unless
/// OMP_WAIT_POLICY is set, by executing the program again with it: code before the call runs
/// twice), and under `mpirun` it initialises and finalises MPI. The caller's SIGINT and SIGTERM
/// handlers are restored on return.
int select_main(int argc, char** argv, const objective_registry& objectives = {});

}  // namespace dmfront
