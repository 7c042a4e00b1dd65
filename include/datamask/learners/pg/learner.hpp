// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The policy-gradient mask learner: the one loop (sample, score, advantage, update,
/// read out), written once against the `backend` concept.
///
/// Only the concept: which backend runs when none is named is decided by the caller or by the
/// umbrella header (pg/select.hpp, included by datamask.hpp, defines `learner<>` on
/// backend/default.hpp's `default_backend`; learners/select.hpp, `datamask::select`). The phases a block run shares with other optimisers live in phases.hpp; this
/// file holds what is particular to policy gradient: the step loop and the best rollout.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "datamask/exec/backend/concept.hpp"
#include "datamask/core/concepts.hpp"
#include "datamask/objectives/mix.hpp"
#include "datamask/core/half.hpp"
#include "datamask/core/options.hpp"
#include "datamask/learners/phases.hpp"
#include "datamask/learners/protocol.hpp"
#include "datamask/learners/pg/advantage.hpp"
#include "datamask/learners/pg/softmax.hpp"
#include "datamask/core/philox.hpp"
#include "datamask/learners/pg/gumbel_top_k.hpp"
#include "datamask/learners/schedule.hpp"

namespace datamask {

/// @brief DATAMASK selection by policy-gradient mask learning (docs/method.md sections 1 to 3).
///
/// Credit (`settings::credit`): the paper's estimator gives every item of rollout g its
/// advantage A_g through the policy's log-probability gradient; per-item credit
/// (`credit_mode::item`) gives each draw its own advantage from the objectives' marginals
/// (`phases::item_gains`, `advantage_estimator::items`) through the policy's `update_items`
/// (`item_credit_policy`; softmax_policy takes it in its relaxed form only). The default,
/// `credit_mode::automatic`, is per-item credit when every diversity term of f is a
/// `cheap_marginal_objective` (pairwise similarity, dense facility location) and the policy
/// takes item credit, else the paper's estimator (`phases::resolve_credit`).
///
/// Reference set: a step scores its G rollouts with the step's active batch as the reference set
/// V of objectives that compare a subset with a population (facility location: the rollout's
/// coverage of the m active items; `phases::score` passes the batch), in one batched call per
/// objective where it has one (`batched_diversity_objective`); with `settings::reference_size`
/// R > 0, V is R kept rows drawn anew each step instead (`phases::step_reference`). The read-out
/// and the final f use the whole block.
///
/// @tparam Backend where the loop runs (any `backend`; `datamask::learner<>` from datamask.hpp
///         picks `default_backend`)
/// @tparam Policy the mask policy: how rollouts update the logits (`softmax_policy`)
/// @tparam Scheduler the learning-rate schedule (`linear_lr`, 10 to 1)
/// @tparam Sampler how rollouts are drawn (`gumbel_top_k_sampler`)
template <backend Backend, class Policy = softmax_policy, lr_scheduler Scheduler = linear_lr,
          class Sampler = gumbel_top_k_sampler>
  requires mask_policy<Policy, Backend> && rollout_sampler<Sampler, Backend>
class basic_learner {
 public:
  explicit basic_learner(datamask::settings opt = {}, Policy policy = {}, Scheduler schedule = {},
                         Sampler sampler = {}, Backend b = {})
      : opt_(std::move(opt)),
        policy_(std::move(policy)),
        schedule_(std::move(schedule)),
        sampler_(std::move(sampler)),
        backend_(std::move(b)) {}

  [[nodiscard]] const datamask::settings& settings() const { return opt_; }

