// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief A corpus's plan (selection size, blocks, their quotas, the global prune threshold)
/// and one block's selection as every front end runs it: the optimizer a run names (the
/// continuous learner, the policy gradient, or a greedy baseline) on the diversity mix the run's
/// objective weights choose, with the optimizer's settings for that block, its per-step history,
/// then the evaluation of the selection (whole block as reference set).
///
/// Why here and not in a program: datamask-select, the Python package and a scale-out run must
/// give the same ids for the same inputs, options and seed; they share this code and keep only
/// their own side (a signal flag, a checkpoint folder, a progress bar) behind `block_hooks`.

#include <algorithm>
#include <array>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "datamask/exec/backend/eigen.hpp"
#include "datamask/learners/auto.hpp"
#include "datamask/learners/continuous/learner.hpp"
#include "datamask/learners/greedy/learner.hpp"
#include "datamask/learners/protocol.hpp"
#include "datamask/objectives/knn/build.hpp"
#include "datamask/learners/pg/learner.hpp"
#include "datamask/objectives/disf.hpp"
#include "datamask/objectives/external.hpp"
#include "datamask/objectives/facility.hpp"
#include "datamask/objectives/mix.hpp"
#include "datamask/objectives/pairwise.hpp"
#include "datamask/objectives/sparse_facility.hpp"
#include "datamask/run/pipeline.hpp"
#include "datamask/learners/settings.hpp"

