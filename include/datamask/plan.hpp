// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The corpus-level rules that need no learner: content hashes, the selection size, the
/// split of a corpus into hash-assigned blocks, of the blocks over workers and of S over the
/// blocks, the combined quality and the global prune threshold. Every front end applies them
/// identically, so that shards or ranks that each see only some blocks produce the selection of
/// one process, bit for bit (pipeline.hpp runs the blocks).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "datamask/detail/parallel.hpp"
#include "datamask/detail/prepare.hpp"
#include "datamask/error.hpp"
#include "datamask/options.hpp"
#include "datamask/types.hpp"

namespace datamask {

/// @brief 64-bit mixing (the splitmix64 finaliser): block assignment and content hashes.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

/// @brief The chunk size of hash_bytes: each 1 MiB chunk is hashed on its own, so workers (threads,
/// or MPI ranks each reading a share of a file) can hash chunks apart and combine them in order.
inline constexpr std::size_t hash_chunk_bytes = std::size_t{1} << 20;

/// @brief The number of hash chunks of a byte range of `size` bytes.
constexpr std::size_t hash_chunk_count(std::size_t size) { return (size + hash_chunk_bytes - 1) / hash_chunk_bytes; }

/// @brief The hash of one chunk of a byte range: its bytes `chunk` (8-byte words mixed in order),
/// which end at offset `end` of the range. A range read piece by piece (a file streamed in 1 MiB
/// pieces) hashes each piece so and combines them (combine_chunk_hashes).
inline std::uint64_t hash_chunk(std::span<const unsigned char> chunk, std::size_t end) {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ end;
  std::size_t i = 0;
  for (; i + 8 <= chunk.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, chunk.data() + i, 8);
    h = (h ^ mix64(w)) * 0x100000001B3ull;
  }
  for (; i < chunk.size(); ++i) h = (h ^ chunk[i]) * 0x100000001B3ull;
  return mix64(h);
}

/// @brief The hashes of chunks [first, last) of a byte range (`hash_chunk` of each), hashed in
/// parallel; reads only those chunks' bytes.
/// @param threads worker threads (0: all)
inline std::vector<std::uint64_t> hash_chunks(std::span<const unsigned char> bytes, std::size_t first,
                                              std::size_t last, int threads) {
  std::vector<std::uint64_t> part(last - first);
  detail::parallel_for(static_cast<index_t>(part.size()), threads, [&](index_t j) {
    const std::size_t lo = (first + static_cast<std::size_t>(j)) * hash_chunk_bytes;
    const std::size_t hi = std::min(bytes.size(), lo + hash_chunk_bytes);
    part[static_cast<std::size_t>(j)] = hash_chunk(bytes.subspan(lo, hi - lo), hi);
  });
  return part;
}

/// @brief The hash of a byte range of `size` bytes from the hashes of all its chunks, in order.
inline std::uint64_t combine_chunk_hashes(std::size_t size, std::span<const std::uint64_t> parts) {
  std::uint64_t h = mix64(size);
  for (std::uint64_t p : parts) h = mix64(h ^ p) + 0x632BE59BD9B4E019ull;
  return h;
}

/// @brief A content hash of a byte range, the same whatever the thread count: every chunk hashed
/// (hash_chunks), the chunk hashes combined in order (combine_chunk_hashes).
/// @param bytes the bytes (for example a memory-mapped input file)
/// @param threads worker threads (0: all)
inline std::uint64_t hash_bytes(std::span<const unsigned char> bytes, int threads) {
  return combine_chunk_hashes(bytes.size(), hash_chunks(bytes, 0, hash_chunk_count(bytes.size()), threads));
}

/// @brief The number of items a run selects from n: `count` when it is positive, otherwise
/// round(ratio * n): the library's one rule (detail::selection_size), applied to the corpus.
/// @throws invalid_input ("count") when count exceeds n; ("ratio") when the ratio selects none.
inline index_t selection_size(index_t n, double ratio, index_t count) {
  settings s;
  s.ratio = ratio;
  s.count = count;
  return detail::selection_size(s, n);
}

/// @brief The number of blocks of a corpus of n items: 1 when n <= block_size, otherwise
/// ceil(n / block_size).
constexpr index_t block_count(index_t n, index_t block_size) {
  return n <= block_size ? 1 : (n + block_size - 1) / block_size;
}

/// @brief The block of an item: a hash of its id modulo the block count, so the split depends on
/// neither the order nor the sharding of the input files.
constexpr index_t block_of(id_t id, index_t blocks) {
  return blocks == 1 ? 0 : static_cast<index_t>(mix64(static_cast<std::uint64_t>(id)) % static_cast<std::uint64_t>(blocks));
}

