// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The settings table: one entry per setting a user can give (its command-line name,
/// help text, default, valid range or enum choices), and the one validation path built on it.
///
/// Why a table: the library, the command-line program and the benchmarks' tune tool used to
/// keep their own defaults, string maps and range checks, which drifted apart. Here each
/// setting is described once; defaults stay the member initialisers of `settings` and
/// `learner_settings` (read through `default_value()`), enum spellings stay next to each enum
/// (`enum_traits`, enum_names.hpp).
///
/// A program builds its flags from the table (sketch for CLI11; any parser works the same way):
/// @code
///   datamask::options o;              // the library's defaults
///   datamask::learner_settings ls;
///   datamask::visit_settings([&](const auto& s) {
///     using entry = std::remove_cvref_t<decltype(s)>;
///     auto& target = datamask::setting_owner(s, o, ls);  // o or ls, by the entry's owner
///     auto& field = target.*s.member;
///     std::string help = std::string(s.help) + " (default " + s.default_text() + ")";
///     if constexpr (entry::kind == datamask::setting_kind::choice) {
///       // map every s.choices[i].name to s.choices[i].value: app.add_option(...)->transform
///     } else if constexpr (entry::kind == datamask::setting_kind::flag) {
///       app.add_flag("--" + std::string(s.name), field, help);
///     } else {
///       app.add_option("--" + std::string(s.name), field, help + ", " + s.range_text());
///     }
///   });
///   // after parsing:
///   datamask::validate(o);   // every range and the cross-field rules; throws invalid_input
///   datamask::validate(ls);
/// @endcode

#include <array>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "datamask/detail/parallel.hpp"
#include "datamask/enum_names.hpp"
#include "datamask/error.hpp"
#include "datamask/knn/graph.hpp"
#include "datamask/objectives/facility.hpp"
#include "datamask/options.hpp"
#include "datamask/policy/softmax.hpp"
#include "datamask/schedule/lr.hpp"

namespace datamask {

/// @brief The constructor settings of the policy, the schedule and facility location that a
/// program exposes (the learner takes the objects themselves; this group builds them). The
/// defaults are those of `runtime_lr`, `softmax_policy` and `facility_location`, read from them.
struct learner_settings {
  double lr_max = runtime_lr{}.max_lr;                    ///< first learning rate
  double lr_min = runtime_lr{}.min_lr;                    ///< last learning rate
  schedule_kind schedule = runtime_lr{}.kind;             ///< linear, cosine or constant
  gradient_mode logprob = softmax_policy{}.mode;          ///< gradient of ln P(mask)
  similarity_kernel kernel = facility_location{}.kernel;  ///< facility location's kernel
  double gamma = facility_location{}.gamma;               ///< rbf bandwidth
  /// Dense facility location's greedy similarity cache, in MiB (`facility_location::cache_bytes`).
  double facility_cache = static_cast<double>(facility_location{}.cache_bytes) / double(1 << 20);
  /// How a block's kNN graph is built (facility location on a kNN graph), and the clustered
  /// builder's C and P (0: its defaults); knn/graph.hpp and knn/clustered.hpp.
  knn_build knn_builder = knn_build::automatic;
  index_t knn_clusters = 0;
  index_t knn_probes = 0;

