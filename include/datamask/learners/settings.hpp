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
///   datamask::settings o;             // the library's defaults
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

#include <string>
#include <type_traits>

#include "datamask/objectives/certify.hpp"
#include "datamask/learners/continuous/settings.hpp"
#include "datamask/core/enum_names.hpp"
#include "datamask/core/error.hpp"
#include "datamask/core/kernels.hpp"
#include "datamask/objectives/knn/exact.hpp"
#include "datamask/objectives/facility.hpp"
#include "datamask/core/options.hpp"
#include "datamask/learners/pg/softmax.hpp"
#include "datamask/learners/schedule.hpp"
#include "datamask/core/setting_entries.hpp"

namespace datamask {

/// @brief The policy-gradient learner's step: its learning-rate schedule and its policy's
/// gradient (the defaults of `runtime_lr` and `softmax_policy`). Only that learner reads them, so
/// a front end refuses them with another optimizer; their table entries are declared with this
/// struct as their owner.
struct pg_step_settings {
  double lr_max = runtime_lr{}.max_lr;            ///< first learning rate
  double lr_min = runtime_lr{}.min_lr;            ///< last learning rate
  schedule_kind schedule = runtime_lr{}.kind;     ///< linear, cosine or constant
  gradient_mode logprob = softmax_policy{}.mode;  ///< gradient of ln P(mask)

  [[nodiscard]] runtime_lr schedule_object() const { return runtime_lr{schedule, lr_max, lr_min}; }
  [[nodiscard]] softmax_policy policy_object() const { return softmax_policy{logprob}; }
};

/// @brief Facility location's settings that a program exposes: its kernel, the rbf bandwidth and
/// the greedy baselines' similarity cache (the defaults are `facility_location`'s, read from it).
/// Read wherever f has a facility location term, by every optimizer.
struct facility_settings {
  similarity_kernel kernel = facility_location{}.kernel;  ///< facility location's kernel
  double gamma = facility_location{}.gamma;               ///< rbf bandwidth
  /// Dense facility location's greedy similarity cache, in MiB (`facility_location::cache_bytes`).
  double facility_cache = static_cast<double>(facility_location{}.cache_bytes) / double(1 << 20);

  /// Facility location with this kernel, gamma and cache budget.
  [[nodiscard]] facility_location facility_object() const {
    facility_location f;
    f.kernel = kernel;
    f.gamma = gamma;
    f.cache_bytes = static_cast<std::size_t>(facility_cache * double(1 << 20));
    return f;
  }
};

/// @brief How a block's kNN graph is built (facility location on a kNN graph), and the clustered
/// builder's C and P (0: its defaults); objectives/knn/graph.hpp and knn/clustered.hpp.
struct knn_build_settings {
  knn_build knn_builder = knn_build::automatic;
  index_t knn_clusters = 0;
  index_t knn_probes = 0;
};

/// @brief The certificate's budget (`certify_settings::iterations`, 0: each method's default) and
/// dense facility location's memory for the pairs its dual reads, in MiB
/// (`certify_settings::memory_bytes`). Read when a run certifies.
struct certify_budget {
  index_t certify_steps = certify_settings{}.iterations;
  double certify_memory = static_cast<double>(certify_settings{}.memory_bytes) / double(1 << 20);

  /// The certificate's settings with this budget (random subsets, seed and threads: defaults).
  [[nodiscard]] certify_settings certify_object() const {
    certify_settings c;
    c.iterations = certify_steps;
    c.memory_bytes = static_cast<std::size_t>(certify_memory * double(1 << 20));
    return c;
  }
};

/// @brief The settings a program exposes beside `settings`, each group owned by what reads it:
/// the policy gradient's step (`pg_step_settings`), facility location (`facility_settings`), the
/// kNN graph's builder (`knn_build_settings`) and the certificate's budget (`certify_budget`).
/// The learners, `certify` and the graph builders take the objects themselves; these build them.
struct learner_settings : pg_step_settings, facility_settings, knn_build_settings, certify_budget {};

namespace detail {
inline bool uses_gamma(const facility_settings& s) { return s.kernel == similarity_kernel::rbf; }
}  // namespace detail

/// @brief Visits the table entries of `learner_settings`.
template <class F>
void visit_learner_settings(F&& f) {
  using P = pg_step_settings;
  using Fl = facility_settings;
  using Kn = knn_build_settings;
  using Ce = certify_budget;
  using detail::inf;
  f(number_setting<P, double>{"lr-max", "lr_max", "first learning rate", &P::lr_max, 0.0, inf,
                              true, true});
  f(number_setting<P, double>{"lr-min", "lr_min",
                              "last learning rate (not above lr-max; unused by constant)",
                              &P::lr_min, 0.0, inf, false, true});
  f(choice_setting<P, schedule_kind>{"schedule", "schedule",
                                     "learning-rate schedule (constant uses lr-max)",
                                     &P::schedule});
  f(choice_setting<P, gradient_mode>{"logprob", "logprob", "gradient of the log-probability",
                                     &P::logprob});
  f(choice_setting<Fl, similarity_kernel>{"kernel", "kernel", "facility-location similarity",
                                         &Fl::kernel});
  f(number_setting<Fl, double>{"gamma", "gamma", "rbf bandwidth (checked with kernel rbf)",
                              &Fl::gamma, 0.0, inf, true, true, {}, &detail::uses_gamma});
  f(number_setting<Fl, double>{"facility-cache", "facility_cache",
                              "MiB: greedy baselines keep dense facility location's n x n similarities within "
                              "it (same selection, faster); 0: never",
                              &Fl::facility_cache, 0.0, 1e9});
  f(choice_setting<Kn, knn_build>{"knn-build", "knn_build",
                                 "how each block's kNN graph is built: exact, clustered (C clusters, P probed), "
                                 "or auto (exact up to 50000 items, clustered above)",
                                 &Kn::knn_builder});
  f(number_setting<Kn, index_t>{"knn-clusters", "knn_clusters",
                               "clustered kNN graph: clusters C, capped at the block's size (0: about sqrt(n))",
                               &Kn::knn_clusters, 0, detail::index_max});
  f(number_setting<Kn, index_t>{"knn-probes", "knn_probes",
                               "clustered kNN graph: clusters each cluster is compared with, itself included "
                               "(0: 16, at most C)",
                               &Kn::knn_probes, 0, detail::index_max});
  f(number_setting<Ce, index_t>{"certify-steps", "certify_steps",
                               "with certify: each bound's steps (0: 30 for pairwise, 100 for facility location); "
                               "fewer cost less and bound less tightly, never wrongly",
                               &Ce::certify_steps, 0, detail::index_max});
  f(number_setting<Ce, double>{"certify-memory", "certify_memory",
                              "with certify: MiB for the pairs dense facility location's bound reads each step; "
                              "beyond it, recomputed every step (slower)",
                              &Ce::certify_memory, 0.0, 1e9});
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

/// @brief Checks the policy, schedule and kernel settings: ranges, then lr_min <= lr_max
/// (unless the schedule is constant, which uses lr_max only).
/// @throws invalid_input naming the setting.
inline void validate(const learner_settings& s) {
  visit_learner_settings([&](const auto& entry) { entry.check(s); });
  DATAMASK_EXPECTS(s.schedule == schedule_kind::constant || s.lr_min <= s.lr_max, "lr_min",
                   "must not exceed lr_max (", s.lr_max, "), found ", s.lr_min);
}

}  // namespace datamask
