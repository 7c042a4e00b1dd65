// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The continuous ascent's iterate: what one iteration hands the next, what a snapshot
/// holds (and a resumed run starts from), the first iterate and the check of a foreign one.

#include <cmath>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "datamask/core/error.hpp"
#include "datamask/learners/continuous/settings.hpp"
#include "datamask/core/types.hpp"

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
/// iterations: a run continued from it (`ascend_from`; a `resume_point` of the learner) computes
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
  /// @throws invalid_input ("resume_point.state") when `values` does not hold that many values
  ///         (`ascend_from` checks the rest when it starts from the iterate)
  [[nodiscard]] static continuous_iterate unpack(std::span<const double> values, index_t n,
                                                 const continuous_settings& cfg, index_t iteration,
                                                 std::vector<double> relaxed) {
    const bool logit = cfg.parameterization == continuous_parameterization::logits;
    const bool adam = cfg.rule == step_rule::adam;
    const auto nn = static_cast<std::size_t>(n);
    const std::size_t expected = nn * (1 + (logit ? 1 : 0) + (adam ? 2 : 0)) + (logit ? 1 : 0);
    DATAMASK_EXPECTS(values.size() == expected, "resume_point.state", "has ", values.size(),
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

/// @brief The iterate after `optimize`.
struct continuous_state {
  std::vector<double> p;        ///< inclusion probabilities, one per row (0 off the candidates)
  std::vector<double> logits;   ///< logits parameterisation: L - tau; projected: empty
  std::vector<double> relaxed;  ///< F(p) at each iteration, before its step
  index_t iterations_run = 0;
  bool stopped_early = false;
};

/// @brief What an iterate holds for an ascent: how many iterations it runs, whether its
/// parameterisation keeps logits and whether its step rule keeps two moments per row.
struct iterate_shape {
  index_t iterations = 0;
  bool logits = false;
  bool moments = false;
};

/// @brief The shape of the iterate of an ascent with settings `cfg`.
[[nodiscard]] inline iterate_shape shape_of(const continuous_settings& cfg) {
  return {cfg.iterations, cfg.parameterization == continuous_parameterization::logits, cfg.rule == step_rule::adam};
}

namespace detail::continuous {

/// Refuses an iterate that cannot be the ascent's state after `it.iteration` iterations of an
/// ascent of shape `shape` on n rows restricted to `candidates` (input name "continuous_state"):
/// a damaged or foreign snapshot would otherwise give a silently wrong selection.
inline void check_iterate(const continuous_iterate& it, index_t n, std::span<const index_t> candidates,
                          const iterate_shape& shape) {
  const char* input = "continuous_state";
  const auto nn = static_cast<std::size_t>(n);
  const bool logit = shape.logits;
  const bool adam = shape.moments;
  DATAMASK_EXPECTS(it.iteration >= 0 && it.iteration <= shape.iterations, input, "is at iteration ", it.iteration,
                   ", outside [0, ", shape.iterations, "]");
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
                                                      const iterate_shape& shape) {
  const auto nn = static_cast<std::size_t>(n);
  continuous_iterate it;
  it.p.assign(nn, 0.0);
  for (index_t i : candidates) it.p[i] = static_cast<double>(s) / static_cast<double>(candidates.size());
  if (shape.logits) it.logits.assign(nn, 0.0);
  if (shape.moments) {
    it.m1.assign(nn, 0.0);
    it.m2.assign(nn, 0.0);
  }
  return it;
}

/// @brief `first_iterate` for an ascent with settings `cfg`.
[[nodiscard]] inline continuous_iterate first_iterate(index_t n, std::span<const index_t> candidates, index_t s,
                                                      const continuous_settings& cfg) {
  return first_iterate(n, candidates, s, shape_of(cfg));
}

}  // namespace datamask