  /// @brief Selects S items of one block (the optimizers' protocol, learners/protocol.hpp).
  /// @param p the block: embeddings, quality columns, ids
  /// @param diversity a `diversity_objective` or a `diversity_mix` of them (`no_diversity{}` for
  ///        quality only)
  /// @param h progress (`on_step`, after each step), early stop (`stop`, asked after each step)
  ///        and snapshots (`on_snapshot` every `snapshot_every` steps and at the stop: the
  ///        logits after the step, one per row, and the best rollout); none changes the selection
  /// @param from a snapshot to continue from (its step, logits and best rollout; its records
  ///        head the history): every draw is a pure function of (seed, block, step, rollout,
  ///        item id), and calibration does not read the logits, so the result is the
  ///        uninterrupted run's. Null: from the start.
  /// @param prepared the block's per-row quantities (norms, combined quality, ids:
  ///        `detail::prepare(p, normalized, threads)`, which also checks the values) when the
  ///        caller has them, so that the run does not pass over the block again; only its shape
  ///        is checked, the caller vouches that it is p's. Null: the run prepares the block.
  /// @throws invalid_input for bad input or settings; the message names the input ("prepared"
  ///         for a preparation of another shape, "resume_point.state" for logits of another).
  template <class T, class Diversity>
  [[nodiscard]] selection_result select(const problem<T>& p, const Diversity& diversity, const optimizer_hooks& h = {},
                                        const resume_point* from = nullptr,
                                        const detail::prepared* prepared = nullptr) const {
    static_assert(embedding_element<T>, "datamask: embeddings must be float, double, float16 or bfloat16");
    constexpr bool ok = detail::mix_models<Diversity, T>::value;
    static_assert(ok,
                  "datamask::learner::select: the diversity argument does not model "
                  "datamask::diversity_objective<D, T>: it needs a const call operator "
                  "double(const datamask::subset_view<T>&), or must be a datamask::diversity_mix "
                  "of such objectives");
    if constexpr (ok) {
      selection_result res = run(p, detail::as_mix(diversity), h, from, prepared);
      if (from != nullptr) {  // the records of the steps done: the uninterrupted run's history
        res.history.insert(res.history.begin(), from->history.begin(), from->history.end());
      }
      return res;
    } else {
      return {};
    }
  }

  /// @brief The terms of f and the scales this learner would use on `p` (calibrated from
  /// uniform subsets of the first active batch, `settings::scales` under fixed scaling, or 1
  /// under raw and group scaling), without learning: only the prepare and calibrate phases run.
  /// Greedy baselines and checks use it to optimise exactly the f a run optimises.
  /// @param prepared as `select`'s
  template <class T, class Diversity>
  [[nodiscard]] std::vector<term_value> calibrate(const problem<T>& p, const Diversity& diversity,
                                                  const detail::prepared* prepared = nullptr) const {
    static_assert(detail::mix_models<Diversity, T>::value,
                  "datamask::learner::calibrate: the diversity argument does not model "
                  "datamask::diversity_objective<D, T>");
    const auto mix = detail::as_mix(diversity);
    const optimizer_hooks none;
    auto st = start(p, mix, none, nullptr, prepared);
    if (phases::learns(st.ctx.blk, opt_)) phases::calibrate_scales(st.ctx, st.size.active, st.size.rollout);
    return std::move(st.ctx.blk.plan.terms);
  }

 private:
  using ivec = typename Backend::template vector<index_t>;
  using dvec = typename Backend::template vector<double>;

  /// Everything one block run carries from phase to phase: the block's context, the caller's
  /// hooks and the loop's state.
  template <class T, class Mix>
  struct run_state {
    phases::block_context<Backend, T, Mix> ctx;
    const optimizer_hooks& hooks;
    index_t first_step = 1;  ///< 1, or the step after a resumed snapshot's
    phases::batch_size size;
    dvec logits;
    rng::philox_key key;
    bool track_best = false;  ///< every rollout is a complete candidate selection
    best_rollout best;
    selection_result res;
    credit_mode credit = credit_mode::rollout;  ///< `settings::credit` resolved for this f
  };

  /// The block's context, batch sizes, initial logits (the `init` ones, or the snapshot's).
  template <class T, class Mix>
  run_state<T, Mix> start(const problem<T>& p, const Mix& mix, const optimizer_hooks& h, const resume_point* from,
                          const detail::prepared* prepared) const {
    DATAMASK_EXPECTS(from == nullptr || from->step >= 0, "resume_point.step", "must be at least 0, found ",
                     from ? from->step : 0);
    auto ctx = phases::make_context(backend_, p, mix, opt_, prepared);
    const phases::batch_size size = phases::batch_sizes(ctx.blk, opt_);
    const std::vector<double> init =
        phases::initial_logits(ctx.blk, opt_, from ? std::span<const double>(from->state) : std::span<const double>{});
    dvec logits = ctx.backend.to_device(std::span<const double>(init));
    return run_state<T, Mix>{std::move(ctx), h, from ? from->step + 1 : 1, size, std::move(logits),
                             rng::block_key(opt_.seed, opt_.block), false, from ? from->best : best_rollout{},
                             {}, credit_mode::rollout};
  }

