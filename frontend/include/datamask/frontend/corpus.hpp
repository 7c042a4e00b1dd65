// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The corpus as every front end holds it (row-major float32, float16 or bfloat16 shards viewed in
/// memory the front end keeps: memory-mapped .npy files, numpy arrays; quality columns; ids),
/// and the one block loop over it: the corpus's calibration, then each block gathered and
/// selected on this build's backend, a front end's own side (progress, stop, checkpoints)
/// behind `block_side`.

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <datamask/run/block_select.hpp>
#include <datamask/run/pipeline.hpp>

namespace dmfront {

using datamask::index_t;

/// @brief A corpus of n rows of d floats in shards, with its quality columns and ids. A worker
/// of a spread run holds the scores and ids of a window of rows (`hold`): its share.
struct corpus {
  /// One shard: `rows` x d little-endian float32, float16 or bfloat16 values (`element`), row-major, at
  /// `data` (any alignment); null for a shard a worker was not given (another worker's rows,
  /// outside the window: reading one of its rows is refused).
  struct shard {
    const unsigned char* data = nullptr;
    datamask::element_kind element = datamask::element_kind::float32;
    index_t rows = 0;
    std::string name;  ///< as messages name it (a file, `embeddings[2]`)
  };
  std::vector<shard> shards;
  std::vector<index_t> shard_start;  ///< the first row of each shard, then n (`add_shard`, `close_shards`)
  index_t n = 0;
  index_t d = 0;
  std::pair<index_t, index_t> window{0, 0};  ///< the rows [first, last) whose scores and ids are held (`hold`)
  std::vector<std::vector<double>> quality;  ///< one score per row of the window in each column
  std::vector<std::string> quality_names;    ///< each column as messages name it
  std::vector<double> quality_weights;       ///< one per column
  std::span<const datamask::id_t> ids;       ///< one per row of the window (in memory the front end keeps); empty: the row numbers
  bool ids_unsigned = false;                 ///< the ids are uint64 (written back as such)
  bool some_absent = false;                  ///< a shard has no data (`shard::data`)

  /// Appends a shard of `rows` rows (d as the others: the caller checks it), `name` in messages.
  void add_shard(const void* data, datamask::element_kind element, index_t rows, index_t cols, std::string name);
  /// Ends the list of shards; the window is every row until `hold` says otherwise.
  void close_shards() {
    shard_start.push_back(n);
    window = {0, n};
  }
  /// Holds the scores and ids of the rows [first, last) only (before any is added).
  void hold(index_t first, index_t last) { window = {first, last}; }
  /// Appends the score column `name`: one finite score per row of the window (`rows_of`: where
  /// the rows come from, as messages say it).
  void add_quality(std::string name, std::vector<double> scores, const std::string& rows_of);
  /// Weighs the score columns by `given` (one weight >= 0 per column; `name` in messages), or
  /// 1 each when it is empty.
  void weigh_quality(const std::vector<double>& given, const std::string& name);
  /// Views `values` (kept by the front end) as the ids: one per row of the window, none twice, uint64 when
  /// `is_unsigned`; `name` in messages.
  void view_ids(std::span<const datamask::id_t> values, bool is_unsigned, const std::string& name,
                const std::string& rows_of);
  /// The rows of the ids `wanted`, in their order (`is_unsigned`: how messages print them).
  /// @throws datamask::invalid_input (`name`) for an id not in the corpus, or given twice
  [[nodiscard]] std::vector<index_t> rows_of_ids(std::span<const datamask::id_t> wanted, bool is_unsigned,
                                                 const std::string& name) const;

