// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief A run as a front end (datamask-select, the Python module) was asked for it, and the
/// one place that decides what the request means: which options apply to which optimizer, when
/// quality scores are needed, what --scales implies, the kNN graph's rules, the credit that
/// runs, and (once the corpus is planned) which blocks `auto` gives to naive greedy and what the
/// progress counts. The front ends parse, spell and print; they decide none of this.

#include <cstddef>
#include <functional>
#include <optional>
#include <set>
#include <type_traits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <datamask/run/block_select.hpp>

namespace dmfront {

using datamask::index_t;

/// @brief How a front end spells an option in its messages: `option("lambda")` is "--lambda"
/// for the program and "lam" for Python; `assign("optimizer", "pg", true)` is "--optimizer pg"
/// and `optimizer="pg"` (`text`: the value is a string, quoted in Python).
struct spelling {
  std::function<std::string(std::string_view name)> option;
  std::function<std::string(std::string_view name, std::string_view value, bool text)> assign;
};

/// @brief Visits the settings-table entries a front end offers as options, in the table's
/// order: the library's (less those `select_block` sets per block: `per_block_settings`), then
/// the continuous learner's.
template <class F>
void visit_options(F&& f) {
  datamask::visit_settings([&](const auto& s) {
    if constexpr (!std::is_same_v<typename std::remove_cvref_t<decltype(s)>::owner_type, datamask::per_block_settings>) {
      f(s);
    }
  });
  datamask::visit_continuous_settings(f);
}

/// @brief A library message with the settings it names (settings-table fields: "lr_min") spelled
/// as the front end's options (`sp.option`: "--lr-min"): the input, and where the text names a
/// field with '_' (the names without one are ordinary words).
[[nodiscard]] datamask::invalid_input as_option(const datamask::invalid_input& e, const spelling& sp);

/// @brief Whether option `name` sets how a block's kNN graph is built (knn-build, knn-clusters,
/// knn-probes): it applies only where a graph is built (`neighbors`).
[[nodiscard]] inline bool graph_build_option(std::string_view name) { return name.starts_with("knn-"); }

/// @brief An approximate kNN graph's estimated recall@K (`datamask::knn_graph::recall`) below
/// which a front end warns: facility location on it then misses many of each item's true
/// neighbours, and the hint (more probes, or the exact build) is worth its time.
inline constexpr double low_knn_recall = 0.9;

/// @brief Whether option `name` sets the certificate's budget (certify-steps, certify-memory): it
/// applies only where a certificate is asked for (`certify`).
[[nodiscard]] inline bool certify_option(std::string_view name) { return name.starts_with("certify-"); }

/// @brief A set of optimizers (bit `1 << block_optimizer`).
using optimizer_set = unsigned;

/// @brief The optimizers that read the option named `name` (its settings-table name, or a front
/// end's own: "log", "plot", "checkpoint-every"): a front end refuses it with any other instead
/// of ignoring it. Every optimizer for the settings all of them read.
[[nodiscard]] optimizer_set applies_to(std::string_view name);

/// @brief Whether optimizer `o` reads option `name`.
[[nodiscard]] inline bool applies(std::string_view name, datamask::block_optimizer o) {
  return (applies_to(name) >> static_cast<unsigned>(o) & 1u) != 0;
}

/// @brief A run as a front end was asked for it.
struct run_request {
  /// The options given, applied to the library's defaults; `settings.optimizer` as asked
  /// (`automatic` for auto) and `settings.weights` from the objectives named.
  datamask::block_run_settings settings;
  /// The names of the options given (settings-table names; "neighbors", "graph", and a front
  /// end's own options): an option given is applied or refused, never ignored.
  std::set<std::string, std::less<>> given;
  bool quality = false;  ///< quality scores are given
  bool graph = false;    ///< a kNN graph is given (its file or arrays, loaded later)

  [[nodiscard]] bool has(std::string_view name) const { return given.find(name) != given.end(); }
  [[nodiscard]] bool knn() const { return settings.neighbors > 0 || graph || settings.graph != nullptr; }
};

/// @brief Checks a request's options together and fills in what they imply: fixed scaling from
/// scales, the credit a policy gradient runs; then the library's validation of every setting.
/// @throws datamask::invalid_input naming the option as `sp` spells it.
struct resolution {
  /// The optimizer of the run: auto resolved without a block's shape (a block may still run
  /// naive greedy: `block_optimizers`); `settings.optimizer` stays as asked.
  datamask::block_optimizer optimizer = datamask::block_optimizer::automatic;
  std::string threads_capped;  ///< why the threads were capped (`datamask::use_threads`), or empty
};
resolution resolve(run_request& r, const spelling& sp);

/// @brief The optimizer of each block of `plan` (`datamask::resolve_optimizer` with the block's
/// shape: auto by cost), none where the block selects nothing.
[[nodiscard]] std::vector<std::optional<datamask::block_optimizer>> block_optimizers(
    const datamask::block_run_settings& s, const datamask::corpus_plan& plan, index_t dims);

/// @brief Refuses the options given in `r` that no block of `plan` reads: the continuous
/// learner's where auto gives blocks to naive greedy (`optimizers`: `block_optimizers` of the
/// blocks `plan` holds), and the clustered kNN builder's where knn-build auto builds every block's
/// graph exactly. A worker of a spread run judges by its own blocks: one whose blocks all run
/// greedy refuses what another worker's blocks read (a refusal, never a silent difference).
/// @throws datamask::invalid_input naming the option as `sp` spells it.
void refuse_unread_on_blocks(const run_request& r, const datamask::corpus_plan& plan,
                             std::span<const std::optional<datamask::block_optimizer>> optimizers, const spelling& sp);

/// @brief Refuses a kNN graph given with a corpus of `n` items (its file, or arrays) when the
/// corpus forms `blocks` > 1 blocks: the graph's rows are the corpus rows.
/// @throws datamask::invalid_input naming the option as `sp` spells it.
void check_given_graph(index_t n, std::size_t blocks, const spelling& sp);

/// @brief What the progress of a run counts over the blocks it runs: the continuous learner's
/// iterations, the policy gradient's steps, and the greedy baselines' picks.
struct progress_plan {
  index_t iterations = 0;
  index_t steps = 0;
  index_t picks = 0;
  std::size_t blocks = 0;          ///< blocks that select something
  std::size_t greedy_by_cost = 0;  ///< of them, those that auto gives to naive greedy
  [[nodiscard]] index_t total() const { return iterations + steps + picks; }
  /// What one event counts, singular: "iteration", "step" or "pick"; empty where the blocks run
  /// learners of both kinds or a learner and a greedy (a front end says so its own way).
  [[nodiscard]] std::string_view unit() const {
    if ((iterations > 0) + (steps > 0) + (picks > 0) > 1) return {};
    return iterations > 0 ? "iteration" : steps > 0 ? "step" : "pick";
  }
};

/// @brief The progress plan of the blocks `run` (indices into `optimizers`).
[[nodiscard]] progress_plan plan_progress(const datamask::block_run_settings& s, const datamask::corpus_plan& plan,
                                          std::span<const std::optional<datamask::block_optimizer>> optimizers,
                                          std::span<const index_t> run);

}  // namespace dmfront
