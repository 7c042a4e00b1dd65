// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief A greedy baseline as an optimizer of a block, in the learners' shape: the phases every
/// optimizer shares (phases.hpp: validation, kept rows, S, calibrated or fixed scales, the final
/// evaluation into a `selection_result`) around `greedy_select` on the f the learners optimise.

#include <span>
#include <utility>
#include <vector>

#include "datamask/core/half.hpp"
#include "datamask/core/greedy_options.hpp"
#include "datamask/core/options.hpp"
#include "datamask/exec/backend/concept.hpp"
#include "datamask/exec/backend/default.hpp"
#include "datamask/learners/greedy/greedy.hpp"
#include "datamask/learners/phases.hpp"
#include "datamask/learners/protocol.hpp"
#include "datamask/objectives/function.hpp"
#include "datamask/objectives/mix.hpp"

namespace datamask {

/// @brief Naive, lazy or stochastic greedy on one block, on the f a learner with the same
/// settings optimises: its terms, its calibrated or fixed scales (calibrated on `Backend`, as the
/// learners calibrate them) and the whole block as facility location's reference set; the
/// candidates are the rows the prune keeps.
/// @tparam Backend calibrates the scales (its subsets are the learners'); the greedy itself runs
///         on the host
template <backend Backend = default_backend>
class basic_greedy_learner {
 public:
  /// @param s the selection's settings (ratio or count, lambda, prune, scaling, seed, threads,
  ///        `epsilon` for stochastic greedy); the samples are keyed by `greedy_seed(s)`
  /// @param g the method; its seed, threads, epsilon and candidates are set from `s` and the rows
  ///        the prune keeps (every row without one), its hooks from `select`'s
  /// @throws invalid_input ("greedy_options") when `g` has hooks: they are `select`'s argument
  explicit basic_greedy_learner(settings s = {}, greedy_options g = {}, Backend b = {})
      : s_(std::move(s)), g_(std::move(g)), backend_(std::move(b)) {
    DATAMASK_EXPECTS(!g_.stop && !g_.on_pick, "greedy_options",
                     "has stop or on_pick hooks; a greedy_learner takes them as select's optimizer_hooks");
    g_.seed = greedy_seed(s_);
    g_.threads = s_.threads;
    g_.epsilon = s_.epsilon;
  }

  /// @brief Selects S items of one block (the optimizers' protocol, learners/protocol.hpp).
  /// @param h `stop` (asked after each pick and about every 0.1 s inside one) and `on_pick`
  ///        (the number of rows picked so far); a greedy takes no steps or snapshots
  /// @param from must be null: a greedy keeps no state to continue
  /// @param prepared the block's per-row quantities when the caller has them, or null
  /// @return rows and ids in the order picked, the terms and f on them (when
  ///         `evaluate_selection`), kept, prune_threshold; no logits, history or steps (a greedy
  ///         picks; `on_pick` counts). When `stop` ended the run: the picks so far,
  ///         `stopped_early`, not evaluated.
  /// @throws invalid_input for bad input or settings (term_scaling::group is refused: greedy
  ///         needs a fixed f), and ("resume") for a resume point
  template <class T, class Diversity>
  [[nodiscard]] selection_result select(const problem<T>& p, const Diversity& diversity, const optimizer_hooks& h = {},
                                        const resume_point* from = nullptr,
                                        const detail::prepared* prepared = nullptr) const {
    static_assert(embedding_element<T>, "datamask: embeddings must be float, double, float16 or bfloat16");
    static_assert(detail::mix_models<Diversity, T>::value,
                  "datamask::greedy_learner::select: the diversity argument does not model "
                  "datamask::diversity_objective<D, T>");
    DATAMASK_EXPECTS(from == nullptr, "resume",
                     "a greedy keeps no state between its picks, so there is nothing to continue; run it afresh");
    DATAMASK_EXPECTS(s_.scaling != term_scaling::group, "scaling",
                     "group scaling makes f a different function at every step; greedy needs calibrated, "
                     "fixed or raw scales");
    return run(p, detail::as_mix(diversity), h, prepared);
  }

  [[nodiscard]] const settings& selection_settings() const { return s_; }

 private:
  template <class T, class Mix>
  selection_result run(const problem<T>& p, const Mix& mix, const optimizer_hooks& h,
                       const detail::prepared* prepared) const {
    auto ctx = phases::make_context(backend_, p, mix, s_, prepared);
    const phases::block_plan& blk = ctx.blk;
    // The scales a learner would use: calibrated when a mask is learned, else fixed or 1.
    if (phases::learns(blk, s_)) {
      const phases::batch_size size = phases::batch_sizes(blk, s_);
      phases::calibrate_scales(ctx, size.active, size.rollout);
    }
    objective_function<T, Mix> f(p.embeddings, blk.data, mix, s_.lambda, s_.quality, s_.threads);
    f.set_scales(scales_of(blk.plan.terms));
    greedy_options g = g_;
    g.stop = h.stop;
    g.on_pick = h.on_pick;
    g.candidates.clear();  // every row
    if (blk.kept_count() < blk.rows()) g.candidates = blk.kept;
    greedy_result picked = greedy_select(f, blk.selected, g);
    selection_result res;
    if (picked.stopped) {
      res.stopped_early = true;
      res.selected = blk.selected;
      res.kept = blk.kept_count();
      res.prune_threshold = blk.prune_threshold;
      for (index_t r : picked.rows) res.ids.push_back(blk.data.ids[r]);
      res.rows = std::move(picked.rows);
      res.terms = blk.plan.terms;
      return res;
    }
    const typename Backend::template vector<index_t>* no_candidates = nullptr;
    phases::finish(ctx, phases::scored_rows{std::move(picked.rows), {}, false}, {}, no_candidates, res);
    return res;
  }

  settings s_;
  greedy_options g_;
  Backend backend_;
};

/// @brief The greedy baselines on the default backend (Eigen; Thrust under nvcc).
using greedy_learner = basic_greedy_learner<>;

}  // namespace datamask