  template <class T, class Mix>
  selection_result run(const problem<T>& p, const Mix& mix, const optimizer_hooks& h, const resume_point* from,
                       const detail::prepared* prepared) const {
    run_state<T, Mix> st = start(p, mix, h, from, prepared);
    st.credit = resolved_credit<T>(st.ctx.mix, st.ctx.blk.plan);
    if (st.credit == credit_mode::item) check_item_credit<T>(mix, st.ctx.blk.plan);
    st.res.active = st.size.active;
    st.res.rollout_size = st.size.rollout;
    if (phases::learns(st.ctx.blk, opt_)) {
      phases::calibrate_scales(st.ctx, st.size.active, st.size.rollout);
      start_best(st);
      loop(st);
    }
    std::vector<index_t> read = phases::read_out(st.ctx, st.logits);
    phases::scored_rows sel{std::move(read), {}, false};
    std::optional<ivec> all;
    if (st.track_best && !st.best.rows.empty()) {
      all = phases::all_rows(st.ctx.backend, st.ctx.blk.rows());
      sel = phases::better_of(st.ctx, st.logits, std::move(sel.rows), st.best.rows, *all);
    }
    phases::finish(st.ctx, std::move(sel), st.ctx.backend.to_host(st.logits), all ? &*all : nullptr, st.res);
    return std::move(st.res);
  }

  /// `settings::credit` for this f: `automatic` gives per-item credit only with a policy whose
  /// gradient has the relaxed form (`softmax_policy`'s default), never to another policy.
  template <class T, class Mix>
  credit_mode resolved_credit(const Mix& mix, const detail::term_plan& plan) const {
    return phases::resolve_credit<T>(opt_.credit, takes_item_credit(), mix,
                                     [&](std::size_t i) { return plan.slot[i] >= 0; });
  }

  /// Per-item credit needs every weighted diversity term's marginals and the relaxed form of the
  /// policy's gradient (its update adds each item's own coefficient; the Plackett-Luce gradient
  /// has no per-item form here). @throws invalid_input naming `credit`.
  template <class T, class Mix>
  void check_item_credit(const Mix& mix, const detail::term_plan& plan) const {
    const std::string missing = phases::without_marginals<T>(mix, plan);
    DATAMASK_EXPECTS(missing.empty(), "credit", "item credit needs each item's marginal gain, which the "
                     "objective '", missing, "' cannot give (it is not a datamask::marginal_objective); "
                     "use credit rollout");
    DATAMASK_EXPECTS(takes_item_credit(), "credit",
                     "item credit needs a policy that takes each draw's own coefficient (softmax_policy "
                     "in its relaxed form; it has no plackett-luce form): use logprob relaxed, or "
                     "credit rollout");
  }

  /// Whether the policy, as configured, takes per-item credit (`item_credit_policy`).
  bool takes_item_credit() const {
    if constexpr (item_credit_policy<Policy, Backend>) {
      return policy_.takes_item_credit();
    } else {
      return false;
    }
  }

  /// Best-rollout tracking: on when every rollout is a complete candidate selection of a fixed
  /// f (the active batch is every kept item, so k = S) and the read-out is the top logits.
  template <class State>
  void start_best(State& st) const {
    st.track_best = opt_.keep_best_rollout && st.size.active == st.ctx.blk.kept_count() &&
                    (opt_.reference_size == 0 || opt_.reference_size >= st.ctx.blk.kept_count()) &&
                    opt_.scaling != term_scaling::group &&
                    opt_.readout == readout_mode::top_logits;
    if (!st.track_best) {
      st.best = {};  // a snapshot's best, where this run tracks none, is not a candidate
      return;
    }
    phases::check_resumed_best(st.ctx.blk, st.best, "resume_point.best");
  }

  /// Per-step buffers of the loop.
  struct step_buffers {
    ivec active;
    ivec reference;  ///< a sampled reference set (`settings::reference_size`)
    ivec subsets;
    std::vector<double> vals;
    std::vector<double> rewards;
    std::vector<double> coef;
    std::vector<double> term_means;
    std::vector<double> marginals;  ///< per-item credit: per term, G k marginals
  };

  /// The step loop, from `first_step` (resumed runs) to `steps`, until `stop` says so.
  template <class State>
  void loop(State& st) const {
    step_buffers buf;
    buf.coef.resize(static_cast<std::size_t>(opt_.rollouts));
    buf.term_means.resize(st.ctx.blk.plan.terms.size());
    selection_result& res = st.res;
    res.history.reserve(static_cast<std::size_t>(opt_.steps));
    res.steps_run = std::min(st.first_step - 1, opt_.steps);  // resumed: those are done
    for (index_t step = st.first_step; step <= opt_.steps; ++step) {
      const double lr = schedule_(step, opt_.steps);
      const bool stop = one_step(st, buf, step, lr);
      if (stop) {
        res.stopped_early = step < opt_.steps;
        break;
      }
    }
  }

