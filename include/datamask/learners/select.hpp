// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief `datamask::select`: one block's selection by the optimizer `auto` picks for its f (the
/// program's rule, learners/auto.hpp) or by the one named, on the default backend.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "datamask/core/error.hpp"
#include "datamask/core/greedy_options.hpp"
#include "datamask/core/options.hpp"
#include "datamask/exec/backend/default.hpp"
#include "datamask/learners/auto.hpp"
#include "datamask/learners/continuous/learner.hpp"
#include "datamask/learners/greedy/learner.hpp"
#include "datamask/learners/pg/select.hpp"
#include "datamask/objectives/mix.hpp"

namespace datamask {

namespace detail {

/// What only the policy-gradient learner reads (its settings, group scaling) is refused with
/// another optimizer, as the program refuses an option the run does not read.
inline void check_select_settings(const settings& s, block_optimizer which) {
  if (which == block_optimizer::pg) return;
  const std::string ran(enum_name(which));
  const std::string_view pg_only = changed_pg_setting(s);
  DATAMASK_EXPECTS(pg_only.empty(), std::string(pg_only), "is a setting of the policy-gradient learner, but select() runs ", ran,
                   " here; pass datamask::block_optimizer::pg to run it");
  DATAMASK_EXPECTS(s.scaling != term_scaling::group, "scaling",
                   "group makes f a different function at every step, which only the policy-gradient learner "
                   "takes, and select() runs ", ran, " here; pass datamask::block_optimizer::pg");
}

}  // namespace detail

/// @brief Selects S items of one block on the default backend:
/// `datamask::select(problem, datamask::pairwise_similarity{}, settings)`.
///
/// `auto` (the default) runs what the program runs for the same f (learners/auto.hpp): lazy
/// greedy when every diversity term that counts is submodular (facility location), else the
/// continuous learner when every one relaxes (with its default ascent and polish; naive greedy
/// on a block where it costs less), else stochastic greedy, or the policy gradient where a term
/// is a black box (no relaxation, no greedy state: a greedy would evaluate f per candidate) or
/// the scaling is `group`. Name an optimizer to choose another. A greedy returns its ids in the
/// order picked, with no logits.
///
/// `h` goes to the optimizer that runs, as its `select` takes it (learners/protocol.hpp):
/// `on_step` after each policy-gradient step or continuous iteration and, from a greedy, after
/// each pick (step = the picks so far, rewards NaN); `on_pick` after each greedy pick; `stop` as
/// often; snapshots of a learner's state (refused when a greedy runs). The policy-gradient settings
/// (`pg_settings`) are that learner's: changed with another optimizer, they are refused. For the
/// continuous learner's own settings or to resume a snapshot, call the optimizer itself
/// (`continuous_learner`, `learner<>`, `greedy_learner`).
/// @param which the optimizer (`block_optimizer::automatic`: `auto`)
/// @return the selection as the optimizer fills it (`basic_learner::select`,
///         `basic_continuous_learner::select`, `basic_greedy_learner::select`)
/// @throws invalid_input for bad input or settings, naming them
template <class T, class Diversity>
[[nodiscard]] selection_result select(const problem<T>& p, const Diversity& diversity, const settings& opt = {},
                                      block_optimizer which = block_optimizer::automatic,
                                      const optimizer_hooks& h = {}) {
  static_assert(detail::mix_models<Diversity, T>::value,
                "datamask::select: the diversity argument does not model datamask::diversity_objective<D, T>");
  const auto m = detail::as_mix(diversity);
  const index_t n = p.embeddings.rows;
  // S as a shape for the cost model only (the optimizer validates the settings and computes it).
  const index_t s = opt.count > 0               ? opt.count
                    : std::isfinite(opt.ratio) ? static_cast<index_t>(std::llround(std::clamp(opt.ratio, 0.0, 1.0) *
                                                                                     static_cast<double>(n)))
                                               : 0;
  if (which == block_optimizer::automatic && opt.scaling == term_scaling::group) {
    which = block_optimizer::pg;  // the one optimizer whose f may change from step to step
  } else if (which == block_optimizer::automatic) {
    which = auto_block_optimizer(counting_terms<T>(m, opt.lambda, p.embeddings.cols), block_shape{n, p.embeddings.cols, s},
                                 continuous_settings{}.iterations);
  }
  detail::check_select_settings(opt, which);
  if (which == block_optimizer::pg) return learner<>(opt).select(p, m, h);
  if (which == block_optimizer::continuous) return continuous_learner(continuous_options{opt, {}, {}}).select(p, m, h);
  // A greedy: a progress hook hears each pick as a step (step = the picks so far, rewards NaN),
  // so that a caller's progress under `auto` does not depend on which optimizer it picked; a
  // snapshot hook is refused, as a greedy keeps no state to snapshot.
  DATAMASK_EXPECTS(!h.on_snapshot, "on_snapshot", "a greedy keeps no state to snapshot, and select() runs ",
                   enum_name(which), " here; pass datamask::block_optimizer::pg or continuous");
  optimizer_hooks greedy_hooks = h;
  if (h.on_step) {
    greedy_hooks.on_pick = [&h](index_t picked) {
      if (h.on_pick) h.on_pick(picked);
      const double none = std::numeric_limits<double>::quiet_NaN();
      h.on_step(step_record{picked, 0.0, none, none, {}});
    };
  }
  greedy_options g;
  g.method = greedy_method_of(which);
  return greedy_learner(opt, std::move(g)).select(p, m, greedy_hooks);
}

/// @brief `select` by `auto`, with hooks.
template <class T, class Diversity>
[[nodiscard]] selection_result select(const problem<T>& p, const Diversity& diversity, const settings& opt,
                                      const optimizer_hooks& h) {
  return select(p, diversity, opt, block_optimizer::automatic, h);
}

}  // namespace datamask
