// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The input of a run (`problem`), its settings (`settings`: values only; an optimizer
/// takes its hooks and a resume point as arguments, learners/protocol.hpp) and its output
/// (`selection_result`).

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "datamask/core/enum_names.hpp"
#include "datamask/core/error.hpp"
#include "datamask/core/detail/parallel.hpp"
#include "datamask/core/greedy_options.hpp"
#include "datamask/core/setting_entries.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

/// @brief One quality score column and its weight w_a in F_q = sum_a w_a F_qa.
struct quality_column {
  std::span<const double> scores;  ///< one score per row of the block
  double weight = 1.0;
};

/// @brief One block of items: embeddings (n x d, row-major), quality columns, ids.
/// Views only: the caller keeps the memory alive for the duration of the call.
template <class T>
struct problem {
  matrix_view<const T> embeddings;
  std::vector<quality_column> quality;  ///< may be empty when lambda = 0
  std::span<const id_t> ids;            ///< empty: the row numbers are the ids
};

/// @brief How rewards become advantages.
enum class advantage_mode {
  group_normalized,  ///< (r - mean) / (std + 1e-8), population std over the G rollouts
  leave_one_out      ///< r_g - mean of the other rollouts
};
/// @brief Who gets the credit of a rollout (docs/method.md section 6, last item).
enum class credit_mode {
  rollout,  ///< the paper's estimator: every item of rollout g gets the rollout's advantage A_g
  item,     ///< per-item credit: item i of rollout g gets its marginal f(M_g) - f(M_g \ {i}),
            ///< less a leave-one-out baseline over the rollouts (needs `marginal_objective`s)
  automatic ///< item where every term of f that counts is a `cheap_marginal_objective` and the
            ///< policy's gradient has the relaxed form, else rollout (`phases::resolve_credit`)
};
/// @brief How the terms of f are put on comparable scales (docs/method.md section 1.1).
enum class term_scaling {
  calibrated,  ///< divide each term by its std over random subsets, fixed for the run; over a
               ///< corpus of several blocks, once for the corpus (`calibration_rows`)
  raw,         ///< no scaling
  group,       ///< z-score each term within each step's rollouts: f is then not a fixed function
  fixed,       ///< divide each term by the caller's `settings::scales`: one f for every block,
               ///< seed and batch size (calibrated scales depend on all three)
  calibrated_per_block  ///< as calibrated, but each block of a corpus calibrates its own
};
/// @brief Whether a learner calibrates the scales itself (on its block's first active batch).
constexpr bool calibrates(term_scaling s) {
  return s == term_scaling::calibrated || s == term_scaling::calibrated_per_block;
}
/// @brief The quality term: mean or sum of the combined scores over the subset.
enum class quality_aggregate { mean, sum };
/// @brief Initial logits.
enum class init_mode {
  uniform,  ///< all 0
  quality   ///< L_i = ln(q_i - min q + delta), delta = 1% of the range of q
};
/// @brief How the final selection is read from the logits.
enum class readout_mode {
  top_logits,  ///< the S largest logits, ties to the smaller id
  sample       ///< one Gumbel-top-S draw from the final logits
};

template <>
struct enum_traits<advantage_mode> {
  static constexpr std::array<enum_choice<advantage_mode>, 2> choices{
      {{"group-normalized", advantage_mode::group_normalized},
       {"leave-one-out", advantage_mode::leave_one_out}}};
};
template <>
struct enum_traits<credit_mode> {
  static constexpr std::array<enum_choice<credit_mode>, 3> choices{
      {{"rollout", credit_mode::rollout}, {"item", credit_mode::item}, {"auto", credit_mode::automatic}}};
};
template <>
struct enum_traits<term_scaling> {
  static constexpr std::array<enum_choice<term_scaling>, 5> choices{
      {{"calibrated", term_scaling::calibrated},
       {"raw", term_scaling::raw},
       {"group", term_scaling::group},
       {"fixed", term_scaling::fixed},
       {"calibrated-per-block", term_scaling::calibrated_per_block}}};
};
template <>
struct enum_traits<quality_aggregate> {
  static constexpr std::array<enum_choice<quality_aggregate>, 2> choices{
      {{"mean", quality_aggregate::mean}, {"sum", quality_aggregate::sum}}};
};
template <>
struct enum_traits<init_mode> {
  static constexpr std::array<enum_choice<init_mode>, 2> choices{
      {{"uniform", init_mode::uniform}, {"quality", init_mode::quality}}};
};
template <>
struct enum_traits<readout_mode> {
  static constexpr std::array<enum_choice<readout_mode>, 2> choices{
      {{"top-logits", readout_mode::top_logits}, {"sample", readout_mode::sample}}};
};

