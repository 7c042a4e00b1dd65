// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The continuous learner (docs/method.md section 6): the phases every optimiser of a block
/// shares (phases.hpp) around the continuous ascent of the relaxation of f on the backend's
/// executor (continuous/ascent.hpp, continuous/relaxation.hpp), its read-out (the S largest p)
/// and the swap polish (continuous/polish.hpp).
///
/// Why: the policy-gradient learner gives every item of a rollout the same scalar credit, so it
/// needs about 10^5 steps to come near greedy quality (benchmarks/RESULTS.md). Where each term of
/// f has a relaxation (`relaxable_objective`), the exact gradient of F costs one or two passes
/// over the block and carries a separate signal for every item.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <future>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "datamask/core/detail/parallel.hpp"
#include "datamask/exec/backend/concept.hpp"
#include "datamask/exec/backend/default.hpp"
#include "datamask/learners/continuous/ascent.hpp"
#include "datamask/learners/continuous/iterate.hpp"
#include "datamask/learners/continuous/polish.hpp"
#include "datamask/learners/continuous/relaxation.hpp"
#include "datamask/learners/greedy/greedy.hpp"
#include "datamask/learners/pg/learner.hpp"
#include "datamask/objectives/function.hpp"
#include "datamask/objectives/mix.hpp"
#include "datamask/core/half.hpp"
#include "datamask/core/options.hpp"
#include "datamask/learners/phases.hpp"
#include "datamask/learners/protocol.hpp"
#include "datamask/learners/continuous/settings.hpp"

namespace datamask {

/// @brief Settings of `continuous_learner`.
struct continuous_options {
  /// The settings every optimizer reads: ratio or count, lambda, prune or prune_threshold,
  /// scaling and scales, calibration_subsets, quality aggregate, seed and block (they key the
  /// calibration subsets), active_fraction and min_active (the calibration batch), epsilon (the
  /// polish's stochastic start), threads, normalized. Its `pg_settings` base (rollouts, steps,
  /// init, readout, ...) is the policy gradient's: of it only `reference_size` is read (facility
  /// location's reference set in the calibration), and `init` is checked.
  settings common;
  continuous_settings ascent;
  polish_settings polish;
};

namespace detail::continuous {
/// Whether p_i > 0 (`keep_if`'s predicate of the tracked read-out).
struct positive_at {
  const double* p;
  DATAMASK_HOST_DEVICE bool operator()(index_t i) const { return p[i] > 0.0; }
};

/// Host work that is started early and collected later: on a thread of its own from the start
/// when `beside` (and a thread can be had), else when collected. Beside, the work gets a flag
/// that the task's end sets (and then waits for the thread), so that work nobody collects ends
/// at its next check of the flag.
class host_task {
 public:
  using work = std::function<std::vector<index_t>(const std::atomic<bool>* abandoned)>;

  host_task(work w, bool beside) : work_(std::move(w)) {
    if (!beside) return;
    try {
      running_ = std::async(std::launch::async, [this] { return work_(&abandoned_); });
    } catch (const std::system_error&) {  // no thread to be had: the work runs when collected
    }
  }
  host_task(const host_task&) = delete;
  host_task& operator=(const host_task&) = delete;
  ~host_task() {
    abandoned_.store(true, std::memory_order_relaxed);
    if (running_.valid()) running_.wait();
  }

  /// The result (the work's exception, if it threw); the work runs now, without a flag, when
  /// it was not started beside.
  std::vector<index_t> get() { return running_.valid() ? running_.get() : work_(nullptr); }