namespace datamask {

/// @brief The weight of each built-in diversity objective of f (0: not in f); the front ends fill
/// it from the names a run gives (dmfront::objective_registry).
struct objective_weights {
  double pairwise = 1.0;
  double facility = 0.0;
  double disf = 0.0;
};

/// @brief A diversity objective given at run time (a Python metric, or a C++ type registered by
/// name: dmfront::objective_registry) with its weight in f.
struct given_objective {
  std::shared_ptr<const external_objective> objective;
  double weight = 1.0;
};

/// @brief Everything besides its data and hooks that determines a block's selection.
struct block_run_settings {
  settings run;                  ///< ratio or count, lambda, steps, seed, prune, ...
  learner_settings learn;        ///< the policy, schedule and facility-location kernel
  continuous_settings ascent;    ///< the continuous learner's ascent
  polish_settings polish;        ///< and its polish
  block_optimizer optimizer = block_optimizer::automatic;
  objective_weights weights;
  /// Facility location on a kNN graph (objectives/sparse_facility.hpp) instead of dense: each
  /// block's graph with this many neighbours under `learn.kernel` (capped at the block's size),
  /// built as `learn.knn_builder` says (exact, or clustered with `learn.knn_clusters` and
  /// `learn.knn_probes`, seeded by `run.seed`; a clustered graph's source names its estimated
  /// recall), or `graph` (its rows the block's rows) when given; 0 and null: dense.
  index_t neighbors = 0;
  std::shared_ptr<const knn_graph> graph;
  /// The terms of f as calibrated once for a corpus of several blocks (`calibrate_sample` on
  /// `calibration_rows`): every block divides by their scales. Empty: each block's own scaling.
  std::vector<term_value> calibration;
  /// Certify each block's selection (`block_result::certificate`, datamask/objectives/certify.hpp) after
  /// its evaluation, with the budget of `learn.certify_object()` (its seed and threads are the
  /// run's). Off by default: facility location's dual steps read the block's pairs whatever the
  /// optimizer took, which can cost more than the optimising (benchmarks/RESULTS.md, "The
  /// certificate's cost on real data"), above what a default may add. It changes no selection.
  bool certify = false;
  /// The diversity objectives given at run time, in order, each a term of f of its own after the
  /// built-in ones (the standard mix's list); none by default.
  std::vector<given_objective> external;
  [[nodiscard]] bool knn() const { return neighbors > 0 || graph != nullptr; }
  /// Whether an objective given at run time weighs in f (its weight > 0; lambda aside).
  [[nodiscard]] bool weighs_external() const {
    return std::any_of(external.begin(), external.end(), [](const given_objective& g) { return g.weight > 0.0; });
  }
};

/// @brief The member of `s` that holds the settings of table entry `Entry` (settings.hpp):
/// `run`, `learn`, `ascent` or `polish`.
template <class Entry, class Settings>
  requires std::same_as<std::remove_const_t<Settings>, block_run_settings>
[[nodiscard]] auto& settings_of(Settings& s) {
  using O = typename Entry::owner_type;  // the struct that declares the entry, or one of its bases
  if constexpr (std::is_base_of_v<O, settings>) {
    return s.run;
  } else if constexpr (std::is_base_of_v<O, learner_settings>) {
    return s.learn;
  } else if constexpr (std::is_same_v<O, continuous_settings>) {
    return s.ascent;
  } else {
    static_assert(std::is_same_v<O, polish_settings>, "datamask::settings_of: not an entry of the settings table");
    return s.polish;
  }
}

/// @brief The diversity mix of every front end: every built-in objective is present, those not
/// chosen weigh 0 (so the terms of f, their order and the random streams are the same for every
/// run). Facility location on a kNN graph, then the objectives given at run time (a list, as
/// many as the run names), come last, so runs without them keep their terms.
using standard_mix = diversity_mix<pairwise_similarity, facility_location, disf, sparse_facility_location,
                                   term_list<external_objective>>;

/// @brief The mix the weights and the kernel settings choose; with `knn`, facility location's
/// weight on its kNN form (whose graph the caller sets); `external`: the objectives given at run
/// time, with their weights.
/// @throws invalid_input ("objective") when one of `external` is null
[[nodiscard]] inline standard_mix make_mix(const objective_weights& w, const learner_settings& ls, bool knn = false,
                                           std::span<const given_objective> external = {}) {
  term_list<external_objective> given;
  for (const given_objective& g : external) {
    DATAMASK_EXPECTS(g.objective != nullptr, "objective", "an objective given at run time is null");
    given.terms.push_back(weighted{*g.objective, g.weight});
  }
  return mix(weighted{pairwise_similarity{}, w.pairwise}, weighted{ls.facility_object(), knn ? 0.0 : w.facility},
             weighted{disf{}, w.disf}, weighted{sparse_facility_location{}, knn ? w.facility : 0.0},
             weighted{std::move(given), 1.0});
}

/// @brief A run's mix (`make_mix` of its weights, kernel and given objectives; `knn`: facility
/// location on a kNN graph).
[[nodiscard]] inline standard_mix run_mix(const block_run_settings& s, bool knn) {
  return make_mix(s.weights, s.learn, knn, s.external);
}

/// @brief The diversity terms of a run's f that count (lambda < 1, positive weight), as `auto`
/// weighs them (`counting_terms` of its mix): facility location on a kNN graph of K =
/// `neighbors` where `knn`, else dense; an objective given at run time relaxes when it says so
/// and has no cost model.
[[nodiscard]] inline std::vector<term_traits> counting_terms(const block_run_settings& s, bool knn, index_t dims = 0,
                                                             index_t neighbors = 0) {
  return counting_terms<float>(run_mix(s, knn), s.run.lambda, dims, neighbors);
}

/// @brief What `auto` runs for a run's f (`auto_optimizer` of its `counting_terms`).
[[nodiscard]] inline block_optimizer auto_optimizer(const block_run_settings& s, bool knn) {
  return auto_optimizer(counting_terms(s, knn));
}

/// @brief The terms of f the continuous learner cannot ascend, as messages name them ("dense
/// facility location", a given objective's name; "a and b", "a, b and c"), empty when every
/// diversity term that counts relaxes (`knn`: facility location is on a kNN graph). Every
/// refusal of continuous names them all.
struct unrelaxed {
  std::string name;
  bool dense_facility = false;  ///< dense facility location is one of them
  std::size_t count = 0;
  /// "X has no relaxation", "X and Y have no relaxation".
  [[nodiscard]] std::string has_none() const { return name + (count > 1 ? " have" : " has") + " no relaxation"; }
  /// What a run would give them, `graph` how a front end says a kNN graph.
  [[nodiscard]] std::string remedy(const std::string& graph = "a kNN graph") const {
    if (dense_facility && count > 1) return "give facility location " + graph + " and the others a relaxation";
    if (dense_facility) return "give it " + graph;
    return count > 1 ? "give them one" : "give it one";
  }
};
[[nodiscard]] inline unrelaxed unrelaxed_term(const block_run_settings& s, bool knn) {
  unrelaxed out;
  if (s.run.lambda >= 1.0) return out;
  const standard_mix m = run_mix(s, knn);
  const std::vector<std::string> names = m.names();
  std::vector<std::string> found;
  m.for_each([&](auto i, const auto& o, double w) {
    using D = std::decay_t<decltype(o)>;
    if (w <= 0.0 || traits_of<float>(o, 0).relaxable) return;
    out.dense_facility = out.dense_facility || std::is_same_v<D, facility_location>;
    found.push_back(std::is_same_v<D, facility_location> ? std::string("dense facility location") : names[i]);
  });
  out.count = found.size();
  for (std::size_t k = 0; k < found.size(); ++k) {
    out.name += (k == 0 ? "" : k + 1 == found.size() ? " and " : ", ") + found[k];
  }
  return out;
}

/// @brief `auto` made concrete for a run (`auto_optimizer`); the others as given. A block of a
/// run whose `auto` resolves to continuous may still run naive greedy (`auto_block_optimizer`):
/// front ends use this to check the run's options, `select_block` resolves each block.
/// @throws invalid_input ("optimizer") when continuous is asked for an f it cannot ascend.
[[nodiscard]] inline block_optimizer resolve_optimizer(const block_run_settings& s) {
  const bool chosen = s.optimizer == block_optimizer::automatic;
  const block_optimizer o = chosen ? auto_optimizer(s, s.knn()) : s.optimizer;
  DATAMASK_EXPECTS(o == block_optimizer::pg || s.run.scaling != term_scaling::group, "scaling",
                   "group makes f a different function at every step; ", chosen ? "auto runs " : "", enum_name(o),
                   chosen ? " here, which" : "", " needs calibrated, fixed or raw scales (group is for the policy "
                   "gradient)");
  if (chosen) return o;
  const unrelaxed term = unrelaxed_term(s, s.knn());
  DATAMASK_EXPECTS(s.optimizer != block_optimizer::continuous || term.name.empty(), "optimizer", "continuous: ",
                   term.has_none(), "; ", term.remedy(), ", or use pg, greedy, lazy or stochastic");
  return s.optimizer;
}

/// @brief What `auto` runs on one block of a run (`auto_block_optimizer` of its `counting_terms`,
/// with the graph's K, given or to be built, and the continuous learner's iterations).
[[nodiscard]] inline block_optimizer auto_block_optimizer(const block_run_settings& s, const block_shape& b) {
  const index_t k = s.graph ? s.graph->k : std::min(s.neighbors, b.items);
  const std::vector<term_traits> terms = counting_terms(s, s.knn(), b.dims, k);
  return auto_block_optimizer(terms, b, s.ascent.iterations);
}

/// @brief The optimizer that runs on a block of shape `b`: `auto_block_optimizer` for `auto`,
/// else `resolve_optimizer(s)`.
[[nodiscard]] inline block_optimizer resolve_optimizer(const block_run_settings& s, const block_shape& b) {
  if (s.optimizer == block_optimizer::automatic) return auto_block_optimizer(s, b);
  return resolve_optimizer(s);
}

/// @brief `credit_mode::automatic` made concrete for a run's f (`phases::resolve_credit` on the
/// standard mix, the learner's own rule): per-item credit when only pairwise similarity and
/// dense facility location count in f (`knn`: facility location on a graph; an objective given
/// at run time has no marginals) and the policy gradient is relaxed, else the paper's estimator.
/// Front ends resolve it to report it.
[[nodiscard]] inline credit_mode resolve_credit(credit_mode c, const objective_weights& w, double lambda, bool knn,
                                                gradient_mode g, std::span<const given_objective> external = {}) {
  const standard_mix m = make_mix(w, learner_settings{}, knn, external);
  std::vector<double> weights;
  m.for_each([&](auto, const auto&, double v) { weights.push_back(v); });
  return phases::resolve_credit<float>(c, g == gradient_mode::relaxed, m, [&](std::size_t i) {
    return lambda < 1.0 && weights[i] > 0.0;
  });
}

/// @brief The block size of a run that does not name one: the paper's blocks of 1M documents.
inline constexpr index_t default_block_size = 1000000;

/// @brief How a corpus is split for a run: what `select_block` is called with, block by block.
/// A worker plans the groups it runs (`held`), so it holds their rows and no others.
struct corpus_plan {
  index_t total = 0;                        ///< S over the corpus (`selection_size`)
  corpus_layout layout;                     ///< the groups and their blocks (`layout_corpus`)
  std::pair<index_t, index_t> held{0, 0};   ///< the groups [first, last) whose blocks are planned here
  std::vector<std::vector<index_t>> blocks; ///< the rows of each block (`assign_blocks`); empty outside `held`
  std::vector<index_t> counts;              ///< S_b (`group_selection`, then `split_selection`); 0 outside `held`
  std::optional<double> prune_threshold;    ///< the global threshold when `run.prune` > 0

};

/// @brief The groups [first, last) of `layout` whose files the blocks `mine` (ascending) read.
[[nodiscard]] inline std::pair<index_t, index_t> groups_of_blocks(const corpus_layout& layout, std::span<const index_t> mine) {
  if (mine.empty()) return {0, 0};
  return {layout.group_of_block(mine.front()), layout.group_of_block(mine.back()) + 1};
}

/// @brief The global prune threshold over the corpus's combined quality, when `prune` > 0.
/// @param n the corpus's rows
/// @param quality this worker's rows of each column (the workers' rows partition the corpus)
/// @param weights their weights
[[nodiscard]] inline std::optional<double> corpus_prune_threshold(double prune, index_t n,
                                                                  std::span<const std::span<const double>> quality,
                                                                  std::span<const double> weights,
                                                                  const allgather_fn& all = {}) {
  if (prune <= 0.0) return std::nullopt;
  return prune_threshold(combined_quality(quality, weights), n, prune, all);
}

/// @brief Plans the groups `held` of a run over a corpus of `layout`: S over the corpus, S_g of
/// every group, and the rows and S_b of every block of the held groups. Reads the ids of the
/// held groups' rows only. The prune threshold is set apart (`corpus_prune_threshold`).
/// @param id_of callable `id_t(index_t row)`, called for the held groups' rows
/// @throws invalid_input ("count", "ratio") as `selection_size` does
template <class IdOf>
[[nodiscard]] corpus_plan plan_corpus(const corpus_layout& layout, std::pair<index_t, index_t> held, const settings& run,
                                      IdOf&& id_of) {
  corpus_plan plan;
  plan.layout = layout;
  plan.held = held;
  plan.total = selection_size(layout.rows(), run.ratio, run.count);
  plan.blocks.resize(static_cast<std::size_t>(layout.blocks()));
  plan.counts.assign(static_cast<std::size_t>(layout.blocks()), 0);
  const std::vector<index_t> per_group = group_selection(layout, plan.total);
  for (index_t g = held.first; g < held.second; ++g) {
    auto rows = assign_blocks(layout, g, id_of);
    std::vector<index_t> sizes;
    for (const auto& b : rows) sizes.push_back(static_cast<index_t>(b.size()));
    const auto counts = split_selection(sizes, layout.group_rows(g), per_group[static_cast<std::size_t>(g)]);
    const auto first = static_cast<std::size_t>(layout.group_block[static_cast<std::size_t>(g)]);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      plan.blocks[first + i] = std::move(rows[i]);
      plan.counts[first + i] = counts[i];
    }
  }
  return plan;
}

