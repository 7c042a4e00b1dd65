// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Greedy baselines: naive, lazy and stochastic greedy maximisation of the same f the
/// learner optimises (`objective_function`: same terms, scales and lambda).
///
/// Two entries, each a scorer (greedy/scorers.hpp) handed to the algorithm `greedy_options`
/// names (greedy/algorithms.hpp):
/// - `greedy_select` scores candidates with incremental gains: quality by a running sum, each
///   diversity objective through its own greedy state when it models `incremental_objective`
///   (pairwise similarity: the running sum of unit rows; facility location: a running maximum
///   per reference item, the whole block as reference set; DiSF: rank-one updates of the
///   centred scatter matrix; a user's state the same way), and by evaluation otherwise;
/// - `greedy_select_blackbox` only evaluates f: the gain of i is f(S + i) - f(S).
///
/// Every method returns the rows in the order picked and the gain of each pick; ties go to the
/// smaller item id; results are the same for a seed whatever the thread count.
///
/// Lazy greedy gives naive greedy's picks on every f: stale gains serve as upper bounds only for
/// terms whose candidate gains never grow (quality, facility location, states declaring
/// `diminishing_gains`); the other terms (pairwise similarity and DiSF, normalised by |S|, so
/// not submodular) are re-scored every round. It saves the most where the bounded terms are the
/// costly ones (facility location); on a black box it is naive greedy.
///
/// Stochastic greedy (Mirzasoleiman et al., "Lazier than lazy greedy", AAAI 2015) scores, in each
/// round, R = ceil((n / S) ln(1 / epsilon)) candidates drawn uniformly without replacement from
/// the items not yet picked, with Philox-4x32-10 keyed by the seed.

#include "datamask/learners/greedy/algorithms.hpp"
#include "datamask/core/greedy_options.hpp"
#include "datamask/learners/greedy/scorers.hpp"
#include "datamask/objectives/function.hpp"
#include "datamask/objectives/disf.hpp"
#include "datamask/objectives/facility.hpp"
#include "datamask/objectives/pairwise.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

/// @brief Whether lazy greedy gives exactly naive greedy's order on f: always, since lazy greedy
/// re-scores the terms that are not submodular in every round (greedy/algorithms.hpp). Kept for
/// callers that asked before that was so.
template <class T, class D>
[[nodiscard]] constexpr bool greedy_lazy_is_exact(const objective_function<T, D>& /*f*/) {
  return true;
}

/// @brief Greedy maximisation of f with incremental gains for the quality term and every
/// diversity objective modelling `incremental_objective` (the built-in ones: pairwise
/// similarity, facility location with the whole block as reference set, DiSF), and gains by
/// evaluation for other objectives.
/// @param f the objective (set its scales from `learner<>::calibrate` to optimise a run's f)
/// @param count S, the number of items to pick, in [1, n]
/// @param opt the method and its settings; `opt.stop` may end the run early (`result.stopped`)
/// @throws invalid_input for a bad count, epsilon or thread count.
template <class T, class D>
[[nodiscard]] greedy_result greedy_select(const objective_function<T, D>& f, index_t count,
                                          const greedy_options& opt = {}) {
  detail::greedy::structured_scorer<T, typename objective_function<T, D>::mix_type> scorer(
      f, opt.threads);
  return detail::greedy::run(scorer, f.size(), f.ids(), count, opt);
}

/// @brief Greedy maximisation of f treated as evaluation-only: the gain of i is f(S + i) - f(S),
/// each an evaluation of f on the whole set (the black-box case, and the cost model of the
/// reference DiSF greedy). Same methods, ties and determinism as `greedy_select`.
template <class T, class D>
[[nodiscard]] greedy_result greedy_select_blackbox(const objective_function<T, D>& f,
                                                   index_t count, const greedy_options& opt = {}) {
  detail::greedy::blackbox_scorer<objective_function<T, D>> scorer(f, opt.threads);
  return detail::greedy::run(scorer, f.size(), f.ids(), count, opt);
}

}  // namespace datamask