 private:
  work work_;
  std::atomic<bool> abandoned_{false};
  std::future<std::vector<index_t>> running_;
};
}  // namespace detail::continuous

/// @brief The read-out: the S candidates with the largest key (p, or the logits, which order
/// alike but resolve more), ties to the smaller id, in that order.
[[nodiscard]] inline std::vector<index_t> read_out(std::span<const double> key, std::span<const id_t> ids,
                                                   std::span<const index_t> candidates, index_t s) {
  // When S candidates have a positive key, the S largest are among them: the projected iterate
  // keeps exact zeros, so a tracked read-out then selects from fewer rows than the block.
  std::vector<index_t> positive;
  for (index_t i : candidates) {
    if (key[i] > 0.0) positive.push_back(i);
  }
  if (static_cast<index_t>(positive.size()) >= s) return detail::continuous::top_by(key, ids, positive, s, true);
  return detail::continuous::top_by(key, ids, candidates, s, true);
}


/// @brief Selection by the continuous learner (docs/method.md section 6): the phases every optimiser
/// of a block shares (phases.hpp: validation, kept rows, S, calibrated or fixed scales, read-out
/// order, final evaluation into a `selection_result`) around the continuous ascent of the
/// relaxation of f, its read-out and the polish.
///
/// Every diversity term that counts in f (positive weight, lambda < 1) must be a
/// `relaxable_objective` (pairwise similarity, DiSF, facility location on a kNN graph
/// (`sparse_facility_location`), or a user objective with `relax`); dense facility location has
/// none (use `learner`, a greedy, or give it a graph). A term without one may be in the mix with
/// weight 0.
///
/// @tparam Backend runs the shared phases (calibration subsets, read-out order, the final
///         evaluation) and the ascent, on its executor (`eigen_backend`: the host's threads;
///         `thrust_backend`: its device): the iterate, the gradient, the step, the projection
///         and every term's relaxation stay there, and per iteration only scalars come back;
///         the tracked read-outs (the S largest p, f of them) run there too, and only the
///         best one's rows come back, once. The same code runs on every backend: on
///         `thrust_backend` over OpenMP the selection is the CPU backend's
///         (tests/test_thrust_credit_continuous.cpp). The polish ranks and chooses its
///         candidates on the executor too (`polish_ranking`, with the exact keys of a state
///         that computes them there, `executor_ranked_swap_state`); its swaps' exact gains and its
///         stochastic-greedy start run on the host, the start on a thread of its own beside the
///         ascent where the backend leaves the host free (`backend_frees_host`: under CUDA).
template <backend Backend = default_backend>
class basic_continuous_learner {
 public:
  explicit basic_continuous_learner(continuous_options opt = {}, Backend b = {})
      : opt_(std::move(opt)), backend_(std::move(b)) {}

  [[nodiscard]] const continuous_options& settings() const { return opt_; }

  /// @brief Selects S items of one block (the optimizers' protocol, learners/protocol.hpp).
  /// @param p the block: embeddings, quality columns, ids
  /// @param diversity a relaxable diversity objective or a `diversity_mix` of them
  /// @param h progress (`on_step` after each iteration: reward_mean = reward_max = the relaxed f
  ///        before the step), early stop (`stop`, asked after each iteration) and snapshots
  ///        (`on_snapshot` every `snapshot_every` iterations and at the stop: the whole iterate,
  ///        `continuous_iterate::pack()`, and the best tracked read-out); none changes the
  ///        selection
  /// @param from a snapshot to continue from (its packed iterate after `from->step`
  ///        iterations, the relaxed values of its history and its best tracked read-out): the
  ///        result is the uninterrupted run's. Null: from the start.
  /// @param prepared as `basic_learner::select`'s: the block's per-row quantities, or null
  /// @return the selection, filled as the policy-gradient learner fills it (ids and rows in
  ///         read-out order, terms, objective when `evaluate_selection`, kept, prune_threshold);
  ///         `history` holds one record per iteration (reward_mean = reward_max = the relaxed f
  ///         before the step, term_means empty); `steps_run` counts iterations; `logits` holds
  ///         logit(p) clamped to [-40, 40] (projected) or L - tau (logits), -infinity for pruned
  ///         rows
  /// @throws invalid_input for bad input or settings (term_scaling::group is refused: f must be
  ///         a fixed function), and ("diversity") for a term that counts without a relaxation
  template <class T, class Diversity>
  [[nodiscard]] selection_result select(const problem<T>& p, const Diversity& diversity, const optimizer_hooks& h = {},
                                        const resume_point* from = nullptr,
                                        const detail::prepared* prepared = nullptr) const {
    static_assert(embedding_element<T>, "datamask: embeddings must be float, double, float16 or bfloat16");
    static_assert(detail::mix_models<Diversity, T>::value,
                  "datamask::continuous_learner::select: the diversity argument does not model "
                  "datamask::diversity_objective<D, T>");
    return run(p, detail::as_mix(diversity), h, from, prepared);
  }