/// @brief The most rows a corpus's calibration sample holds (`calibration_rows`): up to a
/// corpus of about 1.3 million items at the default active fraction (0.05) the sample is
/// exactly the first active batch the corpus would have as one block.
inline constexpr index_t max_calibration_rows = index_t{1} << 16;

/// @brief The rows a run over a corpus calibrates f's scales on, once for every block, and the
/// size of the calibration subsets drawn from them.
struct calibration_sample {
  std::vector<index_t> rows;  ///< corpus rows, ascending; empty: nothing to calibrate for the corpus
  index_t subset = 0;         ///< k, the size of each calibration subset
};

/// @brief Whether a run of `blocks` blocks calibrates f once over its corpus
/// (`calibration_rows`): several blocks, calibrated scaling, lambda < 1 and no kNN graph (built
/// per block, so the corpus has none to calibrate on).
[[nodiscard]] inline bool calibrates_corpus(index_t blocks, const block_run_settings& s) {
  return blocks > 1 && s.run.scaling == term_scaling::calibrated && s.run.lambda < 1.0 && !s.knn();
}

/// @brief The calibration sample of a corpus (`term_scaling::calibrated` over several blocks):
/// the first active batch the corpus would have as one block (block 0's key, step 1: the m kept
/// rows with the smallest draws, ties to the smaller id; m and k = round(m S / kept) as
/// `phases::batch_sizes` gives them, m at most `max_calibration_rows`). A one-block run's learner
/// draws exactly these rows and subsets itself, so its f and that of the same corpus in several
/// blocks are one function: f compares across block sizes, shards and ranks (with
/// `reference_size` > 0 the facility term's reference rows are drawn from the sample, not the
/// corpus, so its scale is close to the one-block run's, not equal). Empty (each block scales f
/// itself) unless `calibrates_corpus`, or when every kept row is selected.
///
/// Workers that hold the corpus's rows in parts each draw the m smallest of their own and
/// exchange them (`all`): O(m) memory per worker and O(m x workers) exchanged, for any n.
/// @param rows this worker's rows [first, last) (the workers' rows partition the corpus)
/// @param id_of callable `id_t(index_t row)`; @param combined callable `double(index_t row)`:
/// the row's combined quality (called only when the plan prunes)
template <class IdOf, class Combined>
[[nodiscard]] calibration_sample calibration_rows(const corpus_plan& plan, const block_run_settings& s,
                                                  std::pair<index_t, index_t> rows, IdOf&& id_of,
                                                  Combined&& combined, const allgather_fn& all = {}) {
  calibration_sample c;
  if (!calibrates_corpus(plan.layout.blocks(), s)) return c;
  const rng::philox_key key = rng::block_key(s.run.seed, 0);
  struct drawn {
    double u;
    id_t id;
    index_t row;
    bool operator<(const drawn& o) const { return u != o.u ? u < o.u : id < o.id; }
  };
  // The m smallest (draw, id) of this worker's kept rows, in a bounded max-heap.
  std::vector<drawn> heap;
  std::uint64_t kept = 0;
  const index_t cap = max_calibration_rows;  // m is at most this: the heap holds every candidate
  for (index_t r = rows.first; r < rows.second; ++r) {
    if (plan.prune_threshold && !(combined(r) >= *plan.prune_threshold)) continue;
    ++kept;
    const id_t id = id_of(r);
    const drawn d{rng::uniform01(key, id, 1u, rng::stream_active_batch), id, r};
    if (static_cast<index_t>(heap.size()) < cap) {
      heap.push_back(d);
      std::push_heap(heap.begin(), heap.end());
    } else if (d < heap.front()) {
      std::pop_heap(heap.begin(), heap.end());
      heap.back() = d;
      std::push_heap(heap.begin(), heap.end());
    }
  }
  // Every worker's count and candidates: [kept, m, (draw, id, row) x m] each.
  std::vector<std::uint64_t> mine{kept, heap.size()};
  for (const auto& d : heap) {
    mine.insert(mine.end(), {std::bit_cast<std::uint64_t>(d.u), static_cast<std::uint64_t>(d.id),
                             static_cast<std::uint64_t>(d.row)});
  }
  const std::vector<std::uint64_t> every = gather_all(all, mine);
  std::vector<drawn> candidates;
  kept = 0;
  for (std::size_t at = 0; at < every.size();) {
    kept += every[at];
    const auto m = static_cast<std::size_t>(every[at + 1]);
    for (std::size_t i = 0; i < m; ++i) {
      const std::uint64_t* v = &every[at + 2 + 3 * i];
      candidates.push_back({std::bit_cast<double>(v[0]), static_cast<id_t>(v[1]), static_cast<index_t>(v[2])});
    }
    at += 2 + 3 * m;
  }
  if (static_cast<index_t>(kept) <= plan.total) return c;  // every kept row is selected: nothing is learned
  const phases::batch_size z = phases::batch_sizes(static_cast<index_t>(kept), plan.total, s.run, max_calibration_rows);
  std::sort(candidates.begin(), candidates.end());
  candidates.resize(static_cast<std::size_t>(z.active));
  for (const auto& d : candidates) c.rows.push_back(d.row);
  std::sort(c.rows.begin(), c.rows.end());
  c.subset = z.rollout;
  return c;
}

