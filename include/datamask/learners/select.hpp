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

/// What `select` hands every optimizer from `options`: its settings and its progress hooks.
/// Snapshots and resume state have each learner's own form, so only the policy gradient takes
/// them here; a changed policy-gradient setting with another optimizer is refused, as the
/// program refuses an option the run does not read.
inline void check_select_options(const options& o, block_optimizer which) {
  if (which == block_optimizer::pg) return;
  const std::string ran(enum_name(which));
  const std::string_view pg_only = changed_pg_setting(o);
  DATAMASK_EXPECTS(pg_only.empty(), std::string(pg_only), "is a setting of the policy-gradient learner, but select() runs ", ran,
                   " here; pass datamask::block_optimizer::pg to run it");
  DATAMASK_EXPECTS(!o.on_snapshot, "on_snapshot",
                   "select() takes snapshots of the policy-gradient learner only, and it runs ", ran,
                   " here; pass datamask::block_optimizer::pg, or use continuous_learner's on_snapshot");
  DATAMASK_EXPECTS(o.scaling != term_scaling::group, "scaling",
                   "group makes f a different function at every step, which only the policy-gradient learner "
                   "takes, and select() runs ", ran, " here; pass datamask::block_optimizer::pg");
  const auto resumed = [&](bool given, const char* input) {
    DATAMASK_EXPECTS(!given, input, "continues a policy-gradient run, and select() runs ", ran,
                     " here; pass datamask::block_optimizer::pg");
  };
  resumed(o.first_step != 1, "first_step");
  resumed(!o.initial_logits.empty(), "initial_logits");
  resumed(!o.initial_best.rows.empty(), "initial_best");
}

}  // namespace detail

/// @brief Selects S items of one block on the default backend:
/// `datamask::select(problem, datamask::pairwise_similarity{}, opts)`.
///
/// `auto` (the default) runs what the program runs for the same f (learners/auto.hpp): lazy
/// greedy when every diversity term that counts is submodular (facility location), else the
/// continuous learner when every one relaxes (with its default ascent and polish; naive greedy
/// on a block where it costs less), else stochastic greedy, or the policy gradient where a term
/// is a black box (no relaxation, no greedy state: a greedy would evaluate f per candidate) or
/// the scaling is `group`. Name an optimizer to choose another. A greedy returns its ids in the
/// order picked, with no logits.
///
/// `opt`'s hooks report every optimizer's progress: `on_step` after each policy-gradient step,
/// continuous iteration (reward_mean = reward_max = the relaxed f before the step) or greedy pick
/// (step = the picks so far, total = S, rewards NaN), and `stop` is asked as often. Its
/// policy-gradient settings (`pg_settings`), snapshots and resume state are the policy-gradient
/// learner's: set with another optimizer, they are refused. For the continuous learner's own
/// settings, snapshots and resume, call `continuous_learner`; for the greedy's, `greedy_learner`.
/// @param which the optimizer (`block_optimizer::automatic`: `auto`)
/// @return the selection as the optimizer fills it (`basic_learner::select`,
///         `basic_continuous_learner::select`, `basic_greedy_learner::select`)
/// @throws invalid_input for bad input or settings, naming them
template <class T, class Diversity>
[[nodiscard]] selection_result select(const problem<T>& p, const Diversity& diversity, const options& opt = {},
                                      block_optimizer which = block_optimizer::automatic) {
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
  detail::check_select_options(opt, which);
  if (which == block_optimizer::pg) return learner<>(opt).select(p, m);
  if (which == block_optimizer::continuous) {
    continuous_options co;
    co.common = opt;
    const auto as_step = [](const continuous_step_info& si) {
      return step_info{si.iteration, si.total, si.lr, si.relaxed, si.relaxed, {}};
    };
    if (opt.on_step) co.on_step = [&](const continuous_step_info& si) { opt.on_step(as_step(si)); };
    if (opt.stop) co.stop = [&](const continuous_step_info& si) { return opt.stop(as_step(si)); };
    return continuous_learner(std::move(co)).select(p, m);
  }
  greedy_options g;
  g.method = greedy_method_of(which);
  index_t picks = 0;
  const auto as_step = [&] {
    const double none = std::numeric_limits<double>::quiet_NaN();
    return step_info{picks, s, 0.0, none, none, {}};
  };
  if (opt.on_step || opt.stop) {
    g.on_pick = [&](index_t picked) {
      picks = picked;
      if (opt.on_step) opt.on_step(as_step());
    };
  }
  if (opt.stop) g.stop = [&] { return opt.stop(as_step()); };
  return greedy_learner(opt, std::move(g)).select(p, m);
}

}  // namespace datamask
