// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The diversity objectives a front end knows by name: the built-in ones, registered by
/// the registry itself, and a C++ user's own, registered by type. A run's `--objective` names
/// (Python: `objective=`) are looked up here and nowhere else.
///
/// A user's objective runs as a `datamask::external_objective`, a term of the standard mix's list
/// (a run names as many as it likes, each a term of f of its own), with the views the library gives its own objectives (norms, reference set, threads), so every
/// option, output, checkpoint and MPI or shard behaviour of the program holds for it.
/// What it can do is read from its concepts when it is registered: a `relax` member
/// (`relaxable_objective`) becomes its relaxation, so `auto` runs the continuous learner on it and
/// `--optimizer continuous` is accepted; without one, auto runs stochastic greedy and continuous
/// is refused naming it. `evaluate_batch` (`batched_diversity_objective`) scores a batch in one
/// call; without it the subsets of a batch are scored on the run's threads. `greedy_state`
/// (`incremental_objective`) gives the greedy baselines its gains (lazy greedy keeps stale ones
/// when the state declares `diminishing_gains`); without it they score S + i by evaluation.
/// Not carried: marginals (pg's per-item credit; its auto credit gives such a term the rollout's
/// reward), swap states (the continuous learner's polish evaluates swapped sets) and device
/// passes (it runs on the host; on a GPU build its relaxation's arrays are copied across, for each
/// such objective of a run at every call).

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <datamask/run/block_select.hpp>
#include <datamask/core/detail/parallel.hpp>

namespace dmfront {

using datamask::index_t;

namespace detail {

/// Objective `o` held as functions (see the file comment), given the library's views as they are.
template <class Objective>
datamask::external_objective held_as_functions(Objective o, std::string name) {
  const auto obj = std::make_shared<const Objective>(std::move(o));
  datamask::external_objective e;
  e.label = std::move(name);
  e.score = [obj](const datamask::batch_view<float>& b, std::span<double> out) {
    if constexpr (datamask::batched_diversity_objective<Objective, float>) {
      obj->evaluate_batch(b, out);
    } else {  // one subset per call, the subsets on the run's threads (the calls are thread-safe)
      datamask::detail::parallel_for(b.subsets.rows, b.subsets.rows > 1 ? b.threads : 1, [&](index_t g) {
        auto one = b[g];
        if (b.subsets.rows > 1) one.threads = 1;
        out[static_cast<std::size_t>(g)] = static_cast<double>((*obj)(one));
      });
    }
  };
  if constexpr (datamask::relaxable_objective<Objective, float>) {
    e.relaxation = [obj](const datamask::relax_view<float>& v, std::span<double> grad) {
      datamask::host_executor exec(v.threads);
      return static_cast<double>(obj->relax(exec, v, grad.data()));
    };
  }
  if constexpr (datamask::incremental_objective<Objective, float>) {
    e.greedy = [obj](const datamask::greedy_block<float>& b) {
      using state = datamask::greedy_state_t<Objective, float>;
      // Shared by the functions; `obj` too, whose members the state may view.
      const auto st = std::make_shared<state>(obj->greedy_state(b));
      datamask::held_greedy_state h{
          [st, obj](std::span<const index_t> c, std::span<double> out, double w) { st->accumulate(c, out, w); },
          [st] { return static_cast<double>(st->common()); }, [st](index_t j) { st->add(j); },
          datamask::has_diminishing_gains<state>, 1};
      if constexpr (requires { st->lazy_batch(); }) h.batch = static_cast<index_t>(st->lazy_batch());
      return h;
    };
  }
  return e;
}

}  // namespace detail

/// @brief One objective a run can name: a built-in term of the standard mix (`builtin`, its
/// weight) or a user's (`user`).
struct objective_entry {
  std::string name;
  std::string summary;  ///< one line for a front end's help
  double datamask::objective_weights::*builtin = nullptr;
  std::shared_ptr<const datamask::external_objective> user;
};

/// @brief One entry of a run's objective list: a registered objective's name, or an objective
/// given with the call (a Python metric: `given`, a term of f under its label).
struct objective_spec {
  std::string name;
  std::shared_ptr<const datamask::external_objective> given;  ///< non-null: this, not `name`
};

/// @brief The objectives a run can name; it starts with the built-in ones (pairwise, facility,
/// disf).
class objective_registry {
 public:
  objective_registry();

  /// @brief Registers `objective` under `name` (a lower-case letter, then letters, digits, '-'
  /// and '_'; not a term's name already: a registered one's, "quality" or "facility_knn"), its
  /// capabilities read from its concepts (file comment).
  /// @throws datamask::invalid_input ("objective") for a bad or taken name.
  template <class Objective>
    requires datamask::diversity_objective<Objective, float>
  objective_registry& add(std::string name, Objective objective, std::string summary = "") {
    auto held = detail::held_as_functions(std::move(objective), name);
    return add(std::move(name), std::move(held), std::move(summary));
  }

  /// @brief Registers an objective already held as functions (`name` becomes its label); the
  /// name's rules as above.
  objective_registry& add(std::string name, datamask::external_objective objective, std::string summary = "");

  [[nodiscard]] const std::vector<objective_entry>& entries() const { return entries_; }
  [[nodiscard]] std::vector<std::string> names() const;

  /// @brief The objectives named in a run, each at most once, weighed by `weights` (empty: each
  /// 1; else one weight >= 0 per name), into `s.weights` and `s.external` (the user's, in the
  /// order named).
  /// @throws datamask::invalid_input ("objective", "objective_weights") otherwise.
  void apply(std::span<const std::string> names, std::span<const double> weights,
             datamask::block_run_settings& s) const;
  /// @brief The same for a list that may hold objectives given with the call (Python's
  /// `objective=`): the one parse of every front end's objective list.
  void apply(std::span<const objective_spec> entries, std::span<const double> weights,
             datamask::block_run_settings& s) const;

 private:
  void check_new(std::string_view name) const;
  std::vector<objective_entry> entries_;
};

}  // namespace dmfront
