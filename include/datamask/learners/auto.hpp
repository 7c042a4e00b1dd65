// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The optimizers of a block and `auto`, the rule that picks one from what the diversity
/// terms of f that count can do (relax; keep their greedy gains from growing) and what they
/// cost. One rule for `datamask::select`, the program and the Python package.

#include <array>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "datamask/core/concepts.hpp"
#include "datamask/core/enum_names.hpp"
#include "datamask/core/greedy_options.hpp"
#include "datamask/core/types.hpp"
#include "datamask/objectives/external.hpp"
#include "datamask/objectives/mix.hpp"

namespace datamask {

/// @brief The optimizer of a block.
enum class block_optimizer {
  automatic,   ///< `auto_optimizer`, then on a block `auto_block_optimizer`
  continuous,  ///< the continuous learner (learners/continuous/learner.hpp)
  pg,          ///< the policy-gradient learner (learners/pg/learner.hpp)
  greedy,      ///< naive greedy on the same f (learners/greedy/learner.hpp)
  lazy,        ///< lazy greedy
  stochastic   ///< stochastic greedy
};

template <>
struct enum_traits<block_optimizer> {
  static constexpr std::array<enum_choice<block_optimizer>, 6> choices{
      {{"auto", block_optimizer::automatic},
       {"continuous", block_optimizer::continuous},
       {"pg", block_optimizer::pg},
       {"greedy", block_optimizer::greedy},
       {"lazy", block_optimizer::lazy},
       {"stochastic", block_optimizer::stochastic}}};
};

/// @brief The greedy method a greedy optimizer runs (`naive` for `greedy`); `which` is one of
/// greedy, lazy or stochastic.
[[nodiscard]] constexpr greedy_method greedy_method_of(block_optimizer which) {
  return which == block_optimizer::greedy ? greedy_method::naive
         : which == block_optimizer::lazy ? greedy_method::lazy
                                          : greedy_method::stochastic;
}

/// @brief What `auto` weighs of one diversity term of f that counts (lambda < 1, weight > 0).
struct term_traits {
  bool relaxable = false;           ///< the continuous learner can ascend it (`relaxable_objective`)
  bool submodular = false;          ///< its greedy gains never grow (`diminishing_gains`)
  std::optional<item_costs> costs;  ///< its cost model (`costed_objective`), when it states one
  /// It gives the greedies its gains (`incremental_objective`); without, a greedy evaluates f on
  /// S + i for every candidate, a black box's cost that only the policy gradient avoids.
  bool greedy_gains = true;
};

/// @brief The traits of objective `d` on blocks of `dims` columns; `neighbors`: the K of its kNN
/// graph, where it has one. An objective that says at run time whether it relaxes
/// (`has_relaxation()`, as one given to the program) is taken at its word.
template <class T, class D>
[[nodiscard]] term_traits traits_of(const D& d, index_t dims, index_t neighbors = 0) {
  term_traits t;
  t.relaxable = relaxable_objective<D, T>;
  if constexpr (requires { d.has_relaxation(); }) t.relaxable = t.relaxable && d.has_relaxation();
  // An objective given at run time scores a greedy round's candidate sets in one call (its own
  // state, or by evaluation: greedy/scorers.hpp `external_state`), so a greedy stays cheap on it.
  t.greedy_gains = incremental_objective<D, T> || std::is_same_v<D, external_objective>;
  if constexpr (incremental_objective<D, T>) t.submodular = has_diminishing_gains<greedy_state_t<D, T>>;
  if constexpr (costed_objective<D>) t.costs = D::costs_per_item(dims, neighbors);
  return t;
}

/// @brief The traits of the terms of `m` that count under `lambda`, in order; a term on a kNN
/// graph that has none yet has K = `neighbors` (the graph it will be given).
template <class T, class... Ds>
[[nodiscard]] std::vector<term_traits> counting_terms(const diversity_mix<Ds...>& m, double lambda, index_t dims,
                                                      index_t neighbors = 0) {
  std::vector<term_traits> out;
  if (lambda >= 1.0) return out;
  m.for_each([&](auto /*i*/, const auto& o, double weight) {
    if (weight <= 0.0) return;
    index_t k = 0;
    if constexpr (requires { o.graph->k; }) k = o.graph ? o.graph->k : neighbors;
    out.push_back(traits_of<T>(o, dims, k));
  });
  return out;
}

/// @brief What `auto` runs for an f whose diversity terms that count are `counting`:
/// - lazy greedy when every one is submodular (facility location, dense or on a kNN graph): f is
///   then submodular (mean quality is modular at a fixed size), lazy greedy picks naive greedy's
///   set, and on real data the alternatives (the continuous learner on the kNN graph, stochastic
///   greedy on dense facility location) fell far short of it in their worst cells
///   (benchmarks/RESULTS.md, "Real data");
/// - else the continuous learner when every one relaxes (none counting included);
/// - else (dense facility location beside other terms, a user's term without a relaxation)
///   stochastic greedy: on dense facility location both the policy-gradient learner and
///   stochastic greedy cost O(n^2 d) per block, and stochastic greedy reached more of lazy
///   greedy's gain in an eighth of the time (benchmarks/RESULTS.md, "Dense facility location:
///   what auto runs");
/// - but the policy gradient where a term that counts is a black box (no relaxation and no
///   greedy gains): a greedy would evaluate f on S + i for n ln(1/epsilon) candidates, the
///   policy gradient evaluates it on its rollouts only (docs/method.md section 6, last item).
[[nodiscard]] inline block_optimizer auto_optimizer(std::span<const term_traits> counting) {
  bool submodular = !counting.empty();
  bool relaxable = true;
  bool black_box = false;
  for (const term_traits& t : counting) {
    submodular = submodular && t.submodular;
    relaxable = relaxable && t.relaxable;
    black_box = black_box || (!t.relaxable && !t.greedy_gains);
  }
  if (submodular) return block_optimizer::lazy;
  if (relaxable) return block_optimizer::continuous;
  return black_box ? block_optimizer::pg : block_optimizer::stochastic;
}

/// @brief A block as `auto` weighs it: n items of d dimensions, S of them to select.
struct block_shape {
  index_t items = 0;
  index_t dims = 0;
  index_t selected = 0;
};

/// @brief The continuous learner's cost in `auto_block_optimizer`'s model, in ascents: the
/// ascent, then the polish of its starts (the read-out, the best tracked read-out and stochastic
/// greedy's set), which on scikit-learn's digits and breast cancer took about as long again.
inline constexpr double learner_ascents = 2.0;

/// @brief What `auto` runs on one block: `auto_optimizer`, except that where that is the
/// continuous learner and naive greedy costs no more, naive greedy (the exact reference of the
/// benchmarks, so its full gain). Per item, the quality term costs 1 each way and every term that
/// counts its `item_costs`; naive greedy costs S picks x n candidates x the greedy costs, the
/// learner `learner_ascents` x `iterations` x n items x the relaxed costs, so greedy runs when
/// S x greedy <= 2 x iterations x relaxed: S <= 4 x iterations (400 by default) for pairwise
/// similarity, S <= 2 x iterations (200) for DiSF, in between for mixes. Why two ascents: a
/// model counting the ascent alone let the learner take longer than naive greedy on real data
/// (benchmarks/RESULTS.md, "auto by cost"). A term without a cost model leaves the choice as it
/// is. The bar of this choice is greedy's gain in no more than greedy's time; the continuous
/// learner, named, is the choice for more gain in more time.
/// @param iterations the continuous learner's ascent iterations (`continuous_settings`)
[[nodiscard]] inline block_optimizer auto_block_optimizer(std::span<const term_traits> counting, const block_shape& b,
                                                          index_t iterations) {
  const block_optimizer o = auto_optimizer(counting);
  if (o != block_optimizer::continuous) return o;
  item_costs c{1.0, 1.0};  // the quality term
  for (const term_traits& t : counting) {
    if (!t.costs) return o;
    c.greedy += t.costs->greedy;
    c.relaxed += t.costs->relaxed;
  }
  const double greedy = static_cast<double>(b.selected) * c.greedy;
  const double learner = learner_ascents * static_cast<double>(iterations) * c.relaxed;
  return greedy <= learner ? block_optimizer::greedy : o;
}

}  // namespace datamask
