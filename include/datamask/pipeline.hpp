// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The corpus-level pipeline: what turns one corpus (possibly larger than a block) into
/// one exact selection. The selection size, the split of the corpus into hash-assigned blocks and
/// of S over them, the global prune threshold over the combined quality, each block's problem,
/// its selection by the learner or a greedy baseline, and the totals over blocks.
///
/// These rules live in the library, not in a program, because every front end must apply them
/// identically: datamask-select, the Python package, and a scale-out run whose shards or ranks
/// each see only some blocks yet must produce the selection of one process, bit for bit.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <datamask/datamask.hpp>
#include <datamask/detail/parallel.hpp>

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

/// @brief The hashes of chunks [first, last) of a byte range (8-byte words mixed in order within
/// each chunk), hashed in parallel; reads only those chunks' bytes.
/// @param threads worker threads (0: all)
inline std::vector<std::uint64_t> hash_chunks(std::span<const unsigned char> bytes, std::size_t first,
                                              std::size_t last, int threads) {
  std::vector<std::uint64_t> part(last - first);
  detail::parallel_for(static_cast<index_t>(part.size()), threads, [&](index_t j) {
    const std::size_t lo = (first + static_cast<std::size_t>(j)) * hash_chunk_bytes;
    const std::size_t hi = std::min(bytes.size(), lo + hash_chunk_bytes);
    std::uint64_t h = 0x9E3779B97F4A7C15ull ^ hi;
    std::size_t i = lo;
    for (; i + 8 <= hi; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, bytes.data() + i, 8);
      h = (h ^ mix64(w)) * 0x100000001B3ull;
    }
    for (; i < hi; ++i) h = (h ^ bytes[i]) * 0x100000001B3ull;
    part[static_cast<std::size_t>(j)] = mix64(h);
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

/// @brief One block's inputs gathered into memory it owns: its rows of the embeddings (or a view
/// of the whole mapped corpus), its quality scores and its ids. `problem()` views them.
struct block_data {
  std::vector<float> buffer;                  ///< the block's rows, when they had to be copied
  matrix_view<const float> embeddings;        ///< buffer, or a zero-copy view of the corpus
  std::vector<std::vector<double>> quality;   ///< the block's scores, one vector per column
  std::vector<double> quality_weights;        ///< one weight per column
  std::vector<id_t> ids;                      ///< the block's ids, in row order

  /// @brief The block as the learner's input (views into this object: keep it alive).
  [[nodiscard]] problem<float> view() const {
    problem<float> p;
    p.embeddings = embeddings;
    for (std::size_t a = 0; a < quality.size(); ++a) {
      p.quality.push_back(quality_column{std::span<const double>(quality[a]), quality_weights[a]});
    }
    p.ids = ids;
    return p;
  }
};

/// @brief Gathers one block of a corpus.
/// @param rows the block's rows of the corpus, in order
/// @param d the embedding dimension
/// @param whole a view of the whole corpus as float32 when one exists and the block is the
///        whole corpus (no copy then); empty otherwise
/// @param gather callable `void(std::span<const index_t> rows, float* out)`: copies the rows
/// @param columns the corpus's quality columns; @param weights their weights
/// @param id_of callable `id_t(index_t row)`
template <class Gather, class IdOf>
[[nodiscard]] block_data gather_block(std::span<const index_t> rows, index_t d, matrix_view<const float> whole,
                                      Gather&& gather, std::span<const std::vector<double>> columns,
                                      std::span<const double> weights, IdOf&& id_of) {
  block_data b;
  const auto n = static_cast<index_t>(rows.size());
  if (!whole.empty() && whole.rows == n) {
    b.embeddings = whole;
  } else {
    b.buffer.resize(rows.size() * static_cast<std::size_t>(d));
    gather(rows, b.buffer.data());
    b.embeddings = make_matrix_view(static_cast<const float*>(b.buffer.data()), n, d);
  }
  b.quality.resize(columns.size());
  for (std::size_t a = 0; a < columns.size(); ++a) {
    b.quality[a].resize(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) b.quality[a][i] = columns[a][static_cast<std::size_t>(rows[i])];
  }
  b.quality_weights.assign(weights.begin(), weights.end());
  b.ids.resize(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) b.ids[i] = id_of(rows[i]);
  return b;
}

/// @brief The kNN graph a block's facility-location term ran on (sparse facility location):
/// neighbours per item, how it was made, the seconds building it took and its bytes.
/// `neighbors == 0`: the block used no graph.
struct block_graph {
  index_t neighbors = 0;
  std::string source;
  double seconds = 0.0;  ///< building it for this block (0 for a graph given by the caller)
  std::size_t bytes = 0;
};

/// @brief What one block's selection produced (the per-block part of a report).
struct block_result {
  index_t block = 0;
  index_t items = 0;
  index_t selected = 0;
  index_t kept = 0;
  index_t steps_run = 0;
  index_t zero_variance_steps = 0;
  index_t nonfinite_steps = 0;
  std::vector<id_t> ids;           ///< selection order
  std::vector<term_value> terms;   ///< raw on the selection (whole block as V), scale, weight
  double objective = 0.0;          ///< sum of weight * raw / scale
  double optimize_seconds = 0.0;
  double evaluate_seconds = 0.0;
  bool from_checkpoint = false;    ///< finished in an earlier run
  block_graph graph;               ///< the kNN graph of its facility term, if any
  std::vector<step_record> history;
};

/// @brief The terms over all blocks: raw is the selection-weighted mean of the blocks' values,
/// scale the effective divisor (raw over the selection-weighted mean of raw / scale), so that
/// `total` is still the weighted sum of raw / scale. With one block that selects, both are
/// exactly that block's.
/// @param[out] total f over the whole selection
[[nodiscard]] inline std::vector<term_value> total_terms(std::span<const block_result> blocks, double& total) {
  std::vector<term_value> out;
  std::size_t with_selection = 0;
  index_t s = 0;
  for (const auto& b : blocks) {
    if (b.selected == 0) continue;
    if (with_selection++ == 0) out = b.terms;
    total = b.objective;
    s += b.selected;
  }
  if (with_selection <= 1) return out;
  total = 0.0;
  for (std::size_t t = 0; t < out.size(); ++t) {
    double raw = 0.0, scaled = 0.0, scale_mean = 0.0;
    for (const auto& b : blocks) {
      if (b.selected == 0) continue;
      const double w = static_cast<double>(b.selected) / static_cast<double>(s);
      raw += w * b.terms[t].raw;
      scaled += w * b.terms[t].raw / b.terms[t].scale;
      scale_mean += w * b.terms[t].scale;
    }
    out[t].raw = raw;
    out[t].scale = (raw != 0.0 && scaled != 0.0) ? raw / scaled : scale_mean;
    out[t].constant = std::any_of(blocks.begin(), blocks.end(),
                                  [t](const block_result& b) { return b.selected > 0 && b.terms[t].constant; });
    total += out[t].weight * scaled;
  }
  return out;
}

/// @brief The scales of terms, in order.
[[nodiscard]] inline std::vector<double> scales_of(std::span<const term_value> terms) {
  std::vector<double> scales;
  for (const auto& t : terms) scales.push_back(t.scale);
  return scales;
}

/// @brief Runs a greedy baseline on one block, on the f a policy-gradient run would optimise
/// (its calibrated or fixed scales; the whole block as facility location's reference set).
/// With a prune threshold the candidates are the rows the prune keeps (`kept_rows`).
/// @param o the learner's options for this block (count = S_b, scaling, seed, block, threads)
/// @param g the greedy method and its settings; its seed is derived from `o.seed` and `o.block`
/// @param[out] terms the terms of f, in order, with their scales (`learner::calibrate`)
/// @param[out] kept the number of candidate rows
/// @return the rows picked, in order
/// @throws invalid_input ("prune") when the prune keeps fewer rows than S_b
template <class Mix>
[[nodiscard]] std::vector<index_t> greedy_select_block(const problem<float>& p, const Mix& mix, const options& o,
                                                greedy_options g, std::vector<term_value>& terms, index_t& kept) {
  terms = learner<>(o).calibrate(p, mix);
  objective_function<float, Mix> f(p, mix, o.lambda, o.quality, o.normalized, o.threads);
  f.set_scales(scales_of(terms));
  g.seed = o.seed ^ (o.block * 0x9E3779B97F4A7C15ull);  // one stream per block
  g.threads = o.threads;
  kept = p.embeddings.rows;
  if (o.prune_threshold) {
    g.candidates = kept_rows(p, *o.prune_threshold);
    kept = static_cast<index_t>(g.candidates.size());
    DATAMASK_EXPECTS(kept >= o.count, "prune", "keeps ", kept, " items of block ", o.block,
                     ", fewer than its S = ", o.count);
  }
  return greedy_select(f, o.count, g).rows;
}

/// @brief Evaluates a block's selection with the library's f (whole block as V): fills the
/// result's terms (raw, and the scale, weight and `constant` mark of `calibrated`) and objective.
/// @param calibrated the terms of f as the optimizer scaled them, in order
template <class Mix>
void evaluate_block(const problem<float>& p, const Mix& mix, const options& o, std::span<const term_value> calibrated,
                    std::span<const index_t> rows, block_result& r) {
  objective_function<float, Mix> f(p, mix, o.lambda, o.quality, o.normalized, o.threads);
  f.set_scales(scales_of(calibrated));
  const std::vector<double> raw = f.raw(rows);
  r.terms = f.terms();
  for (std::size_t t = 0; t < raw.size(); ++t) {
    r.terms[t].raw = raw[t];
    r.terms[t].constant = calibrated[t].constant;
  }
  r.objective = f.combine(raw);
}

}  // namespace datamask