/// @brief The best complete selection a run has evaluated: its rows and its reward (f with the
/// active batch, here all kept items, as reference set). Part of a checkpoint.
struct best_rollout {
  std::vector<index_t> rows;
  double reward = -std::numeric_limits<double>::infinity();
};

/// @brief The policy-gradient learner's own settings (`basic_learner`; no other optimizer reads
/// them, so a front end refuses them with another). Their table entries are declared with
/// this struct as their owner (`visit_pg_settings`).
struct pg_settings {
  index_t rollouts = 128;    ///< G, at least 2
  /// E, in [0, 2^32 - 1). 0 runs no policy-gradient step: the scales are still calibrated (the
  /// reported f needs them) and the selection is the read-out of the initial logits (under
  /// `init_mode::quality` the top S by quality; under `uniform` the first S kept rows).
  index_t steps = 1000;
  /// The reference set V of objectives that compare a subset with a population (facility
  /// location) while learning: 0, the step's active batch (docs/method.md); R > 0, R kept rows
  /// (at most all of them) drawn anew each step, independently of the active batch, so a
  /// rollout's reward is its coverage of a sample of the block. The calibration uses step 1's.
  index_t reference_size = 0;
  init_mode init = init_mode::uniform;
  advantage_mode advantage = advantage_mode::group_normalized;
  /// Per-rollout credit (the paper's estimator) or per-item credit from the objectives' marginals
  /// (see `basic_learner`; the policy's relaxed gradient form, every diversity term a
  /// `marginal_objective`); `automatic`: per-item credit where the marginals cost about one
  /// evaluation (pairwise similarity, dense facility location), where it reaches a given f in
  /// less time (benchmarks/RESULTS.md, "Policy gradient: per-item credit"), else the paper's.
  credit_mode credit = credit_mode::automatic;
  readout_mode readout = readout_mode::top_logits;
  /// When every rollout is a complete candidate selection (the active batch is all kept items and
  /// k = S, as in blocks no larger than `min_active`), remember the best rollout evaluated and
  /// return it if it beats the logit read-out on the final evaluation. Not with group scaling,
  /// whose rewards are not values of a fixed f, nor with the sampled read-out.
  bool keep_best_rollout = true;

  bool operator==(const pg_settings&) const = default;
};

/// @brief Stochastic greedy's own setting, read by the baseline and by the continuous learner's
/// stochastic start (`polish_settings::stochastic_start`); the policy-gradient learner ignores it.
struct stochastic_settings {
  double epsilon = greedy_options{}.epsilon;  ///< `greedy_options::epsilon`
};

/// @brief What a run over blocks sets for each block from its own arguments (`select_block`),
/// not from a user's option: a front end offers none of them.
struct per_block_settings {
  std::uint64_t block = 0;  ///< block number, part of the random key
  /// A quality threshold computed elsewhere (global quantile over blocks); overrides `prune`.
  std::optional<double> prune_threshold;
  bool evaluate_selection = true;  ///< evaluate each term on the selection (whole block as V)
};