/// @brief f's terms calibrated on a corpus's calibration sample (`calibration_rows`), gathered
/// as a problem in row order: as the learner of a one-block run calibrates them on its first
/// active batch (`learner::calibrate` with the whole sample active and subsets of `subset`).
/// Set the result as `block_run_settings::calibration` for every block.
/// @tparam Backend the backend the blocks run on (it scores the calibration subsets)
template <backend Backend = eigen_backend>
[[nodiscard]] std::vector<term_value> calibrate_sample(const problem<float>& sample, index_t subset,
                                                       const block_run_settings& s) {
  settings o = s.run;
  o.count = subset;
  o.prune = 0.0;  // the sample holds kept rows only
  o.active_fraction = 1.0;
  o.block = 0;
  o.evaluate_selection = false;
  return learner<Backend>(o).calibrate(sample, run_mix(s, false));
}

/// @brief A block's error as a run over several blocks reports it: "block b: " before the
/// problem, the input named as before.
[[nodiscard]] inline invalid_input in_block(const invalid_input& e, index_t b) {
  return invalid_input(e.input(), "block " + std::to_string(b) + ": " + std::string(e.what()).substr(e.input().size() + 2));
}

/// @brief What a block's selection calls back. None changes the selection; every member may be
/// empty.
struct block_hooks {
  /// After each policy-gradient step or continuous iteration.
  std::function<void(const step_record&)> on_step;
  /// The greedy baselines: after each pick, with the rows picked so far in the block.
  std::function<void(index_t)> on_pick;
  /// Polled after every step or iteration and, for the greedy baselines and a kNN graph's build,
  /// about every 0.1 s: returning true stops the block (`run_stopped` is thrown once the
  /// optimizer returns, or at once from the build).
  std::function<bool()> stop;
  // Snapshots and resume serve both learners through one pair of hooks: a learner's state is a
  // vector of doubles the front end stores and hands back unread (policy gradient: the logits,
  // one per row; continuous: `continuous_iterate::pack()`), with the step or iteration, the
  // history and the best selection so far, so a checkpoint store has one format for both.
  // The optimizer is part of a run's settings: a state comes back to the learner that saved it.

