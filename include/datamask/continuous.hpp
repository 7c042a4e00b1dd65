// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The continuous learner (method.md section 6): gradient ascent of a relaxation F(p) of
/// f on the inclusion probabilities p (sum p = S, 0 <= p <= 1), read-out of the S largest p, and
/// an optional polish with exact incremental gains (1-swaps, then one 2-swap search at a 1-swap
/// optimum).
///
/// Why: the policy-gradient learner gives every item of a rollout the same scalar credit, so it
/// needs about 10^5 steps to come near greedy quality (benchmarks/RESULTS.md). Where each term of
/// f has a relaxation (`relaxable_objective`), the exact gradient of F costs one or two passes
/// over the block and carries a separate signal for every item.
///
/// Layout: `ascend_from` is the core (any relaxed function, any candidate set, from the first
/// iterate, as `optimize` runs it, or from a snapshot's `continuous_iterate`); `ascend_on_device`
/// is the same iteration on a device backend's executor (`relaxed_objective_on`, for objectives
/// that are `device_relaxable`), the step shared as `ascent_direction` and `ascent_update`; `read_out` and
/// `polish_swaps` are the two finishing steps; `continuous_learner` runs the three between the
/// phases every optimiser shares (phases.hpp), so S, the kept rows, the scales and the reported
/// f are those of the policy-gradient learner. Its settings (`continuous_settings`,
/// `polish_settings`) are a group of the settings table (settings.hpp).
///
/// Choice of the parameterisation and step rule (measured with benchmarks/continuous_tune.cpp
/// on the benchmark's synthetic block, share of naive greedy's gain over random subsets; the
/// numbers are in the comment of `continuous_settings`): projected gradient ascent on p with the
/// step normalised by its largest component and a linearly decaying step size. Projection keeps
/// exact zeros and ones (the read-out loses little, and DiSF's covariance skips the zero rows);
/// the normalised step makes the step size independent of the scale of f.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <span>
#include <tuple>
#include <utility>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "datamask/config.hpp"
#include "datamask/detail/parallel.hpp"
#include "datamask/error.hpp"
#include "datamask/objectives/detail/device_passes.hpp"
#include "datamask/backend/concept.hpp"
#include "datamask/backend/default.hpp"
#include "datamask/learner.hpp"
#include "datamask/objective_function.hpp"
#include "datamask/objectives/detail/relax_sums.hpp"
#include "datamask/objectives/disf.hpp"
#include "datamask/objectives/mix.hpp"
#include "datamask/objectives/pairwise.hpp"
#include "datamask/options.hpp"
#include "datamask/phases.hpp"
#include "datamask/settings.hpp"

namespace datamask {

/// @brief What a progress callback and a stop predicate see after each iteration.
struct continuous_step_info {
  index_t iteration = 0;  ///< 1-based
  index_t total = 0;
  double lr = 0.0;
  double relaxed = 0.0;     ///< F(p) before the step
  double integrality = 0.0; ///< sum_i p_i (1 - p_i) / S after the step: 0 when p is integral
};

/// @brief Everything the ascent carries from one iteration to the next, after `iteration`
/// iterations: a run continued from it (`ascend_from`, `continuous_options::initial`) computes
/// what the run that saved it computes, bit for bit, because an iteration reads nothing else
/// (the relaxation keeps nothing between calls, the step size is a function of the iteration).
struct continuous_iterate {
  index_t iteration = 0;        ///< iterations done
  std::vector<double> p;        ///< inclusion probabilities after the last step, one per row
  /// Logits parameterisation: L, one per row, with p = sigmoid(L - tau) on the candidates;
  /// projected: empty (the iterate is p itself).
  std::vector<double> logits;
  double tau = 0.0;             ///< logits: the shift of the last step (sum p = S)
  std::vector<double> m1;       ///< Adam's first moments, one per row; other step rules: empty
  std::vector<double> m2;       ///< Adam's second moments
  std::vector<double> relaxed;  ///< F(p) of each iteration done, before its step

  /// @brief The per-row vectors and tau as one vector of doubles, for a front end that stores a
  /// learner's state without knowing its parts: p, then (logits) L and tau, then (Adam) m1
  /// and m2. `iteration` and `relaxed` are not in it (a block's step and history carry them).
  [[nodiscard]] std::vector<double> pack() const {
    std::vector<double> v(p);
    v.insert(v.end(), logits.begin(), logits.end());
    if (!logits.empty()) v.push_back(tau);
    v.insert(v.end(), m1.begin(), m1.end());
    v.insert(v.end(), m2.begin(), m2.end());
    return v;
  }