/// @brief The plain values of a run, with the reference script's defaults where it has one: what
/// every optimizer reads (the size of the selection, lambda, the prune, f's scales, the seed,
/// threads), and, as bases, what one optimizer owns (`pg_settings`, `stochastic_settings`) and
/// what a run over blocks sets per block (`per_block_settings`).
///
/// Each member's default is written here and nowhere else; its command-line name, help text
/// and valid range are in the settings table (settings.hpp, `visit_settings`), declared with
/// the struct that owns it, and `validate(const settings&)` checks a whole set against that
/// table. Only values: no callbacks and no state of an earlier run (an optimizer takes those as
/// arguments: `optimizer_hooks` and `resume_point`, learners/protocol.hpp).
struct settings : pg_settings, stochastic_settings, per_block_settings {
  double ratio = 0.1;        ///< rho: the fraction of items selected, in (0, 1]
  index_t count = 0;         ///< when > 0, select exactly this many items (overrides ratio)
  double lambda = 0.5;       ///< weight of quality against diversity, in [0, 1]
  double active_fraction = 0.05;  ///< beta, in (0, 1]
  index_t min_active = 1024;      ///< floor of the active batch size m (clipped to the kept items)
  double prune = 0.0;  ///< drop items whose quality is below this quantile, in [0, 1)
  term_scaling scaling = term_scaling::calibrated;
  /// With `term_scaling::fixed`: one divisor per term of f, finite and > 0, in the order of
  /// `selection_result::terms` (quality first when there are scores, then the diversity
  /// objectives in the order given); for example the scales one `calibrate()` call reported.
  std::vector<double> scales;
  index_t calibration_subsets = 256;
  quality_aggregate quality = quality_aggregate::mean;
  std::uint64_t seed = 0;
  int threads = 0;           ///< 0: all available
  bool normalized = false;   ///< the caller declares the embeddings already unit-normalised
};

/// @brief The key of stochastic greedy's samples on block `s.block` of a run seeded `s.seed`:
/// one stream per block, the same for the baseline, the continuous learner's start and the
/// certificate's random subsets.
[[nodiscard]] inline std::uint64_t greedy_seed(const settings& s) {
  return s.seed ^ (s.block * 0x9E3779B97F4A7C15ull);
}

