// SPDX-License-Identifier: Apache-2.0
// The GPU a process of a multi-process run uses (datamask/exec/backend/device_choice.hpp): its local
// rank from the launcher's environment, modulo the node's device count. Pure functions: no GPU.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>

#include <datamask/exec/backend/device_choice.hpp>

namespace {

/// A getenv over `vars` only.
auto environment(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

TEST_CASE("local_rank_from_environment: Open MPI, MPICH, then Slurm, junk ignored", "[device]") {
  using datamask::local_rank_from_environment;
  CHECK_FALSE(local_rank_from_environment(environment({})).has_value());
  CHECK(local_rank_from_environment(environment({{"SLURM_LOCALID", "3"}})) == 3);
  CHECK(local_rank_from_environment(environment({{"MPI_LOCALRANKID", "2"}, {"SLURM_LOCALID", "3"}})) == 2);
  CHECK(local_rank_from_environment(
            environment({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"MPI_LOCALRANKID", "2"}, {"SLURM_LOCALID", "3"}})) == 1);
  // A value that is not a rank (empty, negative, not a number) is skipped for the next variable.
  CHECK(local_rank_from_environment(environment({{"OMPI_COMM_WORLD_LOCAL_RANK", "x1"}, {"SLURM_LOCALID", "5"}})) == 5);
  CHECK(local_rank_from_environment(environment({{"OMPI_COMM_WORLD_LOCAL_RANK", "-1"}, {"SLURM_LOCALID", "5"}})) == 5);
  CHECK(local_rank_from_environment(environment({{"OMPI_COMM_WORLD_LOCAL_RANK", ""}})) == std::nullopt);
  CHECK(local_rank_from_environment(environment({{"SLURM_LOCALID", "7 "}})) == std::nullopt);
}

TEST_CASE("device_for_local_rank: local rank modulo the devices, none found is an error", "[device]") {
  using datamask::device_for_local_rank;
  CHECK(device_for_local_rank(std::nullopt, 4) == 0);
  CHECK(device_for_local_rank(0, 4) == 0);
  CHECK(device_for_local_rank(3, 4) == 3);
  CHECK(device_for_local_rank(5, 4) == 1);  // 8 ranks on a node of 4 GPUs: two per GPU
  CHECK(device_for_local_rank(7, 1) == 0);
  CHECK_THROWS_WITH(device_for_local_rank(0, 0), Catch::Contains("built for CUDA, but no CUDA device was found"));
  CHECK_THROWS_AS(device_for_local_rank(std::nullopt, -1), datamask::error);
}