  /// Learners only: a snapshot every this many steps or iterations (0: only when stopped).
  index_t snapshot_every = 0;
  /// Learners only: receives the block (its history so far), the step or iteration, the
  /// learner's state and its best selection so far (pg: the best rollout; continuous: the best
  /// tracked read-out), every `snapshot_every` steps and at the step at which `stop` ended it.
  std::function<void(const block_result&, index_t, std::span<const double>, const best_rollout&)> on_snapshot;
  /// Learners only, before the block starts: fills the last step done, the state, the history
  /// and the best selection of a snapshot of this block and returns true to continue it (the
  /// result, history included, is that of an uninterrupted run); false to start afresh.
  std::function<bool(block_result&, index_t&, std::vector<double>&, best_rollout&)> resume;
  /// While a block's kNN graph is built (`block_run_settings::neighbors`): the rows compared so
  /// far, of the block's (`knn_build_hooks::on_rows`: about every 0.1 s, none for a short build).
  std::function<void(index_t done, index_t total)> on_graph_progress;
  /// After a block's kNN graph is built: the graph and the seconds it took (a front end keeps
  /// them out of the optimizer's rate).
  std::function<void(const knn_graph&, double)> on_graph;
};

/// @brief The optimizer's settings for block `b`: the run's settings, S_b, and the corpus-level
/// prune threshold in place of the per-block quantile.
/// With a corpus calibration (`block_run_settings::calibration`), its scales, fixed.
[[nodiscard]] inline settings block_settings(const block_run_settings& s, index_t b, index_t s_b,
                                            std::optional<double> threshold) {
  settings o = s.run;
  o.count = s_b;
  o.prune = 0.0;  // the corpus-level threshold replaces the per-block quantile
  o.prune_threshold = threshold;
  o.block = static_cast<std::uint64_t>(b);
  o.evaluate_selection = false;  // evaluated by evaluate_block, timed on its own
  if (!s.calibration.empty()) {
    o.scaling = term_scaling::fixed;
    o.scales = scales_of(s.calibration);
  }
  return o;
}