  /// @brief The inverse of `pack` for a block of n rows ascended with `cfg`.
  /// @throws invalid_input ("continuous_state") when `values` does not hold that many values
  ///         (`ascend_from` checks the rest when it starts from the iterate)
  [[nodiscard]] static continuous_iterate unpack(std::span<const double> values, index_t n,
                                                 const continuous_settings& cfg, index_t iteration,
                                                 std::vector<double> relaxed) {
    const bool logit = cfg.parameterization == continuous_parameterization::logits;
    const bool adam = cfg.rule == step_rule::adam;
    const auto nn = static_cast<std::size_t>(n);
    const std::size_t expected = nn * (1 + (logit ? 1 : 0) + (adam ? 2 : 0)) + (logit ? 1 : 0);
    DATAMASK_EXPECTS(values.size() == expected, "continuous_state", "has ", values.size(),
                     " values, expected ", expected, " for ", n, " rows (", enum_name(cfg.parameterization),
                     ", step rule ", enum_name(cfg.rule), ")");
    continuous_iterate it;
    it.iteration = iteration;
    it.relaxed = std::move(relaxed);
    auto next = [&, at = std::size_t{0}](std::size_t count) mutable {
      std::vector<double> part(values.begin() + static_cast<std::ptrdiff_t>(at),
                               values.begin() + static_cast<std::ptrdiff_t>(at + count));
      at += count;
      return part;
    };
    it.p = next(nn);
    if (logit) {
      it.logits = next(nn);
      it.tau = next(1)[0];
    }
    if (adam) {
      it.m1 = next(nn);
      it.m2 = next(nn);
    }
    return it;
  }
};

/// @brief Settings of `continuous_learner`.
struct continuous_options {
  /// The settings shared with the policy-gradient learner: ratio or count, lambda, prune or
  /// prune_threshold, scaling and scales, calibration_subsets, quality aggregate, seed and block
  /// (they key the calibration subsets), active_fraction and min_active (the calibration
  /// batch), threads, normalized, and snapshot_every (here in iterations). Its rollout settings
  /// and hooks (rollouts, steps, init, readout, on_step, stop, on_snapshot, first_step,
  /// initial_logits, initial_best) are not used: the members below take their place.
  options common;
  continuous_settings ascent;
  polish_settings polish;
  std::function<void(const continuous_step_info&)> on_step;  ///< after each iteration
  std::function<bool(const continuous_step_info&)> stop;     ///< return true to stop early
  /// Checkpoints, as `options::on_snapshot` for the policy gradient: the whole iterate and the
  /// best tracked read-out (rows and f; `continuous_settings::track_every`), every
  /// `common.snapshot_every` iterations and after the iteration at which `stop` ended the run.
  std::function<void(const continuous_iterate&, const best_rollout&)> on_snapshot;
  /// A run to continue: a snapshot's iterate (empty `p`: start afresh) and best read-out. The
  /// selection and the history are those of the uninterrupted run.
  continuous_iterate initial;
  best_rollout initial_best;
};

/// @brief The iterate after `optimize`.
struct continuous_state {
  std::vector<double> p;        ///< inclusion probabilities, one per row (0 off the candidates)
  std::vector<double> logits;   ///< logits parameterisation: L - tau; projected: empty
  std::vector<double> relaxed;  ///< F(p) at each iteration, before its step
  index_t iterations_run = 0;
  bool stopped_early = false;
};

/// @brief What the polish did.
struct polish_report {
  index_t rounds = 0;
  index_t swaps = 0;
  index_t evaluations = 0;  ///< swap gains computed
  double gain = 0.0;        ///< sum of the exact gains of the swaps applied
};

namespace detail::continuous {

/// The smallest and largest y_i over the rows in c.
inline std::pair<double, double> range_of(std::span<const double> y, std::span<const index_t> c) {
  std::pair<double, double> r{std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  for (index_t i : c) {
    r.first = std::min(r.first, y[i]);
    r.second = std::max(r.second, y[i]);
  }
  return r;
}

/// tau such that sum_{i in c} clamp(y_i - tau, 0, 1) = s (bisection, then the exact value for the
/// free set found), and p_i = clamp(y_i - tau, 0, 1). Serial: the same bits on any thread count.
inline void project_capped_simplex(std::span<const double> y, std::span<const index_t> c, double s,
                                   std::span<double> p) {
  auto [lo, hi] = range_of(y, c);
  lo -= 1.0;  // sum = |c| >= s
  // Bisection on tau. Why the narrowing: at n = 10^6 a hundred passes over every candidate cost
  // more than the relaxation's gradient; once tau is known to lie in [lo, hi], rows with
  // y <= lo give 0 and rows with y >= hi + 1 give 1 for every tau there, so later passes run
  // over the rows in between only (after the ascent's first steps, a few per cent of them).
  std::vector<index_t> band;
  double ones_fixed = 0.0;
  bool narrowed = false;
  auto total = [&](double tau) {
    double t = ones_fixed;
    if (narrowed) {
      for (index_t i : band) t += std::clamp(y[i] - tau, 0.0, 1.0);
    } else {
      for (index_t i : c) t += std::clamp(y[i] - tau, 0.0, 1.0);
    }
    return t;
  };
  for (int it = 0; it < 100 && hi - lo > 1e-15 * std::max(1.0, std::abs(hi)); ++it) {
    if (it == 8) {
      for (index_t i : c) {
        if (y[i] >= hi + 1.0) ones_fixed += 1.0;
        else if (y[i] > lo) band.push_back(i);
      }
      narrowed = true;
    }
    const double mid = 0.5 * (lo + hi);
    (total(mid) > s ? lo : hi) = mid;
  }
  double tau = 0.5 * (lo + hi);
  // Exact tau for the free set {0 < y - tau < 1}, kept when it leaves that set unchanged.
  double free_sum = 0.0;
  double ones = 0.0;
  double free_count = 0.0;
  for (index_t i : c) {
    const double z = y[i] - tau;
    if (z >= 1.0) {
      ones += 1.0;
    } else if (z > 0.0) {
      free_sum += y[i];
      free_count += 1.0;
    }
  }
  if (free_count > 0.0) {
    const double exact = (free_sum + ones - s) / free_count;
    bool same = true;
    for (index_t i : c) {
      const double z0 = y[i] - tau;
      const double z1 = y[i] - exact;
      if ((z0 >= 1.0) != (z1 >= 1.0) || (z0 > 0.0) != (z1 > 0.0)) {
        same = false;
        break;
      }
    }
    if (same) tau = exact;
  }
  for (index_t i : c) p[i] = std::clamp(y[i] - tau, 0.0, 1.0);
}

DATAMASK_HOST_DEVICE inline double sigmoid(double z) {
  return z >= 0.0 ? 1.0 / (1.0 + ::exp(-z)) : ::exp(z) / (1.0 + ::exp(z));
}

/// The step size of iteration t: the learner's own schedules, from lr to lr * final_fraction.
inline double step_size(const continuous_settings& s, index_t t) {
  const double lo = s.lr * s.final_fraction;
  switch (s.decay) {
    case step_decay::linear: return linear_lr{s.lr, lo}(t, s.iterations);
    case step_decay::cosine: return cosine_lr{s.lr, lo}(t, s.iterations);
    case step_decay::constant: break;
  }
  return s.lr;
}

/// Whether iteration t is one of every `every` (0: none).
inline bool due(index_t t, index_t every) { return every > 0 && t % every == 0; }

/// std::clamp(z, 0.0, 1.0), callable on a device.
DATAMASK_HOST_DEVICE inline double clamp01(double z) { return z < 0.0 ? 0.0 : (1.0 < z ? 1.0 : z); }

/// The ascent direction of candidate k (row i = cand[k]): h_i = dF/dp_i, or (logits)
/// dF/dL_i = p_i (1 - p_i) dF/dp_i. One home for the host and the device loops.
struct ascent_direction {
  const index_t* cand;
  const double* p;
  const double* grad;
  double* h;
  bool logit;
  DATAMASK_HOST_DEVICE void operator()(index_t k) const {
    const index_t i = cand[k];
    h[i] = logit ? p[i] * (1.0 - p[i]) * grad[i] : grad[i];
  }
};

/// The step of candidate k by the rule: plain x += lr h, normalised x += lr h / max|h| (no step
/// when h = 0), Adam with bias-corrected moments (c1, c2: 1 - beta^t).
struct ascent_update {
  const index_t* cand;
  const double* h;
  double* x;
  double* m1;
  double* m2;
  step_rule rule;
  double lr;
  double hmax;
  double beta1;
  double beta2;
  double c1;
  double c2;
  double epsilon;
  DATAMASK_HOST_DEVICE void operator()(index_t k) const {
    const index_t i = cand[k];
    if (rule == step_rule::plain) {
      x[i] += lr * h[i];
    } else if (rule == step_rule::normalized) {
      if (hmax > 0.0) x[i] += lr * h[i] / hmax;
    } else {
      m1[i] = beta1 * m1[i] + (1.0 - beta1) * h[i];
      m2[i] = beta2 * m2[i] + (1.0 - beta2) * h[i] * h[i];
      x[i] += lr * (m1[i] / c1) / (::sqrt(m2[i] / c2) + epsilon);
    }
  }
};

/// The update functor of iteration t (h, the moments and x at the given pointers).
inline ascent_update update_for(const continuous_settings& cfg, index_t t, const index_t* cand, const double* h,
                                double* x, double* m1, double* m2, double hmax) {
  const double c1 = cfg.rule == step_rule::adam ? 1.0 - std::pow(cfg.beta1, static_cast<double>(t)) : 1.0;
  const double c2 = cfg.rule == step_rule::adam ? 1.0 - std::pow(cfg.beta2, static_cast<double>(t)) : 1.0;
  return ascent_update{cand, h, x, m1, m2, cfg.rule, step_size(cfg, t), hmax, cfg.beta1, cfg.beta2, c1, c2,
                       cfg.epsilon};
}

/// tau such that sum_{i in c} sigmoid(L_i - tau) = s (bisection); p_i = sigmoid(L_i - tau).
inline double sigmoid_shift(std::span<const double> l, std::span<const index_t> c, double s,
                            std::span<double> p) {
  auto [lo, hi] = range_of(l, c);
  lo -= 50.0;
  hi += 50.0;
  for (int it = 0; it < 200 && hi - lo > 1e-13 * std::max(1.0, std::abs(hi)); ++it) {
    const double mid = 0.5 * (lo + hi);
    double t = 0.0;
    for (index_t i : c) t += sigmoid(l[i] - mid);
    (t > s ? lo : hi) = mid;
  }
  const double tau = 0.5 * (lo + hi);
  for (index_t i : c) p[i] = sigmoid(l[i] - tau);
  return tau;
}

/// Rows ordered by key descending, ties to the smaller id; the first `s` of them.
inline std::vector<index_t> top_by(std::span<const double> key, std::span<const id_t> ids,
                                   std::span<const index_t> candidates, index_t s, bool largest) {
  std::vector<index_t> rows(candidates.begin(), candidates.end());
  auto before = [&](index_t a, index_t b) {
    if (key[a] != key[b]) return largest ? key[a] > key[b] : key[a] < key[b];
    return ids[a] < ids[b];
  };
  s = std::min<index_t>(s, static_cast<index_t>(rows.size()));
  // The order is total (ties to the smaller id), so selecting the first s and sorting them gives
  // partial_sort's result, in O(n + s log s) instead of O(n log s).
  std::nth_element(rows.begin(), rows.begin() + s, rows.end(), before);
  rows.resize(static_cast<std::size_t>(s));
  std::sort(rows.begin(), rows.end(), before);
  return rows;
}

}  // namespace detail::continuous

namespace detail::continuous {

/// Refuses an iterate that cannot be the ascent's state after `it.iteration` iterations of `cfg`
/// on n rows restricted to `candidates` (input name "continuous_state"): a damaged or foreign
/// snapshot would otherwise give a silently wrong selection.
inline void check_iterate(const continuous_iterate& it, index_t n, std::span<const index_t> candidates,
                          const continuous_settings& cfg) {
  const char* input = "continuous_state";
  const auto nn = static_cast<std::size_t>(n);
  const bool logit = cfg.parameterization == continuous_parameterization::logits;
  const bool adam = cfg.rule == step_rule::adam;
  DATAMASK_EXPECTS(it.iteration >= 0 && it.iteration <= cfg.iterations, input, "is at iteration ", it.iteration,
                   ", outside [0, ", cfg.iterations, "]");
  DATAMASK_EXPECTS(it.relaxed.size() == static_cast<std::size_t>(it.iteration), input, "has ", it.relaxed.size(),
                   " relaxed values for ", it.iteration, " iterations");
  DATAMASK_EXPECTS(it.p.size() == nn && it.logits.size() == (logit ? nn : 0) && it.m1.size() == (adam ? nn : 0) &&
                       it.m2.size() == it.m1.size(),
                   input, "does not hold one p", logit ? ", logit" : "", adam ? ", and two Adam moments" : "",
                   " per row (", n, " rows)");
  DATAMASK_EXPECTS(std::isfinite(it.tau), input, "tau is not finite");
  std::vector<char> cand(nn, 0);
  for (index_t i : candidates) cand[static_cast<std::size_t>(i)] = 1;
  for (std::size_t i = 0; i < nn; ++i) {
    DATAMASK_EXPECTS(it.p[i] >= 0.0 && it.p[i] <= 1.0 && (cand[i] || it.p[i] == 0.0), input, "p of row ", i, " is ",
                     it.p[i], cand[i] ? ", outside [0, 1]" : ", but the row is not a candidate");
    DATAMASK_EXPECTS((!logit || std::isfinite(it.logits[i])) && (!adam || (std::isfinite(it.m1[i]) &&
                                                                          std::isfinite(it.m2[i]) && it.m2[i] >= 0.0)),
                     input, "row ", i, " has a non-finite logit or moment");
  }
}

}  // namespace detail::continuous

/// @brief The ascent's first iterate on n rows: p = S / m on each of the m candidates (0 on the
/// other rows), zero logits and moments, no iteration done.
[[nodiscard]] inline continuous_iterate first_iterate(index_t n, std::span<const index_t> candidates, index_t s,
                                                      const continuous_settings& cfg) {
  const auto nn = static_cast<std::size_t>(n);
  continuous_iterate it;
  it.p.assign(nn, 0.0);
  for (index_t i : candidates) it.p[i] = static_cast<double>(s) / static_cast<double>(candidates.size());
  if (cfg.parameterization == continuous_parameterization::logits) it.logits.assign(nn, 0.0);
  if (cfg.rule == step_rule::adam) {
    it.m1.assign(nn, 0.0);
    it.m2.assign(nn, 0.0);
  }
  return it;
}

/// @brief What `ascend_from` calls back. Every member may be empty.
struct ascent_hooks {
  std::function<void(const continuous_step_info&)> on_step;  ///< after each iteration
  std::function<bool(const continuous_step_info&)> stop;     ///< return true to stop early
  /// After each step, before `on_step`: the iteration and the new p.
  std::function<void(index_t, std::span<const double>)> on_iterate;
  /// The whole iterate every `snapshot_every` iterations (0: never) and after the iteration at
  /// which `stop` ended the run, after `on_iterate`, `on_step` and `stop`.
  index_t snapshot_every = 0;
  std::function<void(const continuous_iterate&)> on_snapshot;
  /// `on_iterate` is called at the iterations divisible by this only (a device ascent copies p
  /// to the host for it then).
  index_t iterate_every = 1;
};

/// @brief The continuous ascent from a given iterate (`first_iterate`, or a snapshot's) to
/// `cfg.iterations`: see `optimize`. The result after a snapshot at iteration k continued from
/// it is the result of the run that took the snapshot, bit for bit (history included).
/// @throws invalid_input for bad settings, or ("continuous_state") an iterate that does not fit
///         n, the candidates and `cfg`
template <class Relaxed>
  requires std::is_invocable_r_v<double, const Relaxed&, std::span<const double>, std::span<double>>
[[nodiscard]] continuous_state ascend_from(const Relaxed& relaxed, index_t n, std::span<const index_t> candidates,
                                           index_t s, const continuous_settings& cfg, continuous_iterate it,
                                           const ascent_hooks& hooks = {}) {
  validate(cfg);
  DATAMASK_EXPECTS(static_cast<index_t>(candidates.size()) >= s && s >= 1, "candidates", "has ",
                   candidates.size(), " rows, fewer than S = ", s);
  detail::continuous::check_iterate(it, n, candidates, cfg);
  namespace dc = detail::continuous;
  const auto sd = static_cast<double>(s);
  const auto nn = static_cast<std::size_t>(n);
  const bool logit = cfg.parameterization == continuous_parameterization::logits;
  // The iterate the step moves: L, or (projected) p before its projection.
  std::vector<double> projected;
  if (!logit) projected = it.p;
  std::vector<double>& x = logit ? it.logits : projected;
  std::vector<double> grad(nn, 0.0);
  std::vector<double> h(nn, 0.0);
  std::vector<double>& m1 = it.m1;
  std::vector<double>& m2 = it.m2;
  continuous_state st;
  it.relaxed.reserve(static_cast<std::size_t>(cfg.iterations));
  for (index_t t = it.iteration + 1; t <= cfg.iterations; ++t) {
    const double val = relaxed(std::span<const double>(it.p), std::span<double>(grad));
    it.relaxed.push_back(val);
    const double lr = dc::step_size(cfg, t);
    double hmax = 0.0;
    const auto m = static_cast<index_t>(candidates.size());
    const dc::ascent_direction direction{candidates.data(), it.p.data(), grad.data(), h.data(), logit};
    for (index_t k = 0; k < m; ++k) {
      direction(k);
      hmax = std::max(hmax, std::abs(h[candidates[k]]));
    }
    const dc::ascent_update update = dc::update_for(cfg, t, candidates.data(), h.data(), x.data(), m1.data(),
                                                    m2.data(), hmax);
    for (index_t k = 0; k < m; ++k) update(k);
    if (logit) {
      it.tau = dc::sigmoid_shift(x, candidates, sd, it.p);
    } else {
      dc::project_capped_simplex(x, candidates, sd, it.p);
      for (index_t i : candidates) x[i] = it.p[i];
    }
    double integ = 0.0;
    for (index_t i : candidates) integ += it.p[i] * (1.0 - it.p[i]);
    it.iteration = t;
    if (hooks.on_iterate && dc::due(t, hooks.iterate_every)) hooks.on_iterate(t, std::span<const double>(it.p));
    const continuous_step_info info{t, cfg.iterations, lr, val, integ / sd};
    if (hooks.on_step) hooks.on_step(info);
    const bool stopping = hooks.stop && hooks.stop(info);
    if (hooks.on_snapshot && (stopping || dc::due(t, hooks.snapshot_every))) {
      hooks.on_snapshot(it);
    }
    if (stopping) {
      st.stopped_early = t < cfg.iterations;
      break;
    }
  }
  st.iterations_run = it.iteration;
  if (logit) {
    st.logits.assign(nn, -std::numeric_limits<double>::infinity());
    for (index_t i : candidates) st.logits[i] = x[i] - it.tau;
  }
  st.p = std::move(it.p);
  st.relaxed = std::move(it.relaxed);
  return st;
}

/// @brief The continuous ascent: maximises a relaxed function F over {0 <= p <= 1, sum p = S}
/// restricted to `candidates` (other rows hold p = 0), from `first_iterate`.
///
/// @param relaxed callable `double(std::span<const double> p, std::span<double> grad)`: F(p),
///        and dF/dp written for every row (deterministic)
/// @param n rows of the block
/// @param candidates rows that may be selected (sorted, distinct), at least S of them
/// @param s the selection size S
/// @param cfg the parameterisation, step rule and schedule
/// @param on_step, stop progress callback and early-stop predicate (may be empty)
/// @param on_iterate called after each step with the iteration and the new p (may be empty)
/// @return the final p (and logits), the relaxed value per iteration
/// @throws invalid_input for bad settings
template <class Relaxed>
  requires std::is_invocable_r_v<double, const Relaxed&, std::span<const double>, std::span<double>>
[[nodiscard]] continuous_state optimize(const Relaxed& relaxed, index_t n,
                                        std::span<const index_t> candidates, index_t s,
                                        const continuous_settings& cfg,
                                        const std::function<void(const continuous_step_info&)>& on_step = {},
                                        const std::function<bool(const continuous_step_info&)>& stop = {},
                                        const std::function<void(index_t, std::span<const double>)>& on_iterate = {}) {
  return ascend_from(relaxed, n, candidates, s, cfg, first_iterate(n, candidates, s, cfg),
                     ascent_hooks{on_step, stop, on_iterate, 0, {}});
}

namespace detail::continuous {

/// Terms of the device projections' folds over the candidates (k indexes `cand`).
struct value_at {
  const index_t* cand;
  const double* y;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const { return y[cand[k]]; }
};
struct clamped_at {
  const index_t* cand;
  const double* y;
  double tau;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const { return clamp01(y[cand[k]] - tau); }
};
struct sigmoid_at {
  const index_t* cand;
  const double* l;
  double tau;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const { return sigmoid(l[cand[k]] - tau); }
};
/// part 0: y_i on the free set {0 < y_i - tau < 1}; 1: 1 on the ones; 2: 1 on the free set.
struct free_part {
  const index_t* cand;
  const double* y;
  double tau;
  int part;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const {
    const double z = y[cand[k]] - tau;
    if (part == 1) return z >= 1.0 ? 1.0 : 0.0;
    if (z >= 1.0 || !(z > 0.0)) return 0.0;
    return part == 0 ? y[cand[k]] : 1.0;
  }
};
/// 1 where tau and `exact` put y_i in different parts (zeros, free, ones).
struct part_changed {
  const index_t* cand;
  const double* y;
  double tau;
  double exact;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const {
    const double z0 = y[cand[k]] - tau;
    const double z1 = y[cand[k]] - exact;
    return ((z0 >= 1.0) != (z1 >= 1.0) || (z0 > 0.0) != (z1 > 0.0)) ? 1.0 : 0.0;
  }
};
/// p_i = clamp(y_i - tau, 0, 1), or (sigmoid) sigmoid(y_i - tau); with `copy_back`, y_i = p_i.
struct write_p {
  const index_t* cand;
  double* y;
  double tau;
  double* p;
  bool sigmoid_map;
  bool copy_back;
  DATAMASK_HOST_DEVICE void operator()(index_t k) const {
    const index_t i = cand[k];
    p[i] = sigmoid_map ? sigmoid(y[i] - tau) : clamp01(y[i] - tau);
    if (copy_back) y[i] = p[i];
  }
};
/// p_i (1 - p_i), the integrality's term.
struct spread_at {
  const index_t* cand;
  const double* p;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const { return p[cand[k]] * (1.0 - p[cand[k]]); }
};
/// |h_i|, for the normalised step.
struct magnitude_at {
  const index_t* cand;
  const double* h;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const { return h[cand[k]] < 0.0 ? -h[cand[k]] : h[cand[k]]; }
};
/// out_i += w v_i (v null: out_i = 0).
struct add_scaled {
  double* out;
  const double* v;
  double w;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const { out[i] = v == nullptr ? 0.0 : out[i] + w * v[i]; }
};
/// q_i p_i, the quality term's dot product.
struct product_at {
  const double* q;
  const double* p;
  DATAMASK_HOST_DEVICE double operator()(index_t i) const { return q[i] * p[i]; }
};

/// The device buffers one fold needs and the candidates: what the projections read.
struct device_candidates {
  const index_t* rows;
  index_t count;
  double* partials;  ///< `device_passes::fold_scratch(count)` doubles
};

template <class Exec, class Term, class Op>
double fold_over(Exec& exec, const device_candidates& c, Term term, Op op, double init) {
  return device_passes::fold(exec, c.partials, c.count, term, op, init);
}

/// `project_capped_simplex` on a device: the same bisection (without the narrowing, whose band
/// would need a compaction; each total is one parallel pass) and the same exact-tau refinement,
/// every sum a fixed-order fold: deterministic, equal to the host's to rounding. With
/// `copy_back`, y becomes p (the projected iterate).
template <class Exec>
void project_capped_simplex_on(Exec& exec, const device_candidates& c, double* y, double s, double* p,
                               bool copy_back) {
  namespace dp = device_passes;
  const value_at at{c.rows, y};
  double lo = fold_over(exec, c, at, dp::min_op{}, std::numeric_limits<double>::infinity()) - 1.0;
  double hi = fold_over(exec, c, at, dp::max_op{}, -std::numeric_limits<double>::infinity());
  for (int it = 0; it < 100 && hi - lo > 1e-15 * std::max(1.0, std::abs(hi)); ++it) {
    const double mid = 0.5 * (lo + hi);
    (fold_over(exec, c, clamped_at{c.rows, y, mid}, dp::plus_op{}, 0.0) > s ? lo : hi) = mid;
  }
  double tau = 0.5 * (lo + hi);
  const double free_sum = fold_over(exec, c, free_part{c.rows, y, tau, 0}, dp::plus_op{}, 0.0);
  const double ones = fold_over(exec, c, free_part{c.rows, y, tau, 1}, dp::plus_op{}, 0.0);
  const double free_count = fold_over(exec, c, free_part{c.rows, y, tau, 2}, dp::plus_op{}, 0.0);
  if (free_count > 0.0) {
    const double exact = (free_sum + ones - s) / free_count;
    if (fold_over(exec, c, part_changed{c.rows, y, tau, exact}, dp::plus_op{}, 0.0) == 0.0) tau = exact;
  }
  exec.for_each(c.count, write_p{c.rows, y, tau, p, false, copy_back});
}

/// `sigmoid_shift` on a device (the same bisection, fixed-order sums); returns tau.
template <class Exec>
double sigmoid_shift_on(Exec& exec, const device_candidates& c, double* l, double s, double* p) {
  namespace dp = device_passes;
  const value_at at{c.rows, l};
  double lo = fold_over(exec, c, at, dp::min_op{}, std::numeric_limits<double>::infinity()) - 50.0;
  double hi = fold_over(exec, c, at, dp::max_op{}, -std::numeric_limits<double>::infinity()) + 50.0;
  for (int it = 0; it < 200 && hi - lo > 1e-13 * std::max(1.0, std::abs(hi)); ++it) {
    const double mid = 0.5 * (lo + hi);
    (fold_over(exec, c, sigmoid_at{c.rows, l, mid}, dp::plus_op{}, 0.0) > s ? lo : hi) = mid;
  }
  const double tau = 0.5 * (lo + hi);
  exec.for_each(c.count, write_p{c.rows, l, tau, p, true, false});
  return tau;
}

/// The iterate's per-row arrays on the device.
struct device_iterate {
  double* p = nullptr;
  double* x = nullptr;  ///< L (logits) or p before its projection
  double* m1 = nullptr;
  double* m2 = nullptr;
};

}  // namespace detail::continuous

/// @brief `ascend_from` on a backend with a device (`thrust_backend`): the same iteration, with
/// p, the gradient, the step and the projection on the device through executors of type Exec.
/// Per iteration only scalars cross (F, the folds' results), plus p every
/// `hooks.iterate_every` iterations for `on_iterate`, and the whole iterate for a snapshot.
///
/// @param relaxed callable `double(Exec& exec, const double* p, double* grad)` on device
///        memory (see `relaxed_objective_on`)
/// @return what `ascend_from` returns; the same selection to rounding: the reductions are
///         fixed-order folds (the same bits on any thread count) but not the host's serial order
template <class Exec, class Relaxed>
[[nodiscard]] continuous_state ascend_on_device(const Relaxed& relaxed, index_t n, std::span<const index_t> candidates,
                                                index_t s, const continuous_settings& cfg, continuous_iterate it,
                                                const ascent_hooks& hooks = {}) {
  namespace dc = detail::continuous;
  validate(cfg);
  DATAMASK_EXPECTS(static_cast<index_t>(candidates.size()) >= s && s >= 1, "candidates", "has ",
                   candidates.size(), " rows, fewer than S = ", s);
  dc::check_iterate(it, n, candidates, cfg);
  const auto sd = static_cast<double>(s);
  const bool logit = cfg.parameterization == continuous_parameterization::logits;
  const bool adam = cfg.rule == step_rule::adam;
  const auto m = static_cast<index_t>(candidates.size());
  Exec keep;  // the buffers of the whole run
  const dc::device_candidates cand{keep.upload(candidates), m,
                                   keep.template scratch<double>(detail::device_passes::fold_scratch(m))};
  dc::device_iterate d;
  d.p = keep.upload(std::span<const double>(it.p));
  d.x = keep.upload(std::span<const double>(logit ? it.logits : it.p));
  if (adam) {
    d.m1 = keep.upload(std::span<const double>(it.m1));
    d.m2 = keep.upload(std::span<const double>(it.m2));
  }
  double* grad = keep.template scratch<double>(n);
  double* h = keep.template scratch<double>(n);
  keep.for_each(n, dc::add_scaled{grad, nullptr, 0.0});
  keep.for_each(n, dc::add_scaled{h, nullptr, 0.0});
  auto to_host = [&](const double* dev, std::vector<double>& host) { keep.download(dev, std::span<double>(host)); };
  continuous_state st;
  it.relaxed.reserve(static_cast<std::size_t>(cfg.iterations));
  for (index_t t = it.iteration + 1; t <= cfg.iterations; ++t) {
    Exec step;  // this iteration's scratch
    const double val = relaxed(step, static_cast<const double*>(d.p), grad);
    it.relaxed.push_back(val);
    const double lr = dc::step_size(cfg, t);
    step.for_each(m, dc::ascent_direction{cand.rows, d.p, grad, h, logit});
    const double hmax = cfg.rule == step_rule::normalized
                            ? dc::fold_over(step, cand, dc::magnitude_at{cand.rows, h}, detail::device_passes::max_op{}, 0.0)
                            : 0.0;
    step.for_each(m, dc::update_for(cfg, t, cand.rows, h, d.x, d.m1, d.m2, hmax));
    if (logit) {
      it.tau = dc::sigmoid_shift_on(step, cand, d.x, sd, d.p);
    } else {
      dc::project_capped_simplex_on(step, cand, d.x, sd, d.p, true);
    }
    const double integ = dc::fold_over(step, cand, dc::spread_at{cand.rows, d.p}, detail::device_passes::plus_op{}, 0.0);
    it.iteration = t;
    if (hooks.on_iterate && dc::due(t, hooks.iterate_every)) {
      to_host(d.p, it.p);
      hooks.on_iterate(t, std::span<const double>(it.p));
    }
    const continuous_step_info info{t, cfg.iterations, lr, val, integ / sd};
    if (hooks.on_step) hooks.on_step(info);
    const bool stopping = hooks.stop && hooks.stop(info);
    if (hooks.on_snapshot && (stopping || dc::due(t, hooks.snapshot_every))) {
      to_host(d.p, it.p);
      if (logit) to_host(d.x, it.logits);
      if (adam) {
        to_host(d.m1, it.m1);
        to_host(d.m2, it.m2);
      }
      hooks.on_snapshot(it);
    }
    if (stopping) {
      st.stopped_early = t < cfg.iterations;
      break;
    }
  }
  st.iterations_run = it.iteration;
  to_host(d.p, it.p);
  if (logit) {
    to_host(d.x, it.logits);
    st.logits.assign(static_cast<std::size_t>(n), -std::numeric_limits<double>::infinity());
    for (index_t i : candidates) st.logits[i] = it.logits[i] - it.tau;
  }
  st.p = std::move(it.p);
  st.relaxed = std::move(it.relaxed);
  return st;
}

/// @brief The read-out: the S candidates with the largest key (p, or the logits, which order
/// alike but resolve more), ties to the smaller id, in that order.
[[nodiscard]] inline std::vector<index_t> read_out(std::span<const double> key, std::span<const id_t> ids,
                                                   std::span<const index_t> candidates, index_t s) {
  return detail::continuous::top_by(key, ids, candidates, s, true);
}

namespace detail::continuous {

/// Exact swap gains of one term of f: `prepare(rows)` on the current selection, `delta(r, a)`
/// the change of the term's raw value when row r leaves and row a joins, `apply(r, a)`.
/// Generic objective: by evaluation, O(cost of the objective) per pair.
template <class D, class T>
struct swap_term {
  const D* obj = nullptr;
  subset_view<T> base;
  std::vector<index_t> rows;
  double value = 0.0;
  std::vector<index_t> scratch;

