// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: the MPI job this process belongs to, if any. MPI is an optional build
// dependency (DATAMASK_WITH_MPI; Debian libopenmpi-dev): without it, or when no MPI launcher
// started the process, the world is this one process. MPI is initialised only when a launcher
// (mpirun, srun) started the process, so a plain run never pays for it nor depends on it.
//
// What the ranks exchange: while loading, the content hash of each group of input files a rank
// read (each rank reads its groups only: corpus.hpp); then the corpus-wide values they compute
// together (the prune threshold's bisection counts, the calibration sample's candidates and rows:
// dmfront::planning); nothing while they work; at the end each rank sends its finished blocks
// (spread.hpp's document) to rank 0, which writes the outputs. A rank that fails aborts the job: mpirun then exits non-zero, and no output exists,
// since rank 0 writes only after it has received every block.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#if DATAMASK_SELECT_MPI
#include <mpi.h>
#endif

#include <datamask/exec/backend/device_choice.hpp>

#include "args.hpp"

namespace dmselect {

/// Whether an MPI launcher started this process as one of several (Open MPI's mpirun, or a
/// PMI launcher such as srun --mpi=pmix).
inline bool launched_as_ranks() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const char* s = std::getenv(v);
    if (s != nullptr && std::atoi(s) > 1) return true;
  }
  return false;
}

/// Whether an MPI launcher started this process, as one rank or several: Open MPI's mpirun sets
/// OMPI_COMM_WORLD_RANK, PMIx launchers (srun --mpi=pmix) PMIX_RANK, PMI-1/2 ones PMI_RANK.
inline bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

class mpi_world {
 public:
  mpi_world(int& argc, char**& argv) {
#if DATAMASK_SELECT_MPI
    if (launched_by_mpi()) {
      MPI_Init(&argc, &argv);
      MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &size_);
      active_ = true;
      // The rank among the processes that share this node's memory: the GPU a CUDA build uses.
      MPI_Comm node = MPI_COMM_NULL;
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
      int local = 0;
      MPI_Comm_rank(node, &local);
      MPI_Comm_free(&node);
      local_rank_ = local;
    }
#else
    (void)argc;
    (void)argv;
#endif
  }
  mpi_world(const mpi_world&) = delete;
  mpi_world& operator=(const mpi_world&) = delete;
  ~mpi_world() {
#if DATAMASK_SELECT_MPI
    if (active_) MPI_Finalize();
#endif
  }

  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int size() const { return size_; }
  /// This process's rank on its node: from MPI when MPI started it, else from the launcher's
  /// environment (`datamask::local_rank_from_environment`: srun, mpirun without MPI built in);
  /// none for a plain process.
  [[nodiscard]] std::optional<int> local_rank() const { return local_rank_; }
  /// Whether the blocks are spread over several ranks.
  [[nodiscard]] bool spread() const { return size_ > 1; }

  /// Refuses to run as one of several copies started by a launcher when MPI is not built in:
  /// each copy would run every block and write the same outputs.
  static void check_supported() {
#if !DATAMASK_SELECT_MPI
    if (launched_as_ranks()) {
      throw usage_error("started as one of several MPI ranks, but this datamask-select was built without MPI "
                        "(configure with -DDATAMASK_WITH_MPI=ON and libopenmpi-dev installed), or use --shard I/N");
    }
#endif
  }

  void barrier() const {
#if DATAMASK_SELECT_MPI
    if (active_) MPI_Barrier(MPI_COMM_WORLD);
#endif
  }

  /// Every rank's `mine`, on rank 0 (rank order); empty elsewhere. Point to point in pieces of at
  /// most 1 GiB, so no count overflows MPI's int.
  [[nodiscard]] std::vector<std::string> gather(const std::string& mine) const {
    std::vector<std::string> all;
    if (!spread()) {
      all.push_back(mine);
      return all;
    }
#if DATAMASK_SELECT_MPI
    constexpr std::uint64_t piece = std::uint64_t{1} << 30;
    if (rank_ != 0) {
      std::uint64_t n = mine.size();
      MPI_Send(&n, 1, MPI_UINT64_T, 0, 0, MPI_COMM_WORLD);
      for (std::uint64_t at = 0; at < n; at += piece) {
        MPI_Send(mine.data() + at, static_cast<int>(std::min(piece, n - at)), MPI_CHAR, 0, 1, MPI_COMM_WORLD);
      }
      return all;
    }
    all.push_back(mine);
    for (int r = 1; r < size_; ++r) {
      std::uint64_t n = 0;
      MPI_Recv(&n, 1, MPI_UINT64_T, r, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      std::string s(n, '\0');
      for (std::uint64_t at = 0; at < n; at += piece) {
        MPI_Recv(s.data() + at, static_cast<int>(std::min(piece, n - at)), MPI_CHAR, r, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
      }
      all.push_back(std::move(s));
    }
#endif
    return all;
  }

  /// Every rank's `mine`, concatenated in rank order, on every rank (the hashes of the chunks of
  /// the inputs each rank read: corpus.hpp).
  [[nodiscard]] std::vector<std::uint64_t> allgather(const std::vector<std::uint64_t>& mine) const {
    if (!spread()) return mine;
    std::vector<std::uint64_t> all;
#if DATAMASK_SELECT_MPI
    if (mine.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
      throw std::length_error("allgather: too many values for one rank");
    }
    const int n = static_cast<int>(mine.size());
    std::vector<int> counts(static_cast<std::size_t>(size_));
    MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::vector<int> at(counts.size(), 0);
    std::size_t total = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      if (total > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
        throw std::length_error("allgather: too many values in all");
      }
      at[r] = static_cast<int>(total);
      total += static_cast<std::size_t>(counts[r]);
    }
    all.resize(total);
    MPI_Allgatherv(mine.data(), n, MPI_UINT64_T, all.data(), counts.data(), at.data(), MPI_UINT64_T, MPI_COMM_WORLD);
#endif
    return all;
  }

  /// Ends every rank of the job with `code` (the launcher's exit status is then non-zero).
  [[noreturn]] void abort(int code) const {
#if DATAMASK_SELECT_MPI
    if (active_) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    std::exit(code);
  }

 private:
  int rank_ = 0;
  int size_ = 1;
  bool active_ = false;
  std::optional<int> local_rank_ = datamask::local_rank_from_environment();
};

}  // namespace dmselect