/// @brief Every optimizer of a block on `Backend`, as one type (`make_optimizer`).
template <backend Backend>
using any_optimizer = std::variant<learner<Backend, softmax_policy, runtime_lr>, basic_continuous_learner<Backend>,
                                   basic_greedy_learner<Backend>>;

/// @brief The optimizer `which` names (resolved: not `automatic`) with a run's settings for one
/// block (`o`, from `block_settings`; the policy and schedule, the ascent and the polish, from
/// `s`). Each selects through the optimizers' protocol (learners/protocol.hpp).
template <backend Backend>
[[nodiscard]] any_optimizer<Backend> make_optimizer(block_optimizer which, const settings& o,
                                                    const block_run_settings& s) {
  switch (which) {
    case block_optimizer::pg:
      return learner<Backend, softmax_policy, runtime_lr>(o, s.learn.policy_object(), s.learn.schedule_object());
    case block_optimizer::continuous: {
      continuous_options co;
      co.common = o;
      co.ascent = s.ascent;
      co.polish = s.polish;
      return basic_continuous_learner<Backend>(std::move(co));
    }
    case block_optimizer::greedy:
    case block_optimizer::lazy:
    case block_optimizer::stochastic: {
      greedy_options g;
      g.method = greedy_method_of(which);
      return basic_greedy_learner<Backend>(o, std::move(g));
    }
    case block_optimizer::automatic:
      break;
  }
  throw invalid_input("optimizer", "auto must be resolved before a block runs (resolve_optimizer)");
}

namespace detail::blocks {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The block's mix: `make_mix`, with facility location's weight moved to its kNN form and the
/// graph set (given, or built here for this block) when the settings ask for a graph.
template <class T>
standard_mix block_mix(const problem<T>& p, const block_run_settings& s, const block_hooks& h) {
  standard_mix m = run_mix(s, s.knn());
  if (!s.knn()) return m;
  auto& sparse = std::get<sparse_facility_location>(m.objectives);
  sparse.graph = s.graph;
  if (!sparse.graph) {
    const index_t n = p.embeddings.rows;
    knn_settings ks;
    ks.neighbors = std::min(s.neighbors, n);
    ks.kernel = s.learn.kernel;
    ks.gamma = s.learn.gamma;
    ks.threads = s.run.threads;
    ks.build = s.learn.knn_builder;
    ks.clusters = std::min(s.learn.knn_clusters, n);
    ks.probes = s.learn.knn_probes;
    ks.seed = s.run.seed;
    const auto t0 = std::chrono::steady_clock::now();
    knn_graph g = build_knn_graph(p, ks, s.run.normalized, knn_build_hooks{h.on_graph_progress, h.stop});
    if (!builds_exact(ks, n)) {
      // An approximate graph says how approximate: recall on a few rows (2 r n d products).
      const index_t rows = std::min<index_t>(n, knn_recall_rows);
      g.recall = knn_recall(p, g, ks, rows, s.run.normalized);
      g.source += detail::concat(", recall@K ", *g.recall, " (estimated on ", rows, " rows)");
    }
    const double seconds = seconds_since(t0);
    sparse.graph = std::make_shared<const knn_graph>(std::move(g));
    if (h.on_graph) h.on_graph(*sparse.graph, seconds);
  }
  return m;
}

/// The certificate of a block's selection `rows` (`certify` on the f `evaluate_block` evaluated
/// it with); random subsets, where f's terms need them, drawn from the run's seed and the block.
template <class T>
block_certificate certify_rows(const objective_function<T, standard_mix>& f, const settings& o,
                                      std::span<const index_t> rows, const block_run_settings& s,
                                      double objective) {
  certify_settings cs = s.learn.certify_object();
  cs.seed = greedy_seed(o);  // one stream per block, as the greedies'
  cs.threads = o.threads;
  return block_certificate_of(certify(f, rows, cs), objective);
}

/// The block's record of the graph its kNN facility term runs on.
inline block_graph graph_record(const standard_mix& m, double seconds) {
  const knn_graph& g = *std::get<sparse_facility_location>(m.objectives).graph;
  return block_graph{g.k, g.source, seconds, g.bytes(), g.recall};
}

/// Under a corpus calibration, the block's terms (scaled by its fixed scales) carry its
/// `constant` marks.
inline void corpus_marks(const block_run_settings& s, std::vector<term_value>& terms) {
  for (std::size_t t = 0; t < s.calibration.size() && t < terms.size(); ++t) {
    terms[t].constant = s.calibration[t].constant;
  }
}

/// The stop hook, latched: once it has said stop, the block stays stopped, so a hook that says
/// so only once still ends the block instead of leaving a partial selection behind.
class stop_latch {
 public:
  explicit stop_latch(const block_hooks& h) : hook_(h.stop) {}
  bool operator()() { return hit_ = hit_ || (hook_ && hook_()); }