  void init(const D& o, const subset_view<T>& v, std::span<const index_t> sel) {
    obj = &o;
    base = v;
    rows.assign(sel.begin(), sel.end());
    value = eval(rows);
  }
  double eval(const std::vector<index_t>& r) const {
    subset_view<T> s = base;
    s.subset = index_view(std::span<const index_t>(r));
    return static_cast<double>((*obj)(s));
  }
  void prepare(std::span<const index_t> /*removals*/, std::span<const index_t> /*additions*/) {}
  double delta(index_t r, index_t a) {
    scratch = rows;
    *std::find(scratch.begin(), scratch.end(), r) = a;
    return eval(scratch) - value;
  }
  void apply(index_t r, index_t a) {
    *std::find(rows.begin(), rows.end(), r) = a;
    value = eval(rows);
  }
};

/// Pairwise similarity: P = ||s||^2 - sum c_i over the set; a swap changes P by
/// 2 c_r - 2 u_r.s + 2 u_a.s - 2 u_r.u_a. O(d) per pair once u.s is known for the candidates.
template <class T>
struct swap_term<pairwise_similarity, T> {
  subset_view<T> base;
  Eigen::VectorXd s;
  double k = 0.0;
  std::vector<double> us;  // u_i . s for the candidates of the round, by row
  index_t d = 0;