  [[nodiscard]] runtime_lr schedule_object() const { return runtime_lr{schedule, lr_max, lr_min}; }
  [[nodiscard]] softmax_policy policy_object() const { return softmax_policy{logprob}; }
  /// Facility location with this kernel, gamma and cache budget.
  [[nodiscard]] facility_location facility_object() const {
    facility_location f;
    f.kernel = kernel;
    f.gamma = gamma;
    f.cache_bytes = static_cast<std::size_t>(facility_cache * double(1 << 20));
    return f;
  }
};

/// @brief What the continuous learner's iterate is.
enum class continuous_parameterization {
  projected,  ///< p itself; after each step, Euclidean projection onto {0 <= p <= 1, sum p = S}
  logits      ///< logits L; p_i = sigmoid(L_i - tau), tau by bisection so that sum p = S
};

/// @brief How a gradient becomes a step.
enum class step_rule {
  plain,       ///< lr * g
  normalized,  ///< lr * g / max_i |g_i|: scale-free
  adam         ///< Adam (beta1, beta2, epsilon) on the iterate: scale-free per coordinate
};

/// @brief How the step size changes over the iterations.
enum class step_decay {
  constant,  ///< lr throughout
  linear,    ///< lr to lr * final_fraction, linearly
  cosine     ///< lr to lr * final_fraction, half a cosine
};

/// @brief Settings of the continuous ascent.
///
/// Defaults chosen by benchmarks/continuous_tune.cpp (synthetic block, n = 20,000, d = 64,
/// S = 2,000, lambda 0.5, 2 threads; share of naive greedy's gain, without polish):
/// - pairwise, projected + normalised, lr 0.5 linear: 99.88% after 25 iterations (0.24 s),
///   99.98% after 100 (0.78 s); with polish 100% (f above naive greedy's, 5.3 s);
/// - projected + Adam (lr 0.05, linear): 73.9% / 77.8% after 25 / 100; logits + Adam (lr 0.3,
///   constant): 46% / 77%, and 4x slower per iteration (no exact zeros: DiSF and the sums
///   touch every row) -- the sigmoid saturates and items far from the boundary stop moving;
/// - DiSF (d = 64), projected + normalised lr 0.5 linear: 99.77% / 99.96% after 25 / 100
///   (1.1 s / 3.0 s; naive greedy 151 s); constant lr 0.2: 99.72% / 99.95%.
/// The normalised step moves the most promising coordinate by lr whatever the scale of f, and
/// the projection lets p reach exact 0 and 1, so the read-out rounds almost nothing.
struct continuous_settings {
  index_t iterations = 100;
  continuous_parameterization parameterization = continuous_parameterization::projected;
  step_rule rule = step_rule::normalized;
  double lr = 0.5;
  step_decay decay = step_decay::linear;
  double final_fraction = 0.05;  ///< last step size as a fraction of lr (linear, cosine)
  double beta1 = 0.9;            ///< Adam
  double beta2 = 0.999;          ///< Adam
  double epsilon = 1e-8;         ///< Adam
  /// Evaluate f on the read-out (the S largest p) every this many iterations and keep the best
  /// one (0: never). Why: the relaxation's maximiser need not round to f's best set (on tiny
  /// blocks, DiSF's relaxation with W - 1 = S - 1 small differs much from the set function), but
  /// the sets the ascent passes through are candidates worth one evaluation each (O(S d) for
  /// pairwise similarity, O(S d^2) for DiSF: below one iteration's cost).
  index_t track_every = 1;
};

/// @brief Settings of the 1-swap polish after the read-out.
///
/// A round ranks by the gradient of the relaxation at the (integral) selection (refreshed every
/// `refresh_every` rounds), takes
/// the `candidates` unselected items with the largest gradient and the `candidates` selected
/// items with the smallest, and applies, one at a time, the best improving swap among those
/// pairs by its exact gain (incremental for quality, pairwise similarity and DiSF; by evaluation
/// for other objectives), until no pair improves f. Rounds stop when one makes no swap.
///
/// Why 30 rounds of 32 candidates (10 of 16 before): on real data the read-out can be far from a
/// good set (the relaxation's maximisers form a large face when S exceeds the data's intrinsic
/// dimension, and the S largest p of a point on it are no better than random), and polish does
/// the work. benchmarks/real_data.py, pairwise similarity, share of naive greedy's gain, worst of
/// 40 cells (ratios 0.05-0.3, lambda 0-0.9, three quality columns): standardised digits 49.5% ->
/// 99.6%, breast cancer 98.8% -> 99.9%; a text corpus 99.4% -> 100.0% (at most 0.27 of naive
/// greedy's time). DiSF's mean shares rise too, and its polish costs more (benchmarks/RESULTS.md,
/// "Real data"). Polish stops at a round without a swap, so a read-out that is already good pays
/// little for the larger limits.
struct polish_settings {
  bool enabled = true;
  index_t rounds = 30;      ///< at most this many rounds (each at most one gradient refresh)
  index_t candidates = 32;  ///< items considered on each side per round
  /// Items on each side for a double swap when no single swap improves (0 or 1: none); the
  /// search costs pair_candidates^4 / 2 exact gains.
  index_t pair_candidates = 6;
  /// Rounds between two refreshes of the relaxation's gradient that ranks the candidates (1:
  /// every round). Why: on DiSF a refresh costs one ascent iteration (O(n d^2)), and refreshing
  /// every round made polish cost as much as dozens of iterations; between refreshes a round
  /// ranks the current selection and the rest by the last gradient (the swapped items have moved
  /// sides, so new candidates come in). A round without any swap on a stale gradient refreshes
  /// it and retries before polish stops, so polish still stops only where the fresh ranking
  /// offers no improving swap (or at `rounds`).
  index_t refresh_every = 4;
  /// Wall-clock budget in seconds (0: none). A budget makes the result depend on the machine's
  /// speed; the round limit alone keeps it deterministic.
  double seconds = 0.0;
};

template <>
struct enum_traits<continuous_parameterization> {
  static constexpr std::array<enum_choice<continuous_parameterization>, 2> choices{
      {{"projected", continuous_parameterization::projected},
       {"logits", continuous_parameterization::logits}}};
};
template <>
struct enum_traits<step_rule> {
  static constexpr std::array<enum_choice<step_rule>, 3> choices{
      {{"plain", step_rule::plain}, {"normalized", step_rule::normalized}, {"adam", step_rule::adam}}};
};
template <>
struct enum_traits<step_decay> {
  static constexpr std::array<enum_choice<step_decay>, 3> choices{
      {{"constant", step_decay::constant}, {"linear", step_decay::linear}, {"cosine", step_decay::cosine}}};
};

/// @brief What kind of value a table entry holds.
enum class setting_kind { number, choice, flag };

/// @brief What every table entry says about itself.
struct setting_text {
  std::string_view name;   ///< command-line spelling, e.g. "active-fraction"
  std::string_view field;  ///< the C++ member, as error messages of the library name it
  std::string_view help;   ///< one line
};

/// @brief A numeric setting: `Owner::*member` holds a `V` (or an optional `V`, or a list of
/// `V`, each value checked). Range [min, max], either end open; an infinite or extreme end is
/// no bound. NaN is outside every range.
template <class Owner, class V, class Field = V>
struct number_setting : setting_text {
  static constexpr setting_kind kind = setting_kind::number;
  using owner_type = Owner;
  using value_type = V;
  Field Owner::*member;
  V min;
  V max;
  bool min_open = false;
  bool max_open = false;
  std::string_view symbol = {};  ///< the method's symbol (G, E, ...), prefixed to messages
  /// Whether the range applies to this set of values (an unused setting is not checked).
  bool (*applies)(const Owner&) = nullptr;

