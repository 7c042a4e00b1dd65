// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The gather of a sharded corpus's rows into one matrix (datamask-select's shards, the
/// Python module's arrays).

#include <algorithm>
#include <cstddef>
#include <span>

#include <datamask/core/detail/parallel.hpp>
#include <datamask/core/types.hpp>

namespace datamask::io {

/// @brief Copies the given rows of a sharded corpus (in order) into `out` (rows.size() x d values
/// of T), in parallel; `read_row(shard, local_row, out)` reads one row of one shard.
/// @param shard_start the first row of each shard, then n
template <class T, class ReadRow>
void gather_shard_rows(std::span<const index_t> rows, index_t d, std::span<const index_t> shard_start, T* out,
                       int threads, ReadRow&& read_row) {
  const auto count = static_cast<index_t>(rows.size());
  ::datamask::detail::parallel_for((count + 255) / 256, threads, [&](index_t c) {
    for (index_t i = c * 256; i < std::min(count, (c + 1) * 256); ++i) {
      const index_t r = rows[static_cast<std::size_t>(i)];
      const auto s = static_cast<std::size_t>(std::upper_bound(shard_start.begin(), shard_start.end(), r) -
                                              shard_start.begin() - 1);
      read_row(s, r - shard_start[s], out + i * d);
    }
  });
}

}  // namespace datamask::io