  Eigen::VectorXd unit(index_t i) const {
    return detail::relax::row_map<T>(base.embeddings.row(i), d).template cast<double>() * base.inv_norms[i];
  }
  double c(index_t i) const { return base.sq_norms[i] * base.inv_norms[i] * base.inv_norms[i]; }
  void init(const pairwise_similarity& /*o*/, const subset_view<T>& v, std::span<const index_t> sel) {
    base = v;
    d = v.embeddings.cols;
    s = Eigen::VectorXd::Zero(d);
    for (index_t i : sel) s += unit(i);
    k = static_cast<double>(sel.size());
    us.assign(static_cast<std::size_t>(v.embeddings.rows), 0.0);
  }
  void prepare(std::span<const index_t> removals, std::span<const index_t> additions) {
    for (index_t i : removals) us[i] = unit(i).dot(s);
    for (index_t i : additions) us[i] = unit(i).dot(s);
  }
  double delta(index_t r, index_t a) const {
    if (k < 2.0) return 0.0;
    const double dp = 2.0 * c(r) - 2.0 * us[r] + 2.0 * us[a] - 2.0 * unit(r).dot(unit(a));
    return -dp / (k * (k - 1.0));
  }
  void apply(index_t r, index_t a) { s += unit(a) - unit(r); }
};

/// DiSF: the scatter M = sum (x - c)(x - c)^T and m = sum (x - c) of the set, shifted by the
/// set's mean c at the start (the covariance does not depend on the shift; the shift avoids
/// cancellation); a swap is a rank-two change of M, and the term is recomputed from
/// Sigma = (M - m m^T / k) / (k - 1) in O(d^2).
template <class T>
struct swap_term<disf, T> {
  subset_view<T> base;
  Eigen::VectorXd c;
  Eigen::MatrixXd mm;
  Eigen::VectorXd m;
  double k = 0.0;
  double value = 0.0;
  index_t d = 0;