namespace detail {
inline bool uses_ratio(const settings& s) { return s.count == 0; }

/// The table's entries of what a run selects and how the policy-gradient learner steps
/// (`settings` from `ratio` to `credit`).
template <class F>
void visit_selection_settings(F& f) {
  using S = settings;
  using P = pg_settings;
  using B = per_block_settings;
  f(number_setting<S, double>{"ratio", "ratio", "fraction of items to select (rho)", &S::ratio,
                              0.0, 1.0, true, false, {}, &detail::uses_ratio});
  f(number_setting<S, index_t>{"count", "count",
                               "select exactly this many items instead (0: use the ratio)",
                               &S::count, 0, index_max});
  f(number_setting<S, double>{"lambda", "lambda",
                              "weight of quality against diversity (1: top by quality, 0: "
                              "diversity only)",
                              &S::lambda, 0.0, 1.0});
  f(number_setting<P, index_t>{"rollouts", "rollouts", "masks sampled per step (G)",
                               &P::rollouts, 2, (index_t{1} << 31) - 1, false, false, "G"});
  f(number_setting<P, index_t>{"steps", "steps",
                               "policy-gradient steps per block (E); 0: calibrate and read out "
                               "the initial logits",
                               &P::steps, 0, (index_t{1} << 32) - 2, false, false, "E"});
  f(number_setting<S, double>{"active-fraction", "active_fraction",
                              "share of a block that is active at each step (beta)",
                              &S::active_fraction, 0.0, 1.0, true, false});
  f(number_setting<S, index_t>{"min-active", "min_active",
                               "floor of the active batch size m (clipped to the kept items)",
                               &S::min_active, 1, index_max});
  f(number_setting<P, index_t>{"reference-size", "reference_size",
                               "facility location's reference set while learning: 0 the step's active "
                               "batch (the paper's), else this many kept items drawn anew each step",
                               &P::reference_size, 0, index_max});
  f(choice_setting<P, init_mode>{"init", "init", "initial logits", &P::init});
  f(number_setting<S, double>{"prune", "prune",
                              "drop items below this quantile of quality (0: keep all)",
                              &S::prune, 0.0, 1.0, false, true});
  f(number_setting<B, double, std::optional<double>>{
      "prune-threshold", "prune_threshold",
      "a quality threshold computed elsewhere (global over blocks); overrides prune",
      &B::prune_threshold, -inf, inf});
  f(choice_setting<P, advantage_mode>{"advantage", "advantage", "how rewards become advantages",
                                      &P::advantage});
  f(choice_setting<P, credit_mode>{"credit", "credit",
                                   "who gets a rollout's credit: every item its advantage (rollout, the "
                                   "paper's), each its own marginal gain (item), or auto",
                                   &P::credit});
}

/// The table's entries of f's scales, the read-out and the run (`settings` from `scaling` to
/// `epsilon`).
template <class F>
void visit_scale_and_run_settings(F& f) {
  using S = settings;
  using P = pg_settings;
  using B = per_block_settings;
  using G = stochastic_settings;
  f(choice_setting<S, term_scaling>{"scaling", "scaling",
                                    "how the terms of f are put on one scale", &S::scaling});
  f(number_setting<S, double, std::vector<double>>{
      "scales", "scales",
      "divisor per term of f (quality, then each diversity objective that counts), with scaling fixed",
      &S::scales, 0.0, inf, true, true, {}, [](const S&) { return false; }});
  f(number_setting<S, index_t>{"calibration-subsets", "calibration_subsets",
                               "uniform subsets whose std calibrates each term's scale",
                               &S::calibration_subsets, 2, (index_t{1} << 31) - 1});
  f(choice_setting<S, quality_aggregate>{"quality-aggregate", "quality",
                                         "the quality term: mean or sum over the subset",
                                         &S::quality});
  f(choice_setting<P, readout_mode>{"readout", "readout",
                                    "how the selection is read from the final logits",
                                    &P::readout});
  f(number_setting<S, std::uint64_t>{"seed", "seed", "random seed; same seed, same selection",
                                     &S::seed, 0, std::numeric_limits<std::uint64_t>::max()});
  f(number_setting<B, std::uint64_t>{"block", "block", "block number, part of the random key",
                                     &B::block, 0, std::numeric_limits<std::uint64_t>::max()});
  f(number_setting<S, int>{"threads", "threads",
                           "CPU threads (0: all available; more are capped to the CPUs this process may run on); "
                           "does not change the selection",
                           &S::threads, 0, std::numeric_limits<int>::max()});
  f(flag_setting<S>{"normalized", "normalized", "the embeddings are already unit-normalised",
                    &S::normalized});
  f(flag_setting<B>{"evaluate-selection", "evaluate_selection",
                    "evaluate each term on the selection (whole block as reference)",
                    &B::evaluate_selection});
  f(flag_setting<P>{"keep-best-rollout", "keep_best_rollout",
                    "return the best complete rollout when it beats the read-out",
                    &P::keep_best_rollout});
  f(number_setting<G, double>{"epsilon", "epsilon",
                              "stochastic greedy: ceil((n / S) ln(1 / epsilon)) candidates per round",
                              &G::epsilon, 0.0, 1.0, true, true});
}
}  // namespace detail

/// @brief Visits the table entries of `settings`, in the order of the struct.
/// Ranges of the fields the learner reads through the settings of a run; `scales` is checked
/// term by term where the terms are known (`detail::apply_fixed_scales`).
template <class F>
void visit_run_settings(F&& f) {
  detail::visit_selection_settings(f);
  detail::visit_scale_and_run_settings(f);
}

/// @brief The C++ name of the first policy-gradient setting (the table's entries owned by
/// `pg_settings`, in its order) that `s` changed from its default, or empty: what
/// `datamask::select` refuses when it runs another optimizer. Read off the table, so a new
/// member of `pg_settings` is named once it is declared there ("pg_settings" until then).
[[nodiscard]] inline std::string_view changed_pg_setting(const settings& s) {
  std::string_view changed;
  visit_run_settings([&](const auto& entry) {
    if constexpr (std::is_same_v<typename std::remove_cvref_t<decltype(entry)>::owner_type, pg_settings>) {
      if (changed.empty() && !(s.*entry.member == entry.default_value())) changed = entry.field;
    }
  });
  if (changed.empty() && !(static_cast<const pg_settings&>(s) == pg_settings{})) return "pg_settings";
  return changed;
}

