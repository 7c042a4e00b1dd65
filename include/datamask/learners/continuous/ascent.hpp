// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The continuous ascent (docs/method.md section 6): gradient ascent of a relaxation F(p) of f
/// on the inclusion probabilities (sum p = S, 0 <= p <= 1), composed of policies in the manner of
/// ensmallen's `SGD<UpdatePolicy, DecayPolicy>`: `ascent<Update, Projection, Schedule>`, with a
/// step rule (continuous/update.hpp), a parameterisation (continuous/projection.hpp) and a
/// learning-rate schedule (`lr_scheduler`, schedule/lr.hpp, as the policy-gradient learner's).
///
/// Written once against an executor: the iterate, the gradient, the step and the projection
/// stay in the executor's memory (the host's on the CPU backend, a GPU's under CUDA), and per
/// iteration only scalars cross to the host, plus p when a hook asks for it.

#include <cmath>
#include <functional>
#include <limits>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "datamask/core/concepts.hpp"
#include "datamask/core/config.hpp"
#include "datamask/learners/continuous/iterate.hpp"
#include "datamask/learners/continuous/projection.hpp"
#include "datamask/learners/continuous/update.hpp"
#include "datamask/core/error.hpp"
#include "datamask/exec/host.hpp"
#include "datamask/exec/ops.hpp"
#include "datamask/learners/schedule.hpp"
#include "datamask/learners/continuous/settings.hpp"

namespace datamask {

/// @brief What `ascent::run` calls back. Every member may be empty.
struct ascent_hooks {
  std::function<void(const continuous_step_info&)> on_step;  ///< after each iteration
  std::function<bool(const continuous_step_info&)> stop;     ///< return true to stop early
  /// After each step, before `on_step`: the iteration and the new p where the executor keeps it
  /// (n values in its memory: the host's for a host executor, a GPU's under CUDA; nothing is
  /// copied for it).
  std::function<void(index_t, const double*)> on_iterate;
  /// The whole iterate every `snapshot_every` iterations (0: never) and after the iteration at
  /// which `stop` ended the run, after `on_iterate`, `on_step` and `stop`.
  index_t snapshot_every = 0;
  std::function<void(const continuous_iterate&)> on_snapshot;
  /// `on_iterate` is called at the iterations divisible by this only.
  index_t iterate_every = 1;
};

namespace detail::continuous {

/// The ascent direction of candidate k (row i = rows[k]): h_i = dF/dp_i, or (logits)
/// dF/dL_i = p_i (1 - p_i) dF/dp_i.
struct ascent_direction {
  const index_t* rows;
  const double* p;
  const double* grad;
  double* h;
  bool logit;
  DATAMASK_HOST_DEVICE void operator()(index_t k) const {
    const index_t i = rows[k];
    h[i] = logit ? p[i] * (1.0 - p[i]) * grad[i] : grad[i];
  }
};

/// p_i (1 - p_i), the integrality's term.
struct spread_at {
  const index_t* rows;
  const double* p;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const { return p[rows[k]] * (1.0 - p[rows[k]]); }
};

/// Whether iteration t is one of every `every` (0: none).
inline bool due(index_t t, index_t every) { return every > 0 && t % every == 0; }

}  // namespace detail::continuous

/// @brief The continuous ascent: maximises a relaxed function F over {0 <= p <= 1, sum p = S}
/// restricted to the candidates (other rows hold p = 0), for `iterations` iterations.
/// @tparam Update the step rule (`plain_update`, `normalized_update`, `adam_update`)
/// @tparam Projection the parameterisation (`capped_simplex_projection`, `sigmoid_projection`)
/// @tparam Schedule the step size of iteration t of `iterations` (`lr_scheduler`)
template <class Update = normalized_update, class Projection = capped_simplex_projection,
          lr_scheduler Schedule = linear_lr>
class ascent {
 public:
  explicit ascent(index_t iterations, Update update = {}, Projection projection = {}, Schedule schedule = {})
      : iterations_(iterations), update_(std::move(update)), projection_(std::move(projection)),
        schedule_(std::move(schedule)) {}