  Eigen::VectorXd row(index_t i) const {
    return detail::relax::row_map<T>(base.embeddings.row(i), d).template cast<double>() - c;
  }
  double score(const Eigen::MatrixXd& msc, const Eigen::VectorXd& msum) const {
    if (k < 2.0) return 0.0;
    Eigen::MatrixXd sigma = (msc - msum * msum.transpose() / k) / (k - 1.0);
    const Eigen::ArrayXd inv = 1.0 / (sigma.diagonal().array() + disf::epsilon);
    const double all = (sigma.array().square() * (inv.matrix() * inv.matrix().transpose()).array()).sum();
    const double diag = (sigma.diagonal().array().square() * inv.square()).sum();
    return -disf::scale * (all - diag);
  }
  /// The term after the swap (r out, a in), in one pass over the lower triangle without
  /// temporaries: the swap's exact gain costs about d^2 / 2 multiply-adds (a d x d temporary per
  /// pair made polish on DiSF cost seconds per round at d = 256).
  double swapped(const Eigen::VectorXd& yr, const Eigen::VectorXd& ya) const {
    if (k < 2.0) return 0.0;
    thread_local Eigen::VectorXd ms;
    thread_local Eigen::VectorXd inv;
    ms = m - yr + ya;
    inv.resize(d);
    const double ik = 1.0 / k;
    const double ik1 = 1.0 / (k - 1.0);
    for (index_t a = 0; a < d; ++a) {
      const double s_aa = (mm(a, a) - yr(a) * yr(a) + ya(a) * ya(a) - ms(a) * ms(a) * ik) * ik1;
      inv(a) = 1.0 / (s_aa + disf::epsilon);
    }
    // Multiplications only in the inner loop (no division), so the compiler vectorises it.
    const double* pr = yr.data();
    const double* pa = ya.data();
    const double* pm = ms.data();
    const double* pi = inv.data();
    double off = 0.0;
    for (index_t b = 0; b < d; ++b) {
      const double* col = mm.col(b).data();
      const double rb = pr[b];
      const double ab = pa[b];
      const double mb = pm[b] * ik;
      double acc = 0.0;
      for (index_t a = b + 1; a < d; ++a) {
        const double s_ab = (col[a] - pr[a] * rb + pa[a] * ab - pm[a] * mb) * ik1;
        acc += s_ab * s_ab * pi[a];
      }
      off += acc * pi[b];
    }
    return -disf::scale * 2.0 * off;
  }
  void init(const disf& /*o*/, const subset_view<T>& v, std::span<const index_t> sel) {
    base = v;
    d = v.embeddings.cols;
    k = static_cast<double>(sel.size());
    c = Eigen::VectorXd::Zero(d);
    for (index_t i : sel) c += detail::relax::row_map<T>(v.embeddings.row(i), d).template cast<double>();
    c /= std::max(1.0, k);
    detail::disf_impl::check_d_memory(d, 3, "the polish");  // the scatter, Sigma and a product in score
    mm = Eigen::MatrixXd::Zero(d, d);
    m = Eigen::VectorXd::Zero(d);
    // Blocks of rows, one symmetric rank update each (one rank-one update per row ran at vector
    // speed: most of polish's time at S = 10^4, d = 256). Serial, blocks in order: deterministic.
    constexpr std::size_t block = 256;
    Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> y;
    for (std::size_t b0 = 0; b0 < sel.size(); b0 += block) {
      const auto cnt = static_cast<index_t>(std::min(block, sel.size() - b0));
      y.resize(cnt, d);
      for (index_t r = 0; r < cnt; ++r) y.row(r) = row(sel[b0 + static_cast<std::size_t>(r)]).transpose();
      mm.selfadjointView<Eigen::Lower>().rankUpdate(y.transpose());
      m += y.colwise().sum().transpose();
    }
    mm = mm.selfadjointView<Eigen::Lower>();
    value = score(mm, m);
  }
  void prepare(std::span<const index_t> /*removals*/, std::span<const index_t> /*additions*/) {}
  double delta(index_t r, index_t a) const {
    const Eigen::VectorXd yr = row(r);
    const Eigen::VectorXd ya = row(a);
    return swapped(yr, ya) - value;
  }
  void apply(index_t r, index_t a) {
    const Eigen::VectorXd yr = row(r);
    const Eigen::VectorXd ya = row(a);
    mm += ya * ya.transpose() - yr * yr.transpose();
    m += ya - yr;
    value = score(mm, m);
  }
};

template <class T, class... Ds>
std::tuple<swap_term<Ds, T>...> swap_terms_for(const diversity_mix<Ds...>&);

}  // namespace detail::continuous

/// @brief The relaxation of the f an `objective_function` computes: the same terms, weights and
/// scales, each term replaced by its relaxation (quality: q . p / S for the mean, q . p for the
/// sum). Every diversity term with a positive weight must be a `relaxable_objective`.
/// @return a callable `double(std::span<const double> p, std::span<double> grad)`
template <class T, class Diversity>
[[nodiscard]] auto relaxed_objective(const objective_function<T, Diversity>& f, index_t s, int threads) {
  return [&f, s, threads](std::span<const double> p, std::span<double> grad) -> double {
    const auto n = static_cast<std::size_t>(f.size());
    const auto& terms = f.terms();
    std::fill(grad.begin(), grad.end(), 0.0);
    double val = 0.0;
    const double sd = static_cast<double>(s);
    if (f.has_quality_term()) {
      const double div = f.aggregate() == quality_aggregate::mean ? sd : 1.0;
      const double w = terms[0].weight / terms[0].scale / div;
      const auto q = f.quality();
      double dot = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        dot += q[i] * p[i];
        grad[i] += w * q[i];
      }
      val += w * dot;
    }
    std::vector<double> tmp;
    const relax_view<T> view{f.embeddings(), f.inv_norms().data(), f.sq_norms().data(), p, sd, threads};
    f.mix().for_each([&](auto i, const auto& objective, double /*v*/) {
      const int t = f.term_slots()[i];
      if (t < 0) return;
      using D = std::decay_t<decltype(objective)>;
      static_assert(relaxable_objective<D, T>,
                    "datamask::relaxed_objective: a diversity objective of f has no relaxation: it "
                    "needs a member double relax(const datamask::relax_view<T>&, std::span<double>) "
                    "const (datamask::relaxable_objective<D, T>)");
      tmp.assign(n, 0.0);
      const double w = terms[static_cast<std::size_t>(t)].weight / terms[static_cast<std::size_t>(t)].scale;
      val += w * static_cast<double>(objective.relax(view, std::span<double>(tmp)));
      for (std::size_t r = 0; r < n; ++r) grad[r] += w * tmp[r];
    });
    return val;
  };
}

/// @brief `relaxed_objective` on a device, for `ascend_on_device`: the same terms, weights and
/// scales, the quality term as a fixed-order fold and each diversity term's `relax_device`.
/// Every diversity term must be `device_relaxable`.
/// @param view the dataset as the device reads it (`thrust_backend::device_relax_view`)
/// @param quality f's quality per row in device memory (null without a quality term)
/// @param tmp, partials device buffers of n and `device_passes::fold_scratch(n)` doubles
/// @return a callable `double(Exec& exec, const double* p, double* grad)` (device pointers)
template <class T, class Diversity>
[[nodiscard]] auto relaxed_objective_on(const objective_function<T, Diversity>& f, index_t s, relax_view<T> view,
                                        const double* quality, double* tmp, double* partials) {
  return [&f, s, view, quality, tmp, partials](auto& exec, const double* p, double* grad) -> double {
    namespace dc = detail::continuous;
    const index_t n = f.size();
    const auto& terms = f.terms();
    exec.for_each(n, dc::add_scaled{grad, nullptr, 0.0});
    double val = 0.0;
    const double sd = static_cast<double>(s);
    if (f.has_quality_term()) {
      const double div = f.aggregate() == quality_aggregate::mean ? sd : 1.0;
      const double w = terms[0].weight / terms[0].scale / div;
      const double dot =
          detail::device_passes::fold(exec, partials, n, dc::product_at{quality, p}, detail::device_passes::plus_op{}, 0.0);
      exec.for_each(n, dc::add_scaled{grad, quality, w});
      val += w * dot;
    }
    relax_view<T> v = view;
    v.p = std::span<const double>(p, static_cast<std::size_t>(n));
    v.total = sd;
    f.mix().for_each([&](auto i, const auto& objective, double /*v*/) {
      const int t = f.term_slots()[i];
      if (t < 0) return;
      using D = std::decay_t<decltype(objective)>;
      static_assert(device_relaxable<D, T>,
                    "datamask::relaxed_objective_on: a diversity objective of f has no device relaxation "
                    "(datamask::device_relaxable<D, T>); the continuous learner keeps such a run on the host");
      const double w = terms[static_cast<std::size_t>(t)].weight / terms[static_cast<std::size_t>(t)].scale;
      val += w * static_cast<double>(objective.relax_device(exec, v, tmp));
      exec.for_each(n, dc::add_scaled{grad, tmp, w});
    });
    return val;
  };
}

namespace detail::continuous {

/// Whether the continuous learner runs its ascent on backend B's device: B has an executor and
/// a device view of its dataset, and every diversity term of the mix is `device_relaxable`.
template <class B, class T, class Mix>
inline constexpr bool device_ascent = false;
template <class B, class T, class... Ds>
inline constexpr bool device_ascent<B, T, diversity_mix<Ds...>> =
    requires(const B& b, const typename B::template dataset<T>& ds) {
      typename B::executor;
      { b.device_relax_view(ds) } -> std::same_as<relax_view<T>>;
    } && (device_relaxable<Ds, T> && ...);

/// The state of one `polish_swaps` run, in steps: the term states on the selection, the exact
/// gain of a swap, the candidates ranked by the relaxation's gradient, the best single swap, the
/// double-swap search, and the round loop. Not copyable or movable: the term states view `all`.
template <class T, class Diversity>
struct polisher {
  using objective_t = objective_function<T, Diversity>;
  using states_t = decltype(swap_terms_for<T>(std::declval<const typename objective_t::mix_type&>()));

