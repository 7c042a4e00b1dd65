// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The continuous learner's settings (the ascent's and the polish's), their entries of the
/// settings table and their validation.

#include <array>
#include <type_traits>

#include "datamask/core/enum_names.hpp"
#include "datamask/core/setting_entries.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

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
/// Defaults chosen by benchmarks/continuous_tune.cpp against Adam and other step sizes, on
/// pairwise similarity and DiSF (RESULTS.md, "Continuous learner: time-quality fronts"). Why
/// these: the normalised step moves the most promising coordinate by lr whatever the scale of f,
/// and the projection lets p reach exact 0 and 1, so the read-out rounds almost nothing; on
/// logits the sigmoid saturates and items far from the boundary stop moving.
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
/// A round ranks the items (refreshed every `refresh_every` rounds) by the exact change of f when
/// each selected item leaves or each other joins where every term's swap state gives it (DiSF:
/// `ranked_swap_state`), else by the gradient of the relaxation at the (integral) selection;
/// takes the `candidates` unselected items ranked highest and the `candidates` selected items
/// ranked lowest, scores every pair by its exact gain (incremental for quality, pairwise
/// similarity and DiSF; by evaluation for other objectives), and applies the improving swaps best
/// first, each on items no earlier swap of the scan moved and after its gain is checked again;
/// it scans again until no pair improves f. Rounds stop when one makes no swap. Three starts are
/// polished (the read-out, the best tracked read-out, and, with `stochastic_start`, stochastic
/// greedy's set) and the best kept.
///
/// Why 30 rounds of 32 candidates (10 of 16 before): on real data the read-out can be far from a
/// good set (the relaxation's maximisers form a large face when S exceeds the data's intrinsic
/// dimension, and the S largest p of a point on it are no better than random), and polish does
/// the work: the larger limits lifted the worst real-data cells to naive greedy's gain
/// (benchmarks/RESULTS.md, "Real data", "After: auto runs lazy greedy on facility location alone;
/// polish 30 rounds of 32 candidates"). Polish stops at a round without a swap, so a read-out that
/// is already good pays little for them.
struct polish_settings {
  bool enabled = true;
  index_t rounds = 30;      ///< at most this many rounds (each at most one refresh of the ranking)
  index_t candidates = 32;  ///< items considered on each side per round
  /// Items on each side for a double swap when no single swap improves (0 or 1: none); the
  /// search costs pair_candidates^4 / 2 exact gains.
  index_t pair_candidates = 6;
  /// Rounds between two refreshes of the ranking of the candidates (exact one-sided changes or
  /// the relaxation's gradient; 1: every round). Why: a refresh costs about one ascent iteration
  /// (O(n d^2) on DiSF), and refreshing every round made polish cost as much as dozens of
  /// iterations; between refreshes a round ranks the current selection and the rest by the last
  /// ranking (the swapped items have moved sides, so new candidates come in). A round without any
  /// swap on a stale ranking refreshes it and retries before polish stops, so polish still stops
  /// only where the fresh ranking offers no improving swap (or at `rounds`).
  index_t refresh_every = 4;
  /// Wall-clock budget in seconds (0: none). A budget makes the result depend on the machine's
  /// speed; the round limit alone keeps it deterministic.
  double seconds = 0.0;
  /// Also polish stochastic greedy's selection on the same f (its `epsilon`, seeded by the run's
  /// seed and block) and keep the better set; only where the polish is on, and not after a stop. Why: where the relaxation's maximiser is far from
  /// a good set (DiSF with a binary quality column), no swap path from its read-out reaches what a
  /// greedy start does; stochastic greedy costs about (n / S) ln(1 / epsilon) gains a pick, a few
  /// ascent iterations' work (benchmarks/RESULTS.md, "DiSF: two starts and an exact ranking").
  bool stochastic_start = true;
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
                               "continuous ascent iterations per block (0: polish only)",
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
                               "polish rounds between refreshes of the candidates' ranking",
                               &P::refresh_every, 1, index_max});
  f(number_setting<P, double>{"polish-seconds", "polish_seconds",
                              "polish time budget in seconds (0: none; a budget makes the "
                              "selection depend on the machine's speed)",
                              &P::seconds, 0.0, inf, false, true});
  f(flag_setting<P>{"polish-stochastic-start", "polish_stochastic_start",
                    "also polish stochastic greedy's selection on the same f and keep the better",
                    &P::stochastic_start});
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