  /// @brief What this ascent's iterates hold (`first_iterate`, `check_iterate`).
  [[nodiscard]] iterate_shape shape() const { return {iterations_, Projection::logits, Update::moments}; }
  /// @brief The step size of iteration t (from 1).
  [[nodiscard]] double step_size(index_t t) const { return schedule_(t, iterations_); }

  /// @brief Runs from iterate `it` (`first_iterate`, or a snapshot's) to the last iteration. The
  /// result after a snapshot at iteration k continued from it is the result of the run that took
  /// the snapshot, bit for bit (history included): an iteration reads nothing but the iterate.
  /// @param exec where the iteration runs
  /// @param relaxed callable `double(Exec& exec, const double* p, double* grad)`: F(p), and
  ///        dF/dp written for every row, with p and grad in the executor's memory (deterministic)
  /// @param n rows of the block
  /// @param candidates rows that may be selected (sorted, distinct), at least S of them
  /// @param s the selection size S
  /// @return the final p (and logits), F per iteration
  /// @throws invalid_input ("candidates") for fewer than S candidates, ("continuous_state") for
  ///         an iterate that does not fit n, the candidates and this ascent
  template <class Exec, class Relaxed>
  [[nodiscard]] continuous_state run(Exec& exec, const Relaxed& relaxed, index_t n, std::span<const index_t> candidates,
                                     index_t s, continuous_iterate it, const ascent_hooks& hooks = {}) const {
    namespace dc = detail::continuous;
    DATAMASK_EXPECTS(static_cast<index_t>(candidates.size()) >= s && s >= 1, "candidates", "has ",
                     candidates.size(), " rows, fewer than S = ", s);
    dc::check_iterate(it, n, candidates, shape());
    constexpr bool logit = Projection::logits;
    const auto sd = static_cast<double>(s);
    const auto m = static_cast<index_t>(candidates.size());
    const candidate_rows c{exec.upload(candidates), m, exec.template scratch<index_t>(m)};
    double* p = exec.upload(std::span<const double>(it.p));
    double* x = exec.upload(std::span<const double>(logit ? it.logits : it.p));
    typename Update::template state<Exec> rule(update_, exec, n, it);
    double* grad = exec.template scratch<double>(n);
    double* h = exec.template scratch<double>(n);
    exec.for_each(n, ops::fill{grad, 0.0});
    exec.for_each(n, ops::fill{h, 0.0});
    auto to_host = [&](const double* from, std::vector<double>& host) { exec.download(from, std::span<double>(host)); };
    continuous_state st;
    it.relaxed.reserve(static_cast<std::size_t>(iterations_));
    for (index_t t = it.iteration + 1; t <= iterations_; ++t) {
      auto step = exec.scope();  // this iteration's scratch
      const double val = relaxed(step, static_cast<const double*>(p), grad);
      it.relaxed.push_back(val);
      const double lr = step_size(t);
      step.for_each(m, dc::ascent_direction{c.rows, p, grad, h, logit});
      rule.step(step, c, h, x, lr, t);
      const double tau = projection_(step, c, x, sd, p);
      if constexpr (logit) it.tau = tau;
      const double integ = step.reduce(m, dc::spread_at{c.rows, p}, ops::plus{}, 0.0);
      it.iteration = t;
      if (hooks.on_iterate && dc::due(t, hooks.iterate_every)) hooks.on_iterate(t, p);
      const continuous_step_info info{t, iterations_, lr, val, integ / sd};
      if (hooks.on_step) hooks.on_step(info);
      const bool stopping = hooks.stop && hooks.stop(info);
      if (hooks.on_snapshot && (stopping || dc::due(t, hooks.snapshot_every))) {
        to_host(p, it.p);
        if (logit) to_host(x, it.logits);
        rule.save(exec, it);
        hooks.on_snapshot(it);
      }
      if (stopping) {
        st.stopped_early = t < iterations_;
        break;
      }
    }
    st.iterations_run = it.iteration;
    to_host(p, it.p);
    if (logit) {
      to_host(x, it.logits);
      st.logits.assign(static_cast<std::size_t>(n), -std::numeric_limits<double>::infinity());
      for (index_t i : candidates) st.logits[i] = it.logits[i] - it.tau;
    }
    st.p = std::move(it.p);
    st.relaxed = std::move(it.relaxed);
    return st;
  }