  const objective_t& f;
  std::vector<index_t>& rows;
  std::span<const index_t> candidates;
  const polish_settings& cfg;
  int threads;
  polish_report rep;
  const index_t n;
  const index_t k;
  const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::vector<index_t> all;  ///< every row, in order: the states' base view points into it
  states_t states;
  std::vector<char> in;
  std::vector<double> p;
  std::vector<double> grad;
  const double qdiv;
  index_t last_refresh = -1;
  bool force_refresh = false;

  polisher(const objective_t& f_, std::vector<index_t>& rows_, std::span<const index_t> candidates_,
           const polish_settings& cfg_, int threads_)
      : f(f_), rows(rows_), candidates(candidates_), cfg(cfg_), threads(threads_), n(f_.size()),
        k(static_cast<index_t>(rows_.size())), all(static_cast<std::size_t>(n)),
        in(static_cast<std::size_t>(n), 0), p(static_cast<std::size_t>(n), 0.0),
        grad(static_cast<std::size_t>(n), 0.0),
        qdiv(f_.aggregate() == quality_aggregate::mean ? static_cast<double>(k) : 1.0) {
    std::iota(all.begin(), all.end(), index_t{0});
    const subset_view<T> base{f.embeddings(), f.inv_norms().data(), f.sq_norms().data(), index_view{},
                              index_view(std::span<const index_t>(all))};
    f.mix().for_each([&](auto i, const auto& objective, double /*v*/) {
      if (f.term_slots()[i] >= 0) std::get<decltype(i)::value>(states).init(objective, base, rows);
    });
    for (index_t r : rows) in[r] = 1;
  }
  polisher(const polisher&) = delete;
  polisher& operator=(const polisher&) = delete;

  [[nodiscard]] bool out_of_time() const {
    return cfg.seconds > 0.0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > cfg.seconds;
  }

  /// Only clear improvements: a gain at rounding level could cycle.
  [[nodiscard]] bool clear_gain(double gain) const { return gain > 1e-12 * std::max(1.0, std::abs(rep.gain)); }

  /// The exact change of f when r leaves and a joins, from the term states `st` (thread-safe).
  double pair_gain(states_t& st, index_t r, index_t a) const {
    const auto& terms = f.terms();
    double gain = 0.0;
    if (f.has_quality_term()) {
      gain += terms[0].weight / terms[0].scale * (f.quality()[a] - f.quality()[r]) / qdiv;
    }
    f.mix().for_each([&](auto i, const auto& /*o*/, double /*v*/) {
      const int t = f.term_slots()[i];
      if (t < 0) return;
      auto& term = std::get<decltype(i)::value>(st);
      double dlt = 0.0;
      if constexpr (requires { term.scratch; }) {
        auto copy = term;  // the generic state's scratch is per thread
        dlt = copy.delta(r, a);
      } else {
        dlt = term.delta(r, a);
      }
      gain += terms[static_cast<std::size_t>(t)].weight / terms[static_cast<std::size_t>(t)].scale * dlt;
    });
    return gain;
  }

  void apply_to(states_t& st, index_t r, index_t a) const {
    f.mix().for_each([&](auto i, const auto& /*o*/, double /*v*/) {
      if (f.term_slots()[i] >= 0) std::get<decltype(i)::value>(st).apply(r, a);
    });
  }