  [[nodiscard]] Field default_value() const { return Owner{}.*member; }
  [[nodiscard]] bool contains(V v) const {
    const bool above = min_open ? v > min : v >= min;
    const bool below = max_open ? v < max : v <= max;
    return above && below;
  }
  [[nodiscard]] bool bounded_above() const {
    if constexpr (std::floating_point<V>) return std::isfinite(max);
    return max != std::numeric_limits<V>::max();
  }
  [[nodiscard]] bool bounded_below() const {
    if constexpr (std::floating_point<V>) return std::isfinite(min);
    return min != std::numeric_limits<V>::lowest();
  }
  /// "in (0, 1]", "at least 2", ">= 0", "> 0", "any value".
  [[nodiscard]] std::string range_text() const {
    if (bounded_above() && bounded_below()) {
      return detail::concat("in ", min_open ? "(" : "[", min, ", ", max, max_open ? ")" : "]");
    }
    if (bounded_below()) {
      if (min_open) return detail::concat("> ", min);
      return min == V{0} ? std::string(">= 0") : detail::concat("at least ", min);
    }
    if (bounded_above()) return detail::concat(max_open ? "< " : "<= ", max);
    return std::floating_point<V> ? "not NaN" : "any value";
  }
  [[nodiscard]] std::string default_text() const { return value_text(default_value()); }