/// @brief The rows of each block, in corpus order.
/// @param n the corpus size
/// @param block_size the largest block wanted (at least 2)
/// @param id_of callable `id_t(index_t row)`: the item id of a row
template <class IdOf>
[[nodiscard]] std::vector<std::vector<index_t>> assign_blocks(index_t n, index_t block_size, IdOf&& id_of) {
  const index_t nb = block_count(n, block_size);
  std::vector<std::vector<index_t>> blocks(static_cast<std::size_t>(nb));
  for (index_t r = 0; r < n; ++r) blocks[static_cast<std::size_t>(block_of(id_of(r), nb))].push_back(r);
  return blocks;
}

/// @brief The worker (an MPI rank or a scheduler shard, of `workers`) that runs block b: round
/// robin, block b to worker b mod workers, as DataTrove hands task i the files [i::N]. Blocks are
/// of about one size (a hash of the id assigns them), so every worker gets within one block of
/// the same work; the assignment depends on nothing but b and the worker count, so every rank,
/// every shard and the merge agree on it without talking.
constexpr index_t block_worker(index_t b, index_t workers) { return b % workers; }

/// @brief The blocks worker w of `workers` runs (`block_worker`), in block order.
/// @throws invalid_input ("workers") unless 0 <= w < workers.
[[nodiscard]] inline std::vector<index_t> worker_blocks(index_t blocks, index_t w, index_t workers) {
  DATAMASK_EXPECTS(workers >= 1 && w >= 0 && w < workers, "workers", "worker ", w, " of ", workers,
                   ": needs 0 <= worker < workers");
  std::vector<index_t> mine;
  for (index_t b = w; b < blocks; b += workers) mine.push_back(b);  // block_worker(b, workers) == w
  return mine;
}

/// @brief S_b per block: the exact quotas total * n_b / n rounded down, the remaining items
/// given to the blocks with the largest remainders (ties: the lower block), so the sum is
/// exactly `total` and the split does not depend on how blocks are spread over workers.
/// @param sizes n_b, the items of each block (summing to n)
[[nodiscard]] inline std::vector<index_t> split_selection(std::span<const index_t> sizes, index_t n, index_t total) {
  const std::size_t nb = sizes.size();
  std::vector<index_t> s(nb);
  std::vector<std::pair<long double, std::size_t>> rem(nb);
  index_t used = 0;
  for (std::size_t b = 0; b < nb; ++b) {
    const long double quota = static_cast<long double>(total) * static_cast<long double>(sizes[b]) /
                              static_cast<long double>(n);
    s[b] = static_cast<index_t>(std::floor(quota));
    rem[b] = {quota - static_cast<long double>(s[b]), b};
    used += s[b];
  }
  std::stable_sort(rem.begin(), rem.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; used < total && i < nb; ++i, ++used) ++s[rem[i].second];
  return s;
}

/// @brief The combined quality of every row: sum over columns of weight * score (the quantity
/// `--prune` ranks, and the one the learner prunes on).
/// @param columns one span of n scores per quality column
/// @param weights one weight per column
[[nodiscard]] inline std::vector<double> combined_quality(std::span<const std::span<const double>> columns,
                                                          std::span<const double> weights) {
  std::vector<double> comb(columns.empty() ? 0 : columns[0].size(), 0.0);
  for (std::size_t a = 0; a < columns.size(); ++a) {
    for (std::size_t i = 0; i < comb.size(); ++i) comb[i] += weights[a] * columns[a][i];
  }
  return comb;
}

/// @brief The global prune threshold: the learner's rank rule (detail::prune_threshold: the
/// value at rank floor(prune * n)) applied once to the combined quality of the whole corpus.
/// Rows whose combined quality is at least the threshold are kept.
/// @param combined the combined quality of every row
/// @param prune the quantile dropped, in [0, 1)
[[nodiscard]] inline double prune_threshold(const std::vector<double>& combined, double prune) {
  DATAMASK_EXPECTS(!combined.empty(), "prune", "the corpus has no quality scores to rank");
  settings s;
  s.prune = prune;
  return detail::prune_threshold(s, combined);
}

/// @brief The rows of a block a prune keeps: combined quality >= threshold. The greedy
/// baselines pick among exactly these rows, as the learner does.
template <class T>
[[nodiscard]] std::vector<index_t> kept_rows(const problem<T>& p, double threshold) {
  std::vector<index_t> kept;
  for (index_t i = 0; i < p.embeddings.rows; ++i) {
    double comb = 0.0;
    for (const auto& col : p.quality) comb += col.weight * col.scores[static_cast<std::size_t>(i)];
    if (comb >= threshold) kept.push_back(i);
  }
  return kept;
}

}  // namespace datamask