 private:
  template <class T, class Mix>
  selection_result run(const problem<T>& p, const Mix& mix, const optimizer_hooks& h, const resume_point* from,
                       const detail::prepared* prepared) const {
    const datamask::settings& o = opt_.common;
    DATAMASK_EXPECTS(o.scaling != term_scaling::group, "scaling",
                     "group scaling makes f a different function at every step; the continuous "
                     "learner needs calibrated, fixed or raw scales");
    validate(opt_.ascent);
    validate(opt_.polish);
    auto ctx = phases::make_context(backend_, p, mix, o, prepared);
    const phases::block_plan& blk = ctx.blk;
    const std::string unrelaxed = detail::continuous::unrelaxed_term<T>(mix, blk.plan.slot);
    DATAMASK_EXPECTS(unrelaxed.empty(), "diversity", "the continuous learner ascends a relaxation of f, and its term '",
                     unrelaxed, "' has none (datamask::relaxable_objective); weigh it 0, or use the policy-gradient "
                     "learner or a greedy");
    const Backend& b = ctx.backend;
    selection_result res;
    res.active = blk.kept_count();  // every kept item takes part in every iteration
    res.rollout_size = blk.selected;
    std::vector<double> key(static_cast<std::size_t>(blk.rows()), 0.0);
    std::vector<index_t> rows;
    // Where the ascent starts: the first iterate, or the resume point's (checked before anything
    // runs, whether or not this block learns).
    std::optional<continuous_iterate> resumed;
    if (from != nullptr) {
      std::vector<double> relaxed;
      for (const step_record& rec : from->history) relaxed.push_back(rec.reward_mean);
      resumed = continuous_iterate::unpack(from->state, blk.rows(), opt_.ascent, from->step, std::move(relaxed));
    }
    if (phases::learns(blk, o)) {
      const phases::batch_size size = phases::batch_sizes(blk, o);
      // The scales of the policy-gradient learner with the same settings: one f for both.
      phases::calibrate_scales(ctx, size.active, size.rollout);
      rows = ascend(ctx, h, std::move(resumed), from ? from->best : best_rollout{}, key, res);
    }
    const auto key_dev = b.to_device(std::span<const double>(key));
    // Read-out order: the key, ties to the smaller id (the top S by quality when f is modular).
    std::vector<index_t> ordered =
        phases::learns(blk, o)
            ? b.top_rows(key_dev, ctx.dev.ds, b.to_device(std::span<const index_t>(rows)), blk.selected)
            : phases::read_out(ctx, key_dev);
    // No candidate rows: a typed null, as nvcc (13.0) deduces nothing through a bare nullptr here.
    const typename Backend::template vector<index_t>* no_candidates = nullptr;
    phases::finish(ctx, phases::scored_rows{std::move(ordered), {}, false}, std::move(key), no_candidates, res);
    return res;
  }