  void prepare_all(states_t& st, std::span<const index_t> rm, std::span<const index_t> ad) const {
    f.mix().for_each([&](auto i, const auto& /*o*/, double /*v*/) {
      if (f.term_slots()[i] >= 0) std::get<decltype(i)::value>(st).prepare(rm, ad);
    });
  }

  /// Row r leaves the selection (states, rows, membership) and row a takes its place.
  void swap_in(index_t r, index_t a) {
    apply_to(states, r, a);
    *std::find(rows.begin(), rows.end(), r) = a;
    in[r] = 0;
    in[a] = 1;
  }

  /// The relaxation's gradient at the selection, when due (or forced); true when refreshed.
  template <class Relaxed>
  bool refresh_if_due(const Relaxed& relaxed, index_t round) {
    const bool fresh = force_refresh || last_refresh < 0 || round - last_refresh >= cfg.refresh_every;
    if (fresh) {
      for (index_t i = 0; i < n; ++i) p[i] = in[i] ? 1.0 : 0.0;
      (void)relaxed(std::span<const double>(p), std::span<double>(grad));
      last_refresh = round;
      force_refresh = false;
    }
    return fresh;
  }

  /// The candidates outside the selection, in candidate order.
  [[nodiscard]] std::vector<index_t> outside_rows() const {
    std::vector<index_t> outside;
    outside.reserve(candidates.size() - rows.size());
    for (index_t i : candidates) {
      if (!in[i]) outside.push_back(i);
    }
    return outside;
  }

  struct single_move {
    std::size_t r = 0;  ///< index into the removals
    std::size_t a = 0;  ///< index into the additions
    double gain = 0.0;
  };

  /// Exact gains of every pair, in parallel over the removals; the best by (gain, order).
  single_move best_single(const std::vector<index_t>& rems, const std::vector<index_t>& adds) {
    std::vector<double> best(rems.size(), -std::numeric_limits<double>::infinity());
    std::vector<std::size_t> best_a(rems.size(), 0);
    detail::parallel_for(static_cast<index_t>(rems.size()), threads, [&](index_t ri) {
      const index_t r = rems[static_cast<std::size_t>(ri)];
      for (std::size_t ai = 0; ai < adds.size(); ++ai) {
        const index_t a = adds[ai];
        const double gain = pair_gain(states, r, a);
        if (gain > best[static_cast<std::size_t>(ri)]) {
          best[static_cast<std::size_t>(ri)] = gain;
          best_a[static_cast<std::size_t>(ri)] = ai;
        }
      }
    });
    rep.evaluations += static_cast<index_t>(rems.size() * adds.size());
    std::size_t bi = 0;
    for (std::size_t ri = 1; ri < rems.size(); ++ri) {
      if (best[ri] > best[bi]) bi = ri;
    }
    return {bi, best_a[bi], best[bi]};
  }

  /// The best single swaps, applied while they clearly improve f; the number applied.
  index_t single_swaps(std::vector<index_t>& adds, std::vector<index_t>& rems) {
    index_t swaps = 0;
    while (!adds.empty() && !rems.empty() && !out_of_time()) {
      prepare_all(states, rems, adds);
      const single_move m = best_single(rems, adds);
      if (!clear_gain(m.gain)) break;
      swap_in(rems[m.r], adds[m.a]);
      rep.gain += m.gain;
      ++rep.swaps;
      ++swaps;
      rems.erase(rems.begin() + static_cast<std::ptrdiff_t>(m.r));
      adds.erase(adds.begin() + static_cast<std::ptrdiff_t>(m.a));
    }
    return swaps;
  }

  /// For each first swap c = (r2[c / nb], a2[c % nb]), the best gain of it followed by a second
  /// swap (a later removal, another addition) in best2[c], that second swap in arg2[c] (exact,
  /// through a copy of the states; in parallel over the first swaps).
  void best_doubles(const std::vector<index_t>& r2, const std::vector<index_t>& a2, std::vector<double>& best2,
                    std::vector<std::size_t>& arg2) {
    const std::size_t nb = r2.size();
    detail::parallel_for(static_cast<index_t>(nb * nb), threads, [&](index_t c) {
      const std::size_t i1 = static_cast<std::size_t>(c) / nb;
      const std::size_t j1 = static_cast<std::size_t>(c) % nb;
      const double g1 = pair_gain(states, r2[i1], a2[j1]);
      states_t copy = states;
      apply_to(copy, r2[i1], a2[j1]);
      prepare_all(copy, r2, a2);
      for (std::size_t i2 = i1 + 1; i2 < nb; ++i2) {
        for (std::size_t j2 = 0; j2 < nb; ++j2) {
          if (j2 == j1) continue;
          const double g = g1 + pair_gain(copy, r2[i2], a2[j2]);
          if (g > best2[static_cast<std::size_t>(c)]) {
            best2[static_cast<std::size_t>(c)] = g;
            arg2[static_cast<std::size_t>(c)] = i2 * nb + j2;
          }
        }
      }
    });
  }

  /// At a 1-swap local optimum: the best double swap among the `pair_candidates` best-ranked
  /// items on each side (two removals, two additions), applied if it clearly improves f.
  /// @return whether one was applied
  bool double_swap(const std::vector<index_t>& outside) {
    const index_t b2 = std::min(cfg.pair_candidates, std::min<index_t>(k, static_cast<index_t>(outside.size())));
    if (b2 < 2) return false;
    const std::vector<index_t> r2 = top_by(grad, f.ids(), rows, b2, false);
    const std::vector<index_t> a2 = top_by(grad, f.ids(), outside, b2, true);
    prepare_all(states, r2, a2);
    const std::size_t nb = static_cast<std::size_t>(b2);
    std::vector<double> best2(nb * nb, -std::numeric_limits<double>::infinity());
    std::vector<std::size_t> arg2(nb * nb, 0);
    best_doubles(r2, a2, best2, arg2);
    rep.evaluations += static_cast<index_t>(nb * nb * nb * nb / 2);
    std::size_t bc = 0;
    for (std::size_t c = 1; c < best2.size(); ++c) {
      if (best2[c] > best2[bc]) bc = c;
    }
    if (!clear_gain(best2[bc])) return false;
    const std::pair<index_t, index_t> moves[2] = {{r2[bc / nb], a2[bc % nb]},
                                                  {r2[arg2[bc] / nb], a2[arg2[bc] % nb]}};
    for (const auto& [r, a] : moves) swap_in(r, a);
    rep.gain += best2[bc];
    rep.swaps += 2;
    return true;
  }

  /// The rounds: rank by the (possibly stale) gradient, apply the best single swaps; with none,
  /// refresh a stale gradient and retry, else try one double swap and stop without one.
  template <class Relaxed>
  void run(const Relaxed& relaxed) {
    for (index_t round = 0; round < cfg.rounds && !out_of_time(); ++round) {
      ++rep.rounds;
      const bool fresh = refresh_if_due(relaxed, round);
      const std::vector<index_t> outside = outside_rows();
      std::vector<index_t> adds = top_by(grad, f.ids(), outside, cfg.candidates, true);
      std::vector<index_t> rems = top_by(grad, f.ids(), rows, cfg.candidates, false);
      if (single_swaps(adds, rems) > 0) continue;
      if (!fresh) {  // no single swap by the stale ranking: refresh before giving up
        force_refresh = true;
        continue;
      }
      if (!double_swap(outside)) break;
    }
  }
};

}  // namespace detail::continuous

/// @brief Swap local search on a selection (see `polish_settings`): 1-swaps, then a 2-swap search
/// at a 1-swap optimum; each applied swap raises f
/// by its exact gain; candidates come from the gradient of `relaxed` at the selection.
///
/// @param f the objective (terms, weights, scales)
/// @param relaxed its relaxation (`relaxed_objective(f, S, threads)`), for the candidates
/// @param rows the selection, changed in place (the same number of rows)
/// @param candidates the rows that may be selected (sorted, distinct)
/// @param threads as `options::threads` (0: all); the result does not depend on it
/// @return rounds, swaps and the total gain
template <class T, class Diversity, class Relaxed>
polish_report polish_swaps(const objective_function<T, Diversity>& f, const Relaxed& relaxed,
                           std::vector<index_t>& rows, std::span<const index_t> candidates,
                           const polish_settings& cfg, int threads = 0) {
  validate(cfg);
  const auto k = static_cast<index_t>(rows.size());
  if (k == 0 || k >= static_cast<index_t>(candidates.size())) return polish_report{};
  detail::continuous::polisher<T, Diversity> polish(f, rows, candidates, cfg, threads);
  polish.run(relaxed);
  return polish.rep;
}

/// @brief Selection by the continuous learner (method.md section 6): the phases every optimiser
/// of a block shares (phases.hpp: validation, kept rows, S, calibrated or fixed scales, read-out
/// order, final evaluation into a `selection_result`) around the continuous ascent of the
/// relaxation of f, its read-out and the polish.
///
/// Every diversity term with a positive weight must be a `relaxable_objective` (pairwise
/// similarity, DiSF, facility location on a kNN graph (`sparse_facility_location`), or a user
/// objective with `relax`); dense facility location has none (use `learner`, or give it a graph).
///
/// @tparam Backend runs the shared phases (calibration subsets, read-out order, the final
///         evaluation) and, where it can, the ascent: on a backend with an executor
///         (`thrust_backend`) and a mix whose diversity terms are all `device_relaxable`
///         (pairwise similarity, DiSF), `ascend_on_device` keeps p, the gradient, the step and
///         the projection on the device and brings back scalars per iteration (and p at the
///         tracked read-outs). Otherwise (the Eigen backend; facility location on a kNN graph,
///         whose gradient is a scatter over the graph that the device has no fixed-order form
///         for yet; a user objective with only the host `relax`) `ascend_from` runs on the host
///         from the caller's embeddings. The polish always runs on the host. On `thrust_backend`
///         over OpenMP the selection is the CPU backend's on 1 and 2 threads, the device
///         ascent's f within 1e-7 relative, and its bits do not depend on the thread count
///         (tests/test_thrust_credit_continuous.cpp).
template <backend Backend = default_backend>
class basic_continuous_learner {
 public:
  explicit basic_continuous_learner(continuous_options opt = {}, Backend b = {})
      : opt_(std::move(opt)), backend_(std::move(b)) {}