/// @brief Checks every setting of a run against its range, then the rules between settings.
/// @throws invalid_input naming the setting (its C++ member name).
inline void validate(const settings& s) {
  visit_run_settings([&](const auto& entry) { entry.check(s); });
  DATAMASK_EXPECTS(s.scaling == term_scaling::fixed || s.scales.empty(), "scales",
                   "were given, but scaling is not term_scaling::fixed");
}

/// @brief Sets `s.threads` to the threads the run uses (`detail::resolve_threads`): 0 (all)
/// becomes the CPUs this process may run on, and a larger request is capped to them. Why: more
/// threads than CPUs only wait on each other (docs/tuning.md, "Threads"), and
/// the selection does not depend on the count.
/// @return what a front end warns of when a request was capped ("1000 is more than ..."),
/// empty otherwise
[[nodiscard]] inline std::string use_threads(settings& s) {
  const int used = detail::resolve_threads(s.threads);
  const int asked = s.threads;
  s.threads = used;
  if (asked <= used) return {};
  return detail::concat(asked, " is more than this process can run at once (the CPUs it may run on); using ", used);
}

/// @brief One term of f: its raw value on the selection, the divisor applied, and its weight
/// in f (lambda * w for quality, (1 - lambda) * v_b for diversity objective b).
struct term_value {
  std::string name;
  double weight = 0.0;
  double scale = 1.0;
  double raw = 0.0;
  /// Calibration found the term constant on its subsets (std 0, or within
  /// `constant_term_tolerance` of its magnitude: rounding noise), so its scale is 1.
  bool constant = false;
};

/// @brief The scales of terms, in order.
[[nodiscard]] inline std::vector<double> scales_of(std::span<const term_value> terms) {
  std::vector<double> scales;
  for (const auto& t : terms) scales.push_back(t.scale);
  return scales;
}

/// @brief A calibrated term whose std over the calibration subsets is at most this fraction of
/// its largest magnitude on them is constant up to rounding: dividing by that std would blow
/// the term's rounding noise up to decide the selection (docs/method.md 1.1's guard, "if a std is 0,
/// use 1", with a relative tolerance). `T` is what the term is computed in: a diversity term in
/// the embeddings' type (float rounding is about 1e-7 of a value), the quality term in double
/// (about 1e-16: scores with a large common offset still vary).
template <class T>
inline constexpr double constant_term_tolerance = sizeof(T) < sizeof(double) ? 1e-6 : 1e-12;

/// @brief One row of the per-step history.
struct step_record {
  index_t step = 0;
  double lr = 0.0;
  double reward_mean = 0.0;
  double reward_max = 0.0;
  std::vector<double> term_means;  ///< raw, averaged over the rollouts, in `terms` order
};

/// @brief Everything a run returns.
struct selection_result {
  /// Selected ids: a learner's by final logit descending (ties: smaller id); a greedy's in the
  /// order picked (its result has no logits, active batch or rollouts).
  std::vector<id_t> ids;
  std::vector<index_t> rows;     ///< the same items as rows of the block
  std::vector<double> logits;    ///< final logit per row; pruned rows hold -infinity
  std::vector<term_value> terms; ///< quality (when lambda > 0) then each diversity objective
  double objective = 0.0;        ///< f on the selection: sum of weight * raw / scale
  bool evaluated = false;        ///< whether `terms[].raw` and `objective` were computed
  std::vector<step_record> history;
  index_t steps_run = 0;
  bool stopped_early = false;
  index_t zero_variance_steps = 0;  ///< steps whose rewards were all equal (no update)
  index_t nonfinite_steps = 0;      ///< steps with a NaN or infinite reward (skipped)
  index_t selected = 0;             ///< S
  index_t kept = 0;                 ///< items left after pruning
  index_t active = 0;               ///< m, the active batch size
  index_t rollout_size = 0;         ///< k, items per rollout
  bool best_rollout_used = false;   ///< the selection is the best rollout, not the read-out
  double prune_threshold = -std::numeric_limits<double>::infinity();
};

}  // namespace datamask