 private:
  index_t iterations_;
  Update update_;
  Projection projection_;
  Schedule schedule_;
};

/// @brief The learning-rate schedule of `continuous_settings`: from lr to lr * final_fraction.
[[nodiscard]] inline runtime_lr schedule_of(const continuous_settings& cfg) {
  const schedule_kind kind = cfg.decay == step_decay::linear   ? schedule_kind::linear
                             : cfg.decay == step_decay::cosine ? schedule_kind::cosine
                                                               : schedule_kind::constant;
  return runtime_lr{kind, cfg.lr, cfg.lr * cfg.final_fraction};
}

/// @brief Calls f with the `ascent` that `cfg` describes (its step rule, parameterisation and
/// schedule chosen at run time, as the program and Python choose them) and returns its result.
/// @throws invalid_input for settings outside the table's ranges
template <class F>
decltype(auto) with_ascent(const continuous_settings& cfg, F&& f) {
  validate(cfg);
  auto with_projection = [&](auto projection) -> decltype(auto) {
    using P = decltype(projection);
    switch (cfg.rule) {
      case step_rule::plain:
        return f(ascent<plain_update, P, runtime_lr>(cfg.iterations, {}, projection, schedule_of(cfg)));
      case step_rule::adam:
        return f(ascent<adam_update, P, runtime_lr>(cfg.iterations, adam_update{cfg.beta1, cfg.beta2, cfg.epsilon},
                                                    projection, schedule_of(cfg)));
      case step_rule::normalized: break;
    }
    return f(ascent<normalized_update, P, runtime_lr>(cfg.iterations, {}, projection, schedule_of(cfg)));
  };
  if (cfg.parameterization == continuous_parameterization::logits) return with_projection(sigmoid_projection{});
  return with_projection(capped_simplex_projection{});
}

/// @brief `ascent::run` of the ascent `cfg` describes (`with_ascent`).
template <class Exec, class Relaxed>
[[nodiscard]] continuous_state ascend(Exec& exec, const Relaxed& relaxed, index_t n, std::span<const index_t> candidates,
                                      index_t s, const continuous_settings& cfg, continuous_iterate it,
                                      const ascent_hooks& hooks = {}) {
  return with_ascent(cfg, [&](const auto& a) { return a.run(exec, relaxed, n, candidates, s, std::move(it), hooks); });
}

/// @brief `ascend` on the host from a relaxed function of host spans,
/// `double(std::span<const double> p, std::span<double> grad)` (deterministic).
template <class Relaxed>
  requires std::is_invocable_r_v<double, const Relaxed&, std::span<const double>, std::span<double>>
[[nodiscard]] continuous_state ascend_from(const Relaxed& relaxed, index_t n, std::span<const index_t> candidates,
                                           index_t s, const continuous_settings& cfg, continuous_iterate it,
                                           const ascent_hooks& hooks = {}) {
  host_executor exec;
  const auto nn = static_cast<std::size_t>(n);
  auto on_host = [&](host_executor& /*scope*/, const double* p, double* grad) {
    return relaxed(std::span<const double>(p, nn), std::span<double>(grad, nn));
  };
  return ascend(exec, on_host, n, candidates, s, cfg, std::move(it), hooks);
}

/// @brief `ascend_from` from `first_iterate`, with the hooks given one by one.
template <class Relaxed>
  requires std::is_invocable_r_v<double, const Relaxed&, std::span<const double>, std::span<double>>
[[nodiscard]] continuous_state optimize(const Relaxed& relaxed, index_t n, std::span<const index_t> candidates,
                                        index_t s, const continuous_settings& cfg,
                                        const std::function<void(const continuous_step_info&)>& on_step = {},
                                        const std::function<bool(const continuous_step_info&)>& stop = {},
                                        const std::function<void(index_t, std::span<const double>)>& on_iterate = {}) {
  ascent_hooks hooks{on_step, stop, {}, 0, {}};
  if (on_iterate) {  // p in a host executor's memory: on the host
    hooks.on_iterate = [&on_iterate, n](index_t t, const double* p) {
      on_iterate(t, std::span<const double>(p, static_cast<std::size_t>(n)));
    };
  }
  return ascend_from(relaxed, n, candidates, s, cfg, first_iterate(n, candidates, s, cfg), hooks);
}

}  // namespace datamask