  /// @throws invalid_input naming `field` for a value outside the range.
  void check(const Owner& o) const {
    if (applies != nullptr && !applies(o)) return;
    const Field& f = o.*member;
    if constexpr (std::is_same_v<Field, V>) {
      check_value(f, "");
    } else if constexpr (std::is_same_v<Field, std::optional<V>>) {
      if (f) check_value(*f, "");
    } else {
      for (std::size_t i = 0; i < f.size(); ++i) check_value(f[i], detail::concat("value ", i, " "));
    }
  }

 private:
  void check_value(V v, const std::string& which) const {
    if (contains(v)) return;
    // An integer names the bound it broke ("at least 2"): its far end is usually a type limit.
    std::string expected = range_text();
    if constexpr (std::integral<V>) {
      expected = v < min ? (min == V{0} ? std::string(">= 0") : detail::concat("at least ", min))
                         : detail::concat("at most ", max);
    }
    throw invalid_input(std::string(field),
                        detail::concat(which, symbol, symbol.empty() ? "" : " ", "must be ",
                                       expected, ", found ", v));
  }
  static std::string value_text(const Field& f) {
    if constexpr (std::is_same_v<Field, V>) {
      return detail::concat(f);
    } else if constexpr (std::is_same_v<Field, std::optional<V>>) {
      return f ? detail::concat(*f) : std::string("none");
    } else {
      std::string s;
      for (std::size_t i = 0; i < f.size(); ++i) s += (i ? "," : "") + detail::concat(f[i]);
      return s.empty() ? std::string("none") : s;
    }
  }
};

/// @brief A setting chosen by name among the spellings of enum `E` (`enum_traits<E>`).
template <class Owner, named_enum E>
struct choice_setting : setting_text {
  static constexpr setting_kind kind = setting_kind::choice;
  using owner_type = Owner;
  using value_type = E;
  E Owner::*member;
  static constexpr const auto& choices = enum_traits<E>::choices;  ///< name and value pairs

  [[nodiscard]] E default_value() const { return Owner{}.*member; }
  [[nodiscard]] std::string default_text() const { return std::string(enum_name(default_value())); }
  [[nodiscard]] std::string range_text() const { return "one of " + enum_names_text<E>(); }
  /// @throws invalid_input naming `field` for a value without a spelling (a cast integer).
  void check(const Owner& o) const {
    DATAMASK_EXPECTS(!enum_name(o.*member).empty(), std::string(field), "must be ",
                     range_text(), ", found the value ", static_cast<long long>(o.*member));
  }
  /// @brief Parses a spelling into the setting. @throws invalid_input naming `name`.
  void parse(std::string_view text, Owner& o) const { o.*member = parse_enum<E>(text, name); }
};

/// @brief An on/off setting (a flag without a value on the command line).
template <class Owner>
struct flag_setting : setting_text {
  static constexpr setting_kind kind = setting_kind::flag;
  using owner_type = Owner;
  using value_type = bool;
  bool Owner::*member;