  /// One step: active batch, rollouts, rewards, best rollout, update, history, hooks. Returns
  /// whether `stop` ended the run.
  template <class State>
  bool one_step(State& st, step_buffers& buf, index_t step, double lr) const {
    const auto st32 = static_cast<std::uint32_t>(step);
    const index_t g_count = opt_.rollouts;
    const index_t k = st.size.rollout;
    const auto& plan = st.ctx.blk.plan;
    const Backend& b = st.ctx.backend;
    b.active_batch(st.ctx.dev.ds, st.ctx.dev.kept, st.key, st32, st.size.active, buf.active);
    sampler_.sample(b, st.logits, st.ctx.dev.ds, buf.active, st.key, st32, g_count, k, buf.subsets);
    const ivec& reference = phases::step_reference(st.ctx, st.key, st32, buf.active, buf.reference);
    const bool per_item = st.credit == credit_mode::item;
    if (per_item) {
      phases::score_marginals(st.ctx, buf.subsets, g_count, k, reference, buf.vals, buf.marginals);
    } else {
      phases::score(st.ctx, buf.subsets, g_count, k, reference, buf.vals);
    }
    phases::rewards(plan, opt_.scaling, buf.vals, g_count, buf.rewards);
    for (std::size_t t = 0; t < plan.terms.size(); ++t) {
      buf.term_means[t] = mean_std(std::span<const double>(buf.vals).subspan(
                                               t * g_count, static_cast<std::size_t>(g_count)))
                              .first;
    }
    const bool finite = std::all_of(buf.rewards.begin(), buf.rewards.end(),
                                     [](double r) { return std::isfinite(r); });
    if (st.track_best && finite) keep_best(st, buf);
    update(st, buf, lr, per_item);
    const double mean = mean_std(buf.rewards).first;
    const double rmax = finite ? *std::max_element(buf.rewards.begin(), buf.rewards.end())
                               : std::numeric_limits<double>::quiet_NaN();
    st.res.history.push_back(step_record{step, lr, finite ? mean : rmax, rmax, buf.term_means});
    st.res.steps_run = step;
    return call_hooks(st, step);
  }

  /// The policy's update from the step's advantages (`advantage_estimator`): one coefficient
  /// per rollout, or under per-item credit one per draw (`phases::item_gains`); a step whose
  /// values give no advantage is counted and changes nothing.
  template <class State>
  void update(State& st, step_buffers& buf, double lr, bool per_item) const {
    const index_t g_count = opt_.rollouts;
    const index_t k = st.size.rollout;
    const advantage_estimator estimator{opt_.advantage};
    advantage_status status = advantage_estimator::check(buf.rewards);
    if (status == advantage_status::ok && per_item) {
      phases::item_gains(st.ctx.blk.plan, opt_.scaling, buf.vals, buf.marginals, g_count, k, buf.coef);
      status = estimator.items(buf.coef, g_count, k, lr);
    } else if (status == advantage_status::ok) {
      status = estimator.rollouts(buf.rewards, lr, buf.coef);
    }
    if (status == advantage_status::nonfinite) {
      ++st.res.nonfinite_steps;
    } else if (status == advantage_status::zero_variance) {
      ++st.res.zero_variance_steps;
    } else if (per_item) {
      if constexpr (item_credit_policy<Policy, Backend>) {
        policy_.update_items(st.ctx.backend, st.logits, buf.active, buf.subsets, g_count * k, buf.coef);
      }
    } else {
      policy_.update(st.ctx.backend, st.logits, buf.active, buf.subsets, g_count, k, buf.coef);
    }
  }

  /// Remembers the step's best rollout when it beats the best so far; copies only its row.
  template <class State>
  void keep_best(State& st, const step_buffers& buf) const {
    const auto g = std::max_element(buf.rewards.begin(), buf.rewards.end()) - buf.rewards.begin();
    if (!(buf.rewards[g] > st.best.reward)) return;
    const index_t k = st.size.rollout;
    st.best.rows = phases::rows_to_host(st.ctx.backend, buf.subsets, static_cast<index_t>(g) * k, k);
    st.best.reward = buf.rewards[g];
  }

  /// Progress, early stop and snapshot hooks after a step. Returns whether to stop.
  template <class State>
  bool call_hooks(State& st, index_t step) const {
    const optimizer_hooks& h = st.hooks;
    if (h.on_step) h.on_step(st.res.history.back());
    const bool stop = h.stop && h.stop();
    if (h.on_snapshot && (stop || (h.snapshot_every > 0 && step % h.snapshot_every == 0))) {
      const std::vector<double> host = st.ctx.backend.to_host(st.logits);
      h.on_snapshot(step, std::span<const double>(host), st.best);
    }
    return stop;
  }

  datamask::settings opt_;
  Policy policy_;
  Scheduler schedule_;
  Sampler sampler_;
  Backend backend_;
};

}  // namespace datamask