  /// The id of row r (in the window).
  [[nodiscard]] datamask::id_t id(index_t r) const {
    return ids.empty() ? static_cast<datamask::id_t>(r) : ids[static_cast<std::size_t>(r - window.first)];
  }
  /// The combined quality of row r (in the window): sum over columns of weight * score.
  [[nodiscard]] double combined(index_t r) const;
  /// The score columns' rows [first, last) (in the window).
  [[nodiscard]] std::vector<std::span<const double>> quality_rows(std::pair<index_t, index_t> rows) const;
  /// The ids of `rows`, in order.
  [[nodiscard]] std::vector<datamask::id_t> ids_of(std::span<const index_t> rows) const;
  /// The whole corpus as one matrix of T without a copy, when it is one aligned shard of T's kind.
  template <class T>
  [[nodiscard]] datamask::matrix_view<const T> whole_view() const;
  [[nodiscard]] datamask::matrix_view<const float> whole_view() const { return whole_view<float>(); }
  /// Copies `rows` (in order) into `out` (rows.size() x d): as float32, each value widened
  /// exactly; as float16 or bfloat16 (every shard of that kind: `block_element`), as stored.
  template <class T>
  void gather(std::span<const index_t> rows, T* out, int threads) const;
  /// The element a block is gathered in: the shards' own kind when every shard this worker holds
  /// is of the same 16-bit kind and `keep_16_bit` (a run without an objective given at run time
  /// in f, whose functions read float32 rows), else float32.
  [[nodiscard]] datamask::element_kind block_element(bool keep_16_bit) const;
  /// The data of a block of `rows` in T (`whole`: the corpus is one block, viewed without a copy
  /// when it can be).
  template <class T = float>
  [[nodiscard]] datamask::basic_block_data<T> block(std::span<const index_t> rows, bool whole, int threads) const;
  /// f(block.view()) for the block of `rows` gathered in `block_element(keep_16_bit)`: a 16-bit
  /// corpus's blocks hold half the bytes of float32 ones and select the same rows. The block lives
  /// until f returns: f returns nothing that views it.
  template <class F>
  decltype(auto) with_block(std::span<const index_t> rows, bool whole, int threads, bool keep_16_bit, F&& f) const {
    switch (block_element(keep_16_bit)) {
      case datamask::element_kind::float16: return f(block<datamask::float16>(rows, whole, threads).view());
      case datamask::element_kind::bfloat16: return f(block<datamask::bfloat16>(rows, whole, threads).view());
      case datamask::element_kind::float32: break;
    }
    return f(block<float>(rows, whole, threads).view());
  }
  /// The shards in blocks of at most `block_size` rows (`datamask::layout_corpus`).
  [[nodiscard]] datamask::corpus_layout layout(index_t block_size) const;
  /// The plan of the groups `held` (their rows in the window) of a run over this corpus
  /// (`datamask::plan_corpus`), without its prune threshold (`prune_threshold`).
  [[nodiscard]] datamask::corpus_plan plan(const datamask::settings& run, index_t block_size,
                                           std::pair<index_t, index_t> held) const;
  /// The plan of a one-process run: every group, its prune threshold included.
  [[nodiscard]] datamask::corpus_plan plan(const datamask::settings& run, index_t block_size) const;
};

/// @brief The rows a worker of a plan contributes to the corpus-wide values (the prune threshold,
/// the calibration sample), and how the workers exchange them (`datamask::allgather_fn`; empty:
/// one process holding every row). The workers' rows partition the corpus: a group belongs to
/// the worker that runs its first block (`planned_rows`).
struct planning {
  std::pair<index_t, index_t> rows;
  datamask::allgather_fn all;
};

/// @brief The rows of the groups of `layout` whose first block is among `mine` (consecutive, ascending).
[[nodiscard]] std::pair<index_t, index_t> planned_rows(const datamask::corpus_layout& layout, std::span<const index_t> mine);

/// @brief The corpus's prune threshold (`datamask::corpus_prune_threshold`) when `prune` > 0.
[[nodiscard]] std::optional<double> prune_threshold(const corpus& k, double prune, const planning& p);

/// @brief Calibrates f once for the blocks of `plan` into `s.calibration` when the run does
/// (`datamask::calibration_rows`; every worker of a spread run computes the same, each reading
/// the sample's rows that lie in its own and receiving the others'), on this build's backend.
/// Returns the sample (its rows empty: no calibration over the corpus).
datamask::calibration_sample calibrate_corpus(const corpus& k, const datamask::corpus_plan& plan,
                                              datamask::block_run_settings& s, const planning& p);

/// @brief A front end's side of the block loop; every member may be empty.
struct block_side {
  /// Before each block (throw to stop: a signal, a cancelled call).
  std::function<void(index_t block)> before;
  /// A block finished by an earlier run (a checkpoint's record), used instead of running it.
  std::function<std::optional<datamask::block_result>(index_t block)> recorded;
  /// The hooks of a block's selection (progress, stop, snapshots), asked for as it starts.
  std::function<datamask::block_hooks(index_t block)> hooks;
  /// A block the loop ran, once it is evaluated.
  std::function<void(const datamask::block_result&)> finished;
  /// The seconds a given kNN graph took to load, reported by each block that uses it.
  std::optional<double> graph_seconds;
};

/// @brief Runs the blocks `run` of `plan`, in that order, each gathered from `k` and selected on
/// this build's backend (`select_block` of block_backend.hpp); a block selecting nothing gives
/// an empty result. A block's bad input is said with its block number when the corpus has several.
/// @throws datamask::invalid_input; datamask::run_stopped when a block's hooks stopped it
std::vector<datamask::block_result> run_blocks(const corpus& k, const datamask::corpus_plan& plan,
                                               const datamask::block_run_settings& s, std::span<const index_t> run,
                                               const block_side& side);

/// @brief f and its terms on the rows `rows` of the corpus (`rows_of_ids`) as one block, as a
/// one-block selection of them would report them (its prune threshold from every quality score),
/// on this build's backend.
/// @throws datamask::invalid_input (`name`) for an empty subset
datamask::block_result evaluate_subset(const corpus& k, std::span<const index_t> rows,
                                       const datamask::block_run_settings& s, const std::string& name);

/// @brief What a run's outputs say of all its blocks (in block order, whichever process ran
/// each), for every front end's summary.
struct run_totals {
  std::vector<datamask::id_t> ids;  ///< block by block, each in its selection order
  double objective = 0.0;           ///< f of the whole selection (`datamask::total_terms`)
  std::vector<datamask::term_value> terms;
  /// The optimizers the blocks ran (auto can give a block naive greedy), each once, in block
  /// order, comma-separated; the run's own where no block selects.
  std::string optimizers;
  double optimize_seconds = 0.0;
  double evaluate_seconds = 0.0;
  std::optional<datamask::block_certificate> certificate;  ///< of a certified run
};

/// @brief The totals of `blocks` (`run_optimizer`: the run's optimizer, resolved); `with_ids`:
/// gather the blocks' ids (false: the blocks hold none, the ids are elsewhere, as a merge's).
/// @throws std::logic_error when the blocks did not select `selected` items in all
[[nodiscard]] run_totals totals_of(std::span<const datamask::block_result> blocks, index_t selected,
                                   std::string_view run_optimizer, bool with_ids = true);

}  // namespace dmfront