  [[nodiscard]] const continuous_options& settings() const { return opt_; }

  /// @brief Selects S items of one block.
  /// @param p the block: embeddings, quality columns, ids
  /// @param diversity a relaxable diversity objective or a `diversity_mix` of them
  /// @return the selection, filled as the policy-gradient learner fills it (ids and rows in
  ///         read-out order, terms, objective when `evaluate_selection`, kept, prune_threshold);
  ///         `history` holds one record per iteration (reward_mean = reward_max = the relaxed f
  ///         before the step, term_means empty); `steps_run` counts iterations; `logits` holds
  ///         logit(p) clamped to [-40, 40] (projected) or L - tau (logits), -infinity for pruned
  ///         rows
  /// @throws invalid_input for bad input or settings (term_scaling::group is refused: f must be
  ///         a fixed function)
  template <class T, class Diversity>
  [[nodiscard]] selection_result select(const problem<T>& p, const Diversity& diversity) const {
    static_assert(std::is_floating_point_v<T>, "datamask: embeddings must be float or double");
    static_assert(detail::mix_models<Diversity, T>::value,
                  "datamask::continuous_learner::select: the diversity argument does not model "
                  "datamask::diversity_objective<D, T>");
    return run(p, detail::as_mix(diversity));
  }

 private:
  template <class T, class Mix>
  selection_result run(const problem<T>& p, const Mix& mix) const {
    const options& o = opt_.common;
    DATAMASK_EXPECTS(o.scaling != term_scaling::group, "scaling",
                     "group scaling makes f a different function at every step; the continuous "
                     "learner needs calibrated, fixed or raw scales");
    validate(opt_.ascent);
    validate(opt_.polish);
    Backend b = backend_;
    if constexpr (requires { b.threads = o.threads; }) b.threads = o.threads;
    phases::block_plan blk = phases::prepare_block(p, mix, o);
    auto dev = phases::upload(b, p, blk);
    selection_result res;
    res.active = blk.kept_count();  // every kept item takes part in every iteration
    res.rollout_size = blk.selected;
    std::vector<double> key(static_cast<std::size_t>(blk.rows()), 0.0);
    std::vector<index_t> rows;
    if (phases::learns(blk, o)) {
      const phases::batch_size size = phases::batch_sizes(blk, o);
      // The scales of the policy-gradient learner with the same settings: one f for both.
      phases::calibrate_scales(b, dev, mix, blk.plan, o, size.active, size.rollout);
      rows = ascend(b, dev, p, mix, blk, key, res);
    }
    const auto key_dev = b.to_device(std::span<const double>(key));
    // Read-out order: the key, ties to the smaller id (the top S by quality when f is modular).
    std::vector<index_t> ordered =
        phases::learns(blk, o)
            ? b.top_rows(key_dev, dev.ds, b.to_device(std::span<const index_t>(rows)), blk.selected)
            : phases::read_out(b, dev, blk, o, key_dev);
    // No candidate rows: a typed null, as nvcc (13.0) deduces nothing through a bare nullptr here.
    const typename Backend::template vector<index_t>* no_candidates = nullptr;
    phases::finish(b, dev, mix, blk, o, phases::scored_rows{std::move(ordered), {}, false},
                   std::move(key), no_candidates, res);
    return res;
  }

  /// The ascent, its read-out and the polish on f with the block's scales. Fills `key` (the
  /// read-out key per row), the history and the counters; returns the selected rows.
  template <class T, class Mix>
  std::vector<index_t> ascend(const Backend& b, const phases::device_block<Backend, T>& dev, const problem<T>& p,
                              const Mix& mix, const phases::block_plan& blk, std::vector<double>& key,
                              selection_result& res) const {
    const options& o = opt_.common;
    const index_t s = blk.selected;
    objective_function<T, Mix> f(p, mix, o.lambda, o.quality, o.normalized, o.threads);
    std::vector<double> scales;
    for (const auto& t : blk.plan.terms) scales.push_back(t.scale);
    f.set_scales(scales);
    const auto relaxed = relaxed_objective(f, s, o.threads);
    best_rollout best = opt_.initial_best;  // the best tracked read-out: rows and f
    phases::check_resumed_best(blk, best, "initial_best");
    const index_t every = opt_.ascent.track_every;
    ascent_hooks hooks{opt_.on_step, opt_.stop, {}, o.snapshot_every, {}};
    hooks.on_iterate = [&](index_t t, std::span<const double> pcur) {
      if (every == 0 || t % every != 0) return;
      std::vector<index_t> r = read_out(pcur, f.ids(), blk.kept, s);
      const double fv = f(std::span<const index_t>(r));
      if (fv > best.reward) {
        best.reward = fv;
        best.rows = std::move(r);
      }
    };
    if (opt_.on_snapshot) hooks.on_snapshot = [&](const continuous_iterate& it) { opt_.on_snapshot(it, best); };
    hooks.iterate_every = every;
    continuous_iterate start =
        opt_.initial.p.empty() ? first_iterate(blk.rows(), blk.kept, s, opt_.ascent) : opt_.initial;
    continuous_state st;
    if constexpr (detail::continuous::device_ascent<Backend, T, Mix>) {
      // The ascent on the device: f's quality and two work buffers uploaded once.
      using exec_t = typename Backend::executor;
      exec_t keep;
      const index_t n = blk.rows();
      const double* quality = f.has_quality_term() ? keep.upload(f.quality()) : nullptr;
      double* tmp = keep.template scratch<double>(n);
      double* partials = keep.template scratch<double>(detail::device_passes::fold_scratch(n));
      st = ascend_on_device<exec_t>(relaxed_objective_on(f, s, b.device_relax_view(dev.ds), quality, tmp, partials),
                                    n, blk.kept, s, opt_.ascent, std::move(start), hooks);
    } else {
      (void)b;
      (void)dev;
      st = ascend_from(relaxed, blk.rows(), blk.kept, s, opt_.ascent, std::move(start), hooks);
    }
    res.steps_run = st.iterations_run;
    res.stopped_early = st.stopped_early;
    res.history.reserve(st.relaxed.size());
    for (std::size_t t = 0; t < st.relaxed.size(); ++t) {
      const auto it = static_cast<index_t>(t + 1);
      res.history.push_back(step_record{it, detail::continuous::step_size(opt_.ascent, it), st.relaxed[t],
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
    std::vector<index_t> rows = read_out(st.logits.empty() ? st.p : st.logits, f.ids(), blk.kept, s);
    return polish_best(f, relaxed, blk.kept, std::move(rows), std::move(best.rows), best.reward);
  }

  /// Polishes the final read-out and the best tracked one (when it is another set); the better
  /// by f, ties to the final read-out.
  template <class F, class Relaxed>
  std::vector<index_t> polish_best(const F& f, const Relaxed& relaxed, std::span<const index_t> kept,
                                   std::vector<index_t> rows, std::vector<index_t> best_rows,
                                   double best_f) const {
    if (!best_rows.empty()) {
      std::vector<index_t> a(rows);
      std::vector<index_t> c(best_rows);
      std::sort(a.begin(), a.end());
      std::sort(c.begin(), c.end());
      if (a == c) best_rows.clear();
    }
    if (opt_.polish.enabled) {
      (void)polish_swaps(f, relaxed, rows, kept, opt_.polish, opt_.common.threads);
      if (!best_rows.empty()) {
        (void)polish_swaps(f, relaxed, best_rows, kept, opt_.polish, opt_.common.threads);
        best_f = f(std::span<const index_t>(best_rows));
      }
    }
    if (!best_rows.empty() && best_f > f(std::span<const index_t>(rows))) return best_rows;
    return rows;
  }

  continuous_options opt_;
  Backend backend_;
};

/// @brief The continuous learner on the default backend (`default_backend`, as `learner<>`).
using continuous_learner = basic_continuous_learner<>;

}  // namespace datamask