  /// The ascent, its read-out and the polish on f with the block's scales, from `resumed` (a
  /// resume point's iterate; none: the first) with `best` its best tracked read-out so far. Fills
  /// `key` (the read-out key per row), the history and the counters; returns the selected rows.
  template <class T, class Mix>
  std::vector<index_t> ascend(const phases::block_context<Backend, T, Mix>& ctx, const optimizer_hooks& h,
                              std::optional<continuous_iterate> resumed, best_rollout best,
                              std::vector<double>& key, selection_result& res) const {
    const datamask::settings& o = opt_.common;
    const phases::block_plan& blk = ctx.blk;
    const Backend& b = ctx.backend;
    const index_t s = blk.selected;
    // f on the rows the context prepared (no second pass over the block).
    objective_function<T, Mix> f(ctx.block.embeddings, blk.data, ctx.mix, o.lambda, o.quality, o.threads);
    f.set_scales(scales_of(blk.plan.terms));
    phases::check_resumed_best(blk, best, "resume_point.best");  // the best tracked read-out: rows and f
    // The ascent on the backend's executor: f's quality uploaded once, the block read where the
    // backend keeps it.
    auto exec = b.make_executor(ctx.dev.ds);
    ascent_hooks hooks{{}, {}, {}, h.snapshot_every, {}};
    if (h.on_step) {
      hooks.on_step = [&h](const continuous_step_info& si) {
        h.on_step(step_record{si.iteration, si.lr, si.relaxed, si.relaxed, {}});
      };
    }
    if (h.stop) hooks.stop = [&h](const continuous_step_info&) { return h.stop(); };
    // The tracked read-outs where the ascent keeps p: the S largest (`tracked_read_out`) and f
    // of them as the final evaluation scores them (phases::score, the whole block as reference),
    // so per read-out only the terms' values reach the host; the best one's rows stay in the
    // backend's memory until a snapshot or the polish reads them.
    const auto all = phases::all_rows(b, blk.rows());
    auto best_rows = b.to_device(std::span<const index_t>(best.rows));
    bool best_on_host = true;  // best.rows holds best_rows
    std::vector<double> raw;
    hooks.on_iterate = [&](index_t /*t*/, const double* pcur) {
      auto r = tracked_read_out(ctx, exec, pcur);
      phases::score(ctx, r, 1, s, all, raw);
      const double fv = blk.plan.combine(raw);
      if (fv > best.reward) {
        best.reward = fv;
        best_rows = std::move(r);
        best_on_host = false;
      }
    };
    hooks.iterate_every = opt_.ascent.track_every;
    auto best_to_host = [&] {
      if (!best_on_host) best.rows = b.to_host(best_rows);
      best_on_host = true;
    };
    if (h.on_snapshot) {
      hooks.on_snapshot = [&](const continuous_iterate& it) {
        best_to_host();
        h.on_snapshot(it.iteration, it.pack(), best);
      };
    }
    // The stochastic-greedy start depends on f and the kept rows only, not on the ascent: where
    // the ascent leaves the host's cores free it runs beside it, else after it. The same rows
    // either way; a stopped run drops it (beside the ascent: abandoned, and waited for until
    // the greedy's next stop check: every round, and every slice of about 0.1 s of a round).
    std::optional<detail::continuous::host_task> side_start;
    if (opt_.polish.enabled && opt_.polish.stochastic_start) {
      side_start.emplace([&](const std::atomic<bool>* abandoned) { return stochastic_start(f, blk.kept, s, abandoned); },
                         backend_frees_host<Backend>);
    }
    continuous_iterate start = resumed ? std::move(*resumed) : first_iterate(blk.rows(), blk.kept, s, opt_.ascent);
    const double* quality = f.has_quality_term() ? exec.upload(f.quality()) : nullptr;
    const auto relaxation = relaxation_of(f, s, b.relaxation_view(ctx.dev.ds), quality);
    const continuous_state st =
        datamask::ascend(exec, relaxation, blk.rows(), blk.kept, s, opt_.ascent, std::move(start), hooks);
    // The polish ranks and chooses its candidates on the same executor (a device's, under
    // CUDA): the relaxation's gradient at its selection is the same passes over the block as an
    // ascent step, and per round only the chosen rows come to the host.
    polish_ranking ranking(b, ctx.dev.ds, exec, relaxation, blk.rows(), Backend::data(ctx.dev.kept),
                           blk.kept_count(), quality);
    res.steps_run = st.iterations_run;
    res.stopped_early = st.stopped_early;
    res.history.reserve(st.relaxed.size());
    for (std::size_t t = 0; t < st.relaxed.size(); ++t) {
      const auto it = static_cast<index_t>(t + 1);
      res.history.push_back(step_record{it, schedule_of(opt_.ascent)(it, opt_.ascent.iterations), st.relaxed[t],
                                        st.relaxed[t], {}});
    }
    if (st.logits.empty()) {
      for (index_t i : blk.kept) {
        const double pi = std::clamp(st.p[i], 1e-300, 1.0);
        key[i] = std::clamp(std::log(pi) - std::log1p(-std::min(pi, 1.0 - 1e-17)), -40.0, 40.0);
      }
    } else {
      key = st.logits;
    }
    // Projected: p itself (ties among the exact ones go to the smaller id); logits: L - tau,
    // which orders as p does but does not round to 1.
    std::vector<std::vector<index_t>> starts;
    starts.push_back(read_out(st.logits.empty() ? st.p : st.logits, f.ids(), blk.kept, s));
    best_to_host();
    starts.push_back(std::move(best.rows));
    if (side_start && !st.stopped_early) starts.push_back(side_start->get());
    side_start.reset();  // a stopped run's start is abandoned and waited for
    return polish_best(f, ranking, blk.kept, std::move(starts));
  }