 private:
  const std::function<bool()>& hook_;
  bool hit_ = false;
};

/// The block's optimizer hooks (learners/protocol.hpp) from the front end's: each step's record
/// appended to the block's history before the front end sees it, snapshots with the block.
inline optimizer_hooks optimizer_hooks_of(const block_hooks& h, stop_latch& stop, block_result& r) {
  optimizer_hooks oh;
  oh.on_step = [&h, &r](const step_record& rec) {
    r.history.push_back(rec);
    if (h.on_step) h.on_step(r.history.back());
  };
  oh.on_pick = h.on_pick;
  oh.stop = [&stop] { return stop(); };
  oh.snapshot_every = h.snapshot_every;
  if (h.on_snapshot) {
    oh.on_snapshot = [&h, &r](index_t step, std::span<const double> state, const best_rollout& best) {
      h.on_snapshot(r, step, state, best);
    };
  }
  return oh;
}

/// Runs `which` on the block through the optimizers' protocol, a learner continued from the
/// front end's snapshot when it has one; fills the block's ids, counters and history and f's
/// terms as the optimizer scaled them (`terms`); returns the rows selected.
/// @throws run_stopped when the stop hook ended it
template <backend Backend, class T>
std::vector<index_t> optimize(const problem<T>& p, const detail::prepared& prep, const settings& o,
                              const block_run_settings& s, block_optimizer which, const standard_mix& m,
                              const block_hooks& h, stop_latch& stop, block_result& r,
                              std::vector<term_value>& terms) {
  const optimizer_hooks oh = optimizer_hooks_of(h, stop, r);
  std::optional<resume_point> from;
  const bool has_state = which == block_optimizer::pg || which == block_optimizer::continuous;
  if (has_state && h.resume) {
    resume_point point;
    if (h.resume(r, point.step, point.state, point.best)) {
      point.history = r.history;
      from = std::move(point);
    }
  }
  const resume_point* at = from ? &*from : nullptr;
  selection_result res = std::visit([&](const auto& opt) { return opt.select(p, m, oh, at, &prep); },
                                    make_optimizer<Backend>(which, o, s));
  if (res.stopped_early || stop()) throw run_stopped();
  r.ids = std::move(res.ids);
  r.kept = res.kept;
  r.steps_run = res.steps_run;
  r.zero_variance_steps = res.zero_variance_steps;
  r.nonfinite_steps = res.nonfinite_steps;
  terms = std::move(res.terms);
  return std::move(res.rows);
}

/// A block whose S_b is all of it: nothing to choose, so no optimizer runs. Its rows in a
/// learner's read-out order when there is nothing to learn (quality descending, ties to the
/// smaller id), f's terms with the scales the run fixes (1 where it calibrates: every subset is
/// the block, so no term varies, and each is marked constant).
template <backend Backend, class T>
std::vector<index_t> every_row(const problem<T>& p, const detail::prepared& prep, const settings& o,
                               const standard_mix& m, block_result& r, std::vector<term_value>& terms) {
  if (o.prune_threshold) {  // as every optimizer refuses it: S_b is the block, the prune keeps less
    const auto kept = static_cast<index_t>(kept_rows(p, *o.prune_threshold).size());
    DATAMASK_EXPECTS(kept >= o.count, "prune", "keeps ", kept, " items of block ", o.block, ", fewer than its S = ",
                     o.count);
  }
  terms = learner<Backend>(o).calibrate(p, m, &prep);
  for (auto& t : terms) t.constant = calibrates(o.scaling);
  std::vector<index_t> rows(static_cast<std::size_t>(p.embeddings.rows));
  std::iota(rows.begin(), rows.end(), index_t{0});
  const auto q = [&](index_t i) { return prep.quality.empty() ? 0.0 : prep.quality[static_cast<std::size_t>(i)]; };
  const auto id = [&](index_t i) { return prep.ids[static_cast<std::size_t>(i)]; };
  std::sort(rows.begin(), rows.end(), [&](index_t a, index_t b) { return q(a) != q(b) ? q(a) > q(b) : id(a) < id(b); });
  r.kept = p.embeddings.rows;
  for (index_t row : rows) r.ids.push_back(id(row));
  return rows;
}

}  // namespace detail::blocks