  [[nodiscard]] bool default_value() const { return Owner{}.*member; }
  [[nodiscard]] std::string default_text() const { return default_value() ? "on" : "off"; }
  [[nodiscard]] std::string range_text() const { return "on or off"; }
  void check(const Owner& /*o*/) const {}
};

/// @brief `a` or `b`, whichever owns the members of table entry `s` (see the usage sketch).
template <class Entry, class A, class B>
[[nodiscard]] auto& setting_owner(const Entry& /*s*/, A& a, B& b) {
  using owner = typename Entry::owner_type;
  if constexpr (std::is_base_of_v<owner, std::remove_cv_t<A>>) {
    return static_cast<owner&>(a);
  } else {
    static_assert(std::is_base_of_v<owner, std::remove_cv_t<B>>,
                  "datamask::setting_owner: neither object holds this setting");
    return static_cast<owner&>(b);
  }
}

namespace detail {
inline constexpr index_t index_max = std::numeric_limits<index_t>::max();
inline constexpr double inf = std::numeric_limits<double>::infinity();
inline bool uses_ratio(const settings& s) { return s.count == 0; }
inline bool uses_gamma(const learner_settings& s) { return s.kernel == similarity_kernel::rbf; }
}  // namespace detail

/// @brief Visits the table entries of `settings`, in the order of the struct.
/// Ranges of the fields the learner reads through the settings of a run; `scales` is checked
/// term by term where the terms are known (`detail::apply_fixed_scales`).
template <class F>
void visit_run_settings(F&& f) {
  using S = settings;
  using detail::inf;
  using detail::index_max;
  f(number_setting<S, double>{"ratio", "ratio", "fraction of items to select (rho)", &S::ratio,
                              0.0, 1.0, true, false, {}, &detail::uses_ratio});
  f(number_setting<S, index_t>{"count", "count",
                               "select exactly this many items instead (0: use the ratio)",
                               &S::count, 0, index_max});
  f(number_setting<S, double>{"lambda", "lambda",
                              "weight of quality against diversity (1: top by quality, 0: "
                              "diversity only)",
                              &S::lambda, 0.0, 1.0});
  f(number_setting<S, index_t>{"rollouts", "rollouts", "masks sampled per step (G)",
                               &S::rollouts, 2, (index_t{1} << 31) - 1, false, false, "G"});
  f(number_setting<S, index_t>{"steps", "steps",
                               "policy-gradient steps per block (E); 0: calibrate and read out "
                               "the initial logits",
                               &S::steps, 0, (index_t{1} << 32) - 2, false, false, "E"});
  f(number_setting<S, double>{"active-fraction", "active_fraction",
                              "share of a block that is active at each step (beta)",
                              &S::active_fraction, 0.0, 1.0, true, false});
  f(number_setting<S, index_t>{"min-active", "min_active",
                               "floor of the active batch size m (clipped to the kept items)",
                               &S::min_active, 1, index_max});
  f(number_setting<S, index_t>{"reference-size", "reference_size",
                               "facility location's reference set while learning: 0 the step's active "
                               "batch (the paper's), else this many kept items drawn anew each step",
                               &S::reference_size, 0, index_max});
  f(choice_setting<S, init_mode>{"init", "init", "initial logits", &S::init});
  f(number_setting<S, double>{"prune", "prune",
                              "drop items below this quantile of quality (0: keep all)",
                              &S::prune, 0.0, 1.0, false, true});
  f(number_setting<S, double, std::optional<double>>{
      "prune-threshold", "prune_threshold",
      "a quality threshold computed elsewhere (global over blocks); overrides prune",
      &S::prune_threshold, -inf, inf});
  f(choice_setting<S, advantage_mode>{"advantage", "advantage", "how rewards become advantages",
                                      &S::advantage});
  f(choice_setting<S, credit_mode>{"credit", "credit",
                                   "who gets a rollout's credit: every item its advantage (rollout, the "
                                   "paper's), each item its own marginal gain (item), or auto: item when "
                                   "every diversity term is pairwise or dense facility location (their "
                                   "marginals cost one evaluation) and logprob is relaxed, else rollout",
                                   &S::credit});
  f(choice_setting<S, term_scaling>{"scaling", "scaling",
                                    "how the terms of f are put on one scale", &S::scaling});
  f(number_setting<S, double, std::vector<double>>{
      "scales", "scales",
      "divisor per term of f (quality when lambda > 0, then each diversity objective with a "
      "positive weight when lambda < 1); needs scaling fixed",
      &S::scales, 0.0, inf, true, true, {}, [](const S&) { return false; }});
  f(number_setting<S, index_t>{"calibration-subsets", "calibration_subsets",
                               "uniform subsets whose std calibrates each term's scale",
                               &S::calibration_subsets, 2, (index_t{1} << 31) - 1});
  f(choice_setting<S, quality_aggregate>{"quality-aggregate", "quality",
                                         "the quality term: mean or sum over the subset",
                                         &S::quality});
  f(choice_setting<S, readout_mode>{"readout", "readout",
                                    "how the selection is read from the final logits",
                                    &S::readout});
  f(number_setting<S, std::uint64_t>{"seed", "seed", "random seed; same seed, same selection",
                                     &S::seed, 0, std::numeric_limits<std::uint64_t>::max()});
  f(number_setting<S, std::uint64_t>{"block", "block", "block number, part of the random key",
                                     &S::block, 0, std::numeric_limits<std::uint64_t>::max()});
  f(number_setting<S, int>{"threads", "threads",
                           "CPU threads (0: all available; more are capped to the CPUs this process may run on); "
                           "does not change the selection",
                           &S::threads, 0, std::numeric_limits<int>::max()});
  f(flag_setting<S>{"normalized", "normalized", "the embeddings are already unit-normalised",
                    &S::normalized});
  f(flag_setting<S>{"evaluate-selection", "evaluate_selection",
                    "evaluate each term on the selection (whole block as reference)",
                    &S::evaluate_selection});
  f(flag_setting<S>{"keep-best-rollout", "keep_best_rollout",
                    "return the best complete rollout when it beats the read-out",
                    &S::keep_best_rollout});
  f(number_setting<S, index_t>{"snapshot-every", "snapshot_every",
                               "steps between snapshots (0: never)", &S::snapshot_every, 0,
                               index_max});
  f(number_setting<S, double>{"epsilon", "epsilon",
                              "stochastic greedy: ceil((n / S) ln(1 / epsilon)) candidates per round",
                              &S::epsilon, 0.0, 1.0, true, true});
}

/// @brief Visits the table entries of `learner_settings`.
template <class F>
void visit_learner_settings(F&& f) {
  using L = learner_settings;
  using detail::inf;
  f(number_setting<L, double>{"lr-max", "lr_max", "first learning rate", &L::lr_max, 0.0, inf,
                              true, true});
  f(number_setting<L, double>{"lr-min", "lr_min",
                              "last learning rate (not above lr-max; unused by constant)",
                              &L::lr_min, 0.0, inf, false, true});
  f(choice_setting<L, schedule_kind>{"schedule", "schedule",
                                     "learning-rate schedule (constant uses lr-max)",
                                     &L::schedule});
  f(choice_setting<L, gradient_mode>{"logprob", "logprob", "gradient of the log-probability",
                                     &L::logprob});
  f(choice_setting<L, similarity_kernel>{"kernel", "kernel", "facility-location similarity",
                                         &L::kernel});
  f(number_setting<L, double>{"gamma", "gamma", "rbf bandwidth (checked with kernel rbf)",
                              &L::gamma, 0.0, inf, true, true, {}, &detail::uses_gamma});
  f(number_setting<L, double>{"facility-cache", "facility_cache",
                              "MiB: the greedy baselines keep dense facility location's n x n similarities "
                              "when they fit this budget (same selection, faster re-scoring); 0: never",
                              &L::facility_cache, 0.0, 1e9});
  f(choice_setting<L, knn_build>{"knn-build", "knn_build",
                                 "how each block's kNN graph is built (with neighbors): exact, clustered "
                                 "(approximate: C clusters, each compared with its P most similar), or auto "
                                 "(exact up to 50000 items, clustered above)",
                                 &L::knn_builder});
  f(number_setting<L, index_t>{"knn-clusters", "knn_clusters",
                               "clustered kNN graph: clusters C, capped at the block's size (0: about sqrt(n))",
                               &L::knn_clusters, 0, detail::index_max});
  f(number_setting<L, index_t>{"knn-probes", "knn_probes",
                               "clustered kNN graph: clusters each cluster is compared with, itself included "
                               "(0: 16, at most C)",
                               &L::knn_probes, 0, detail::index_max});
}

/// @brief Visits the table entries of the continuous learner (`continuous_settings`, then
/// `polish_settings`): a group of its own, as the policy-gradient learner's settings are, so a
/// program offers them with `--optimizer continuous` only.
template <class F>
void visit_continuous_settings(F&& f) {
  using C = continuous_settings;
  using P = polish_settings;
  using detail::inf;
  using detail::index_max;
  f(number_setting<C, index_t>{"iterations", "iterations",
                               "continuous ascent iterations per block (0: read out the uniform "
                               "start, i.e. polish only)",
                               &C::iterations, 0, (index_t{1} << 32) - 2});
  f(choice_setting<C, continuous_parameterization>{"parameterization", "parameterization",
                                                   "the continuous iterate: p (projected) or logits",
                                                   &C::parameterization});
  f(choice_setting<C, step_rule>{"step-rule", "rule", "how a gradient becomes a step", &C::rule});
  f(number_setting<C, double>{"step-size", "lr", "first step size of the continuous ascent",
                              &C::lr, 0.0, inf, true, true});
  f(choice_setting<C, step_decay>{"step-decay", "decay", "how the step size falls over the iterations",
                                  &C::decay});
  f(number_setting<C, double>{"step-final-fraction", "final_fraction",
                              "last step size as a fraction of step-size (linear, cosine)",
                              &C::final_fraction, 0.0, inf, false, true});
  f(number_setting<C, double>{"adam-beta1", "beta1", "Adam's first-moment decay (step-rule adam)",
                              &C::beta1, 0.0, 1.0, false, true});
  f(number_setting<C, double>{"adam-beta2", "beta2", "Adam's second-moment decay (step-rule adam)",
                              &C::beta2, 0.0, 1.0, false, true});
  f(number_setting<C, double>{"adam-epsilon", "epsilon", "Adam's denominator floor (step-rule adam)",
                              &C::epsilon, 0.0, inf, true, true});
  f(number_setting<C, index_t>{"track-every", "track_every",
                               "evaluate f on the read-out every this many iterations and keep the "
                               "best (0: never)",
                               &C::track_every, 0, index_max});
  f(flag_setting<P>{"polish", "polish", "1-swap polish of the read-out with exact gains", &P::enabled});
  f(number_setting<P, index_t>{"polish-rounds", "polish_rounds", "most polish rounds", &P::rounds, 0,
                               index_max});
  f(number_setting<P, index_t>{"polish-candidates", "polish_candidates",
                               "items considered on each side per polish round", &P::candidates, 1,
                               index_max});
  f(number_setting<P, index_t>{"polish-pair-candidates", "polish_pair_candidates",
                               "items on each side for a double swap (0 or 1: none)",
                               &P::pair_candidates, 0, index_max});
  f(number_setting<P, index_t>{"polish-refresh-every", "polish_refresh_every",
                               "polish rounds between refreshes of the ranking gradient",
                               &P::refresh_every, 1, index_max});
  f(number_setting<P, double>{"polish-seconds", "polish_seconds",
                              "polish time budget in seconds (0: none; a budget makes the "
                              "selection depend on the machine's speed)",
                              &P::seconds, 0.0, inf, false, true});
}

/// @brief The settings table: calls `f(entry)` for every setting, those of `settings` first,
/// then those of `learner_settings`. An entry is a `number_setting`, `choice_setting` or
/// `flag_setting` (tell them apart by the static `kind`); each has `name` (command-line spelling),
/// `field` (C++ member), `help`, `member`, `default_value()`, `default_text()`, `range_text()`
/// and `check(owner)`.
template <class F>
void visit_settings(F&& f) {
  visit_run_settings(f);
  visit_learner_settings(f);
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
/// threads than CPUs only wait on each other (1000 threads on 2 CPUs ran 30 times slower), and
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

/// @brief Checks the policy, schedule and kernel settings: ranges, then lr_min <= lr_max
/// (unless the schedule is constant, which uses lr_max only).
/// @throws invalid_input naming the setting.
inline void validate(const learner_settings& s) {
  visit_learner_settings([&](const auto& entry) { entry.check(s); });
  DATAMASK_EXPECTS(s.schedule == schedule_kind::constant || s.lr_min <= s.lr_max, "lr_min",
                   "must not exceed lr_max (", s.lr_max, "), found ", s.lr_min);
}

/// @brief Checks the continuous ascent's settings against their ranges.
/// @throws invalid_input naming the setting.
inline void validate(const continuous_settings& s) {
  visit_continuous_settings([&](const auto& entry) {
    if constexpr (std::is_same_v<typename std::remove_cvref_t<decltype(entry)>::owner_type,
                                 continuous_settings>) {
      entry.check(s);
    }
  });
}

/// @brief Checks the polish settings against their ranges.
/// @throws invalid_input naming the setting.
inline void validate(const polish_settings& s) {
  visit_continuous_settings([&](const auto& entry) {
    if constexpr (std::is_same_v<typename std::remove_cvref_t<decltype(entry)>::owner_type,
                                 polish_settings>) {
      entry.check(s);
    }
  });
}

}  // namespace datamask