  /// `read_out` of p in the executor's memory, on the backend: the S kept rows with the largest
  /// p, ties to the smaller id, from the rows with p > 0 when S rows have it (rows outside the
  /// candidates hold p = 0); the rows stay in the backend's memory.
  template <class T, class Mix, class Exec>
  static auto tracked_read_out(const phases::block_context<Backend, T, Mix>& ctx, Exec& exec, const double* p) {
    const index_t n = ctx.blk.rows();
    const index_t s = ctx.blk.selected;
    auto scope = exec.scope();
    index_t* positive = scope.template scratch<index_t>(n);
    const index_t count = scope.keep_if(n, detail::continuous::positive_at{p}, positive);
    if (count >= s) return ctx.backend.largest(p, ctx.dev.ds, static_cast<const index_t*>(positive), count, s);
    return ctx.backend.largest(p, ctx.dev.ds, Backend::data(ctx.dev.kept), ctx.blk.kept_count(), s);
  }

  /// Stochastic greedy's selection of `s` kept rows on f (`polish_settings::stochastic_start`),
  /// keyed as the greedy baseline of the same run and block is (`greedy_seed`). Beside the
  /// ascent (`abandoned` given) it ends early once the flag is set, and leaves one core to the
  /// thread that drives the device; the rows do not depend on the thread count.
  template <class F>
  std::vector<index_t> stochastic_start(const F& f, std::span<const index_t> kept, index_t s,
                                        const std::atomic<bool>* abandoned) const {
    greedy_options g;
    g.method = greedy_method::stochastic;
    g.epsilon = opt_.common.epsilon;
    g.seed = greedy_seed(opt_.common);
    g.threads = opt_.common.threads;
    if (abandoned != nullptr) {
      g.threads = std::max(1, detail::resolve_threads(opt_.common.threads) - 1);
      g.stop = [abandoned] { return abandoned->load(std::memory_order_relaxed); };
    }
    if (static_cast<index_t>(kept.size()) < f.size()) g.candidates.assign(kept.begin(), kept.end());
    return greedy_select(f, s, g).rows;
  }

  /// Polishes each start set (the final read-out first; empty and repeated sets dropped) and
  /// returns the best by f, ties to the earlier start.
  template <class F, class Ranking>
  std::vector<index_t> polish_best(const F& f, Ranking& ranking, std::span<const index_t> kept,
                                   std::vector<std::vector<index_t>> starts) const {
    std::vector<index_t> best;
    double best_f = 0.0;
    std::vector<std::vector<index_t>> seen;
    for (std::vector<index_t>& rows : starts) {
      std::vector<index_t> sorted(rows);
      std::sort(sorted.begin(), sorted.end());
      if (rows.empty() || std::find(seen.begin(), seen.end(), sorted) != seen.end()) continue;
      seen.push_back(std::move(sorted));
      if (opt_.polish.enabled) (void)polish_swaps(f, ranking, rows, kept, opt_.polish, opt_.common.threads);
      const double value = f(std::span<const index_t>(rows));
      if (best.empty() || value > best_f) {
        best = std::move(rows);
        best_f = value;
      }
    }
    return best;
  }

  continuous_options opt_;
  Backend backend_;
};

/// @brief The continuous learner on the default backend (`default_backend`, as `learner<>`).
using continuous_learner = basic_continuous_learner<>;

}  // namespace datamask
