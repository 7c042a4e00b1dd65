// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The corpus-level rules that need no learner: content hashes, the selection size, the
/// split of a corpus into hash-assigned blocks, of the blocks over workers and of S over the
/// blocks, the combined quality and the global prune threshold. Every front end applies them
/// identically, so that shards or ranks that each see only some blocks produce the selection of
/// one process, bit for bit (pipeline.hpp runs the blocks).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "datamask/core/detail/parallel.hpp"
#include "datamask/core/detail/prepare.hpp"
#include "datamask/core/error.hpp"
#include "datamask/core/options.hpp"
#include "datamask/core/types.hpp"

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

/// @brief The chunk size of hash_bytes: each 1 MiB chunk is hashed on its own, so threads hash
/// chunks apart and a stream read piece by piece (a part's ids) combines them in order.
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

/// @brief The hash of a byte range of `size` bytes from the hashes of all its chunks, in order.
inline std::uint64_t combine_chunk_hashes(std::size_t size, std::span<const std::uint64_t> parts) {
  std::uint64_t h = mix64(size);
  for (std::uint64_t p : parts) h = mix64(h ^ p) + 0x632BE59BD9B4E019ull;
  return h;
}

/// @brief A content hash of a byte range, the same whatever the thread count: every chunk hashed
/// (hash_chunk of each, in parallel), the chunk hashes combined in order (combine_chunk_hashes).
/// @param bytes the bytes (for example a memory-mapped input file)
/// @param threads worker threads (0: all)
inline std::uint64_t hash_bytes(std::span<const unsigned char> bytes, int threads) {
  std::vector<std::uint64_t> chunks(hash_chunk_count(bytes.size()));
  detail::parallel_for(static_cast<index_t>(chunks.size()), threads, [&](index_t j) {
    const std::size_t lo = static_cast<std::size_t>(j) * hash_chunk_bytes;
    const std::size_t hi = std::min(bytes.size(), lo + hash_chunk_bytes);
    chunks[static_cast<std::size_t>(j)] = hash_chunk(bytes.subspan(lo, hi - lo), hi);
  });
  return combine_chunk_hashes(bytes.size(), chunks);
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

/// @brief How a corpus of input files is cut into blocks, from the files' row counts alone.
///
/// Consecutive files form a group, closed as soon as it holds at least `block_size` rows (the
/// last group may hold fewer); a group of m rows has block_count(m, block_size) blocks, its rows
/// assigned among them by a hash of the id (`block_of`), so each block is a random sample of its
/// group and a worker that runs a group's blocks reads that group's files and nothing else. The
/// blocks are numbered group by group. A corpus in one file is one group: blocks drawn by id
/// hash from the whole corpus. The layout depends on the files and the block size, never on the
/// worker count.
struct corpus_layout {
  std::vector<index_t> file_start{0};   ///< the first row of each file, then n
  std::vector<index_t> group_file{0};   ///< the first file of each group, then the file count
  std::vector<index_t> group_block{0};  ///< the first block of each group, then the block count

  [[nodiscard]] index_t rows() const { return file_start.back(); }
  [[nodiscard]] index_t groups() const { return static_cast<index_t>(group_file.size()) - 1; }
  [[nodiscard]] index_t blocks() const { return group_block.back(); }
  /// The first row of group g (g == groups(): n).
  [[nodiscard]] index_t group_row(index_t g) const {
    return file_start[static_cast<std::size_t>(group_file[static_cast<std::size_t>(g)])];
  }
  [[nodiscard]] index_t group_rows(index_t g) const { return group_row(g + 1) - group_row(g); }
  [[nodiscard]] index_t group_blocks(index_t g) const {
    return group_block[static_cast<std::size_t>(g) + 1] - group_block[static_cast<std::size_t>(g)];
  }
  /// The group block b belongs to.
  [[nodiscard]] index_t group_of_block(index_t b) const {
    return static_cast<index_t>(std::upper_bound(group_block.begin(), group_block.end(), b) - group_block.begin()) - 1;
  }
};

/// @brief The layout of files of `file_rows` rows each (at least one file) in blocks of at most
/// `block_size` rows (at least 2): see corpus_layout.
[[nodiscard]] inline corpus_layout layout_corpus(std::span<const index_t> file_rows, index_t block_size) {
  DATAMASK_EXPECTS(block_size >= 2, "block_size", "must be at least 2, found ", block_size);
  corpus_layout l;
  index_t in_group = 0;
  const auto close = [&](std::size_t end_file) {
    l.group_file.push_back(static_cast<index_t>(end_file));
    l.group_block.push_back(l.group_block.back() + block_count(in_group, block_size));
    in_group = 0;
  };
  for (std::size_t f = 0; f < file_rows.size(); ++f) {
    l.file_start.push_back(l.file_start.back() + file_rows[f]);
    in_group += file_rows[f];
    if (in_group >= block_size) close(f + 1);
  }
  if (in_group > 0 || l.groups() == 0) close(file_rows.size());
  return l;
}

/// @brief The rows of each block of group g of `layout`, in corpus order: block b of the corpus
/// at [b - layout.group_block[g]].
/// @param id_of callable `id_t(index_t row)`: the item id of a row of the group
template <class IdOf>
[[nodiscard]] std::vector<std::vector<index_t>> assign_blocks(const corpus_layout& layout, index_t g, IdOf&& id_of) {
  const index_t nb = layout.group_blocks(g);
  std::vector<std::vector<index_t>> blocks(static_cast<std::size_t>(nb));
  for (index_t r = layout.group_row(g); r < layout.group_row(g + 1); ++r) {
    blocks[static_cast<std::size_t>(block_of(id_of(r), nb))].push_back(r);
  }
  return blocks;
}

/// @brief The blocks worker w of `workers` (an MPI rank or a scheduler shard) runs: the
/// consecutive range [blocks * w / workers, blocks * (w + 1) / workers), so that a worker's blocks
/// lie in consecutive groups, which is to say in consecutive files: it reads its share of the
/// corpus and no more. Every worker gets within one block of the same count; the assignment
/// depends on nothing but the block and worker counts, so every rank, every shard and the merge
/// agree on it without talking.
/// @throws invalid_input ("workers") unless 0 <= w < workers.
[[nodiscard]] inline std::vector<index_t> worker_blocks(index_t blocks, index_t w, index_t workers) {
  DATAMASK_EXPECTS(workers >= 1 && w >= 0 && w < workers, "workers", "worker ", w, " of ", workers,
                   ": needs 0 <= worker < workers");
  std::vector<index_t> mine;
  for (index_t b = blocks * w / workers; b < blocks * (w + 1) / workers; ++b) mine.push_back(b);
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

/// @brief S_g per group of `layout`: `split_selection` over the groups' row counts, so that a
/// worker knows every group's share of S from the files' headers alone; a group's S_g is then
/// split over its blocks by their sizes (`split_selection` again), which only the workers that
/// run the group need. For a corpus of one group this is `split_selection` over its blocks.
[[nodiscard]] inline std::vector<index_t> group_selection(const corpus_layout& layout, index_t total) {
  std::vector<index_t> rows;
  for (index_t g = 0; g < layout.groups(); ++g) rows.push_back(layout.group_rows(g));
  return split_selection(rows, layout.rows(), total);
}

/// @brief How the workers of a run exchange what they must agree on (counts, candidates, rows):
/// every worker's values, concatenated in worker order, to every worker (an MPI allgather). Empty:
/// one process, which holds every value itself.
using allgather_fn = std::function<std::vector<std::uint64_t>(const std::vector<std::uint64_t>&)>;

/// @brief Every worker's `mine`, concatenated in worker order (`all` empty: `mine`).
[[nodiscard]] inline std::vector<std::uint64_t> gather_all(const allgather_fn& all, const std::vector<std::uint64_t>& mine) {
  return all ? all(mine) : mine;
}

/// @brief The sum over workers of one count each.
[[nodiscard]] inline std::uint64_t sum_all(const allgather_fn& all, std::uint64_t mine) {
  std::uint64_t sum = 0;
  for (const std::uint64_t v : gather_all(all, {mine})) sum += v;
  return sum;
}

/// @brief A key of a double whose unsigned order is the double's order (-0 before +0).
constexpr std::uint64_t order_key(double x) {
  const auto bits = std::bit_cast<std::uint64_t>(x);
  return (bits >> 63) != 0 ? ~bits : bits | (std::uint64_t{1} << 63);
}

/// @brief The double of an order_key.
constexpr double from_order_key(std::uint64_t k) {
  return std::bit_cast<double>((k >> 63) != 0 ? k & ~(std::uint64_t{1} << 63) : ~k);
}

/// @brief The value at rank r (0-based, ascending) of values spread over workers, each holding
/// the order_keys of its own, sorted: a bisection over the keys, one exchanged count per step (64
/// steps at most), so no worker holds more than its own values and every worker finds the value
/// one process finds by sorting them all.
/// @param sorted_keys this worker's keys, ascending
[[nodiscard]] inline double kth_smallest(std::span<const std::uint64_t> sorted_keys, index_t r, const allgather_fn& all) {
  std::uint64_t lo = 0, hi = ~std::uint64_t{0};
  while (lo < hi) {  // the smallest key with more than r keys at or below it
    const std::uint64_t mid = lo + (hi - lo) / 2;
    const auto at_or_below = static_cast<std::uint64_t>(
        std::upper_bound(sorted_keys.begin(), sorted_keys.end(), mid) - sorted_keys.begin());
    if (sum_all(all, at_or_below) > static_cast<std::uint64_t>(r)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return from_order_key(lo);
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
/// value at rank floor(prune * n)) applied once to the combined quality of a corpus of n rows,
/// which the workers hold in parts (`kth_smallest`; one process holds them all). Rows whose
/// combined quality is at least the threshold are kept.
/// @param mine the combined quality of this worker's rows (the workers' rows partition the corpus)
/// @param n the corpus's rows
/// @param prune the quantile dropped, in (0, 1)
[[nodiscard]] inline double prune_threshold(std::span<const double> mine, index_t n, double prune,
                                            const allgather_fn& all = {}) {
  DATAMASK_EXPECTS(std::isfinite(prune) && prune > 0.0 && prune < 1.0, "prune", "must be in (0, 1), found ", prune);
  const std::uint64_t ranked = sum_all(all, mine.size());  // every worker asks: one exchange each
  DATAMASK_EXPECTS(n > 0 && ranked == static_cast<std::uint64_t>(n), "prune", "the corpus has ", n,
                   " rows, but ", ranked, " quality scores were given to rank");
  std::vector<std::uint64_t> keys(mine.size());
  std::transform(mine.begin(), mine.end(), keys.begin(), order_key);
  std::sort(keys.begin(), keys.end());
  return kth_smallest(keys, static_cast<index_t>(std::floor(prune * static_cast<double>(n))), all);
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