/// @brief Selects S_b items of block `b` and evaluates the selection.
/// @param p the block (`block_data::view()`): float32 rows, or float16/bfloat16 ones read as
///        stored (without an objective given at run time: `external_objective`); its ids are the
///        ids reported
/// @param b the block number (part of the random key)
/// @param s_b the items to select (`split_selection`); 0 returns an empty result, and the whole
///        block runs no optimizer (`optimizer` empty: nothing to choose)
/// @param threshold the corpus-level prune threshold (`prune_threshold`), if any
/// @param s the run's settings; `auto` is resolved for this block (`resolve_optimizer(s, shape)`)
/// @param h progress, stop, snapshot and resume hooks
/// @tparam Backend where the learners run (`eigen_backend`, the CPU, unless named; `thrust_backend`
///         on the GPU under nvcc, or on OpenMP threads with `datamask::thrust_omp`); the greedy
///         baselines and the evaluation of the selection run on the host with every backend
/// @return the block's result: ids in selection order, terms (raw, scale, weight), objective,
///         history, counters and seconds
/// @throws invalid_input for bad input or settings; run_stopped when `h.stop` stopped it
template <backend Backend = eigen_backend, class T>
[[nodiscard]] block_result select_block(const problem<T>& p, index_t b, index_t s_b,
                                        std::optional<double> threshold, const block_run_settings& s,
                                        const block_hooks& h = {}) {
  block_result r;
  r.block = b;
  r.items = p.embeddings.rows;
  r.selected = s_b;
  if (s_b == 0) return r;
  const bool everything = s_b == p.embeddings.rows;  // nothing to choose: no optimizer runs
  const block_optimizer which = resolve_optimizer(s, block_shape{p.embeddings.rows, p.embeddings.cols, s_b});
  if (!everything) r.optimizer = std::string(enum_name(which));
  settings o = block_settings(s, b, s_b, threshold);
  const auto t_graph = std::chrono::steady_clock::now();
  const standard_mix m = detail::blocks::block_mix(p, s, h);  // before t0: the graph is not optimising
  if (s.knn()) r.graph = detail::blocks::graph_record(m, s.graph ? 0.0 : detail::blocks::seconds_since(t_graph));
  const auto t0 = std::chrono::steady_clock::now();
  // One pass over the block for the optimizer, the evaluation and the certificate.
  const detail::prepared prep = detail::prepare(p, o.normalized, o.threads);
  std::vector<index_t> rows;
  std::vector<term_value> terms;  // f's terms as the optimizer scaled them
  detail::blocks::stop_latch stop(h);
  if (everything) {
    rows = detail::blocks::every_row<Backend>(p, prep, o, m, r, terms);
  } else {
    rows = detail::blocks::optimize<Backend>(p, prep, o, s, which, m, h, stop, r, terms);
  }
  r.optimize_seconds = detail::blocks::seconds_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  detail::blocks::corpus_marks(s, terms);
  const auto f = evaluate_block(p, m, o, terms, rows, r, &prep);
  r.evaluate_seconds = detail::blocks::seconds_since(t1);
  if (s.certify) r.certificate = detail::blocks::certify_rows(f, o, rows, s, r.objective);
  return r;
}

/// @brief Evaluates f and its terms on any subset of a block, with the scales a selection of
/// that size would use (calibrated as the learners calibrate them for block `b`, or fixed/raw).
/// With the rows `select_block` selected, the result's terms and objective are its own.
/// @param rows the subset, as rows of `p` (any order, no row twice)
/// @tparam Backend the backend that calibrates the scales: that of the `select_block` run whose
///         terms are to be reproduced (the calibration subsets are scored on it)
/// @throws invalid_input ("rows") for a row outside the block or given twice
template <backend Backend = eigen_backend, class T>
[[nodiscard]] block_result evaluate_rows(const problem<T>& p, index_t b, std::span<const index_t> rows,
                                         std::optional<double> threshold, const block_run_settings& s) {
  std::vector<char> seen(static_cast<std::size_t>(p.embeddings.rows), 0);
  for (index_t r : rows) {
    DATAMASK_EXPECTS(r >= 0 && r < p.embeddings.rows, "rows", "row ", r, " is outside the block of ",
                     p.embeddings.rows, " rows");
    DATAMASK_EXPECTS(!seen[static_cast<std::size_t>(r)], "rows", "row ", r, " is given twice");
    seen[static_cast<std::size_t>(r)] = 1;
  }
  block_result r;
  r.block = b;
  r.items = p.embeddings.rows;
  r.selected = static_cast<index_t>(rows.size());
  DATAMASK_EXPECTS(!rows.empty(), "rows", "the subset is empty; f needs at least one item");
  settings o = block_settings(s, b, r.selected, threshold);
  const detail::prepared prep = detail::prepare(p, o.normalized, o.threads);
  const standard_mix m = detail::blocks::block_mix(p, s, {});  // select_block's f: the kNN term when s.knn()
  std::vector<term_value> terms = learner<Backend>(o).calibrate(p, m, &prep);
  detail::blocks::corpus_marks(s, terms);
  for (index_t row : rows) r.ids.push_back(p.ids.empty() ? static_cast<id_t>(row) : p.ids[static_cast<std::size_t>(row)]);
  evaluate_block(p, m, o, terms, rows, r, &prep);
  return r;
}

}  // namespace datamask
