// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The continuous ascent's step rules (its Update policy, in the manner of ensmallen's
/// update policies): each turns the ascent direction h into a change of the iterate x on the
/// candidates and owns whatever state it carries between iterations (Adam's moments) and that
/// state's place in a snapshot. Written once against an executor.
///
/// A rule U provides `U::template state<Exec>`, built as `state(rule, exec, n, iterate)` from
/// the iterate a run starts from (its moments, for a resumed run), with
/// `st.step(exec, candidates, h, x, lr, t)` (iteration t, from 1) and `st.save(exec, iterate)`
/// (the moments into a snapshot); `U::moments` says whether the iterate holds two moments per
/// row for it.

#include <cmath>
#include <span>
#include <vector>

#include "datamask/core/config.hpp"
#include "datamask/learners/continuous/iterate.hpp"
#include "datamask/learners/continuous/projection.hpp"
#include "datamask/exec/ops.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

namespace detail::continuous {

/// x_i += lr h_i.
struct plain_step {
  const index_t* rows;
  const double* h;
  double* x;
  double lr;
  DATAMASK_HOST_DEVICE void operator()(index_t k) const { x[rows[k]] += lr * h[rows[k]]; }
};

/// x_i += lr h_i / hmax (no step when h = 0).
struct normalized_step {
  const index_t* rows;
  const double* h;
  double* x;
  double lr;
  double hmax;
  DATAMASK_HOST_DEVICE void operator()(index_t k) const {
    if (hmax > 0.0) x[rows[k]] += lr * h[rows[k]] / hmax;
  }
};

/// Adam with bias-corrected moments (c1, c2: 1 - beta^t).
struct adam_step {
  const index_t* rows;
  const double* h;
  double* x;
  double* m1;
  double* m2;
  double lr;
  double beta1;
  double beta2;
  double c1;
  double c2;
  double epsilon;
  DATAMASK_HOST_DEVICE void operator()(index_t k) const {
    const index_t i = rows[k];
    m1[i] = beta1 * m1[i] + (1.0 - beta1) * h[i];
    m2[i] = beta2 * m2[i] + (1.0 - beta2) * h[i] * h[i];
    x[i] += lr * (m1[i] / c1) / (::sqrt(m2[i] / c2) + epsilon);
  }
};

/// |h_i| over the candidates, for the normalised step.
struct magnitude_at {
  const index_t* rows;
  const double* h;
  DATAMASK_HOST_DEVICE double operator()(index_t k) const { return h[rows[k]] < 0.0 ? -h[rows[k]] : h[rows[k]]; }
};

}  // namespace detail::continuous

/// @brief x += lr h: the step's size follows the scale of f.
struct plain_update {
  static constexpr bool moments = false;
  template <class Exec>
  struct state {
    state(const plain_update& /*rule*/, Exec& /*exec*/, index_t /*n*/, const continuous_iterate& /*it*/) {}
    void step(Exec& exec, const candidate_rows& c, const double* h, double* x, double lr, index_t /*t*/) {
      exec.for_each(c.count, detail::continuous::plain_step{c.rows, h, x, lr});
    }
    void save(Exec& /*exec*/, continuous_iterate& /*it*/) const {}
  };
};

/// @brief x += lr h / max_i |h_i|: the most promising coordinate moves by lr whatever the scale
/// of f (the default: benchmarks/continuous_tune.cpp, the comment of `continuous_settings`).
struct normalized_update {
  static constexpr bool moments = false;
  template <class Exec>
  struct state {
    state(const normalized_update& /*rule*/, Exec& /*exec*/, index_t /*n*/, const continuous_iterate& /*it*/) {}
    void step(Exec& exec, const candidate_rows& c, const double* h, double* x, double lr, index_t /*t*/) {
      const double hmax = exec.reduce(c.count, detail::continuous::magnitude_at{c.rows, h}, ops::max{}, 0.0);
      exec.for_each(c.count, detail::continuous::normalized_step{c.rows, h, x, lr, hmax});
    }
    void save(Exec& /*exec*/, continuous_iterate& /*it*/) const {}
  };
};

/// @brief Adam on the iterate: scale-free per coordinate; its two moments per row live in the
/// executor's memory and in the iterate of a snapshot.
struct adam_update {
  static constexpr bool moments = true;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;

  template <class Exec>
  struct state {
    double beta1;
    double beta2;
    double epsilon;
    double* m1;
    double* m2;
    state(const adam_update& r, Exec& exec, index_t /*n*/, const continuous_iterate& it)
        : beta1(r.beta1), beta2(r.beta2), epsilon(r.epsilon), m1(exec.upload(std::span<const double>(it.m1))),
          m2(exec.upload(std::span<const double>(it.m2))) {}
    void step(Exec& exec, const candidate_rows& c, const double* h, double* x, double lr, index_t t) {
      const double c1 = 1.0 - std::pow(beta1, static_cast<double>(t));
      const double c2 = 1.0 - std::pow(beta2, static_cast<double>(t));
      exec.for_each(c.count, detail::continuous::adam_step{c.rows, h, x, m1, m2, lr, beta1, beta2, c1, c2, epsilon});
    }
    void save(Exec& exec, continuous_iterate& it) const {
      exec.download(static_cast<const double*>(m1), std::span<double>(it.m1));
      exec.download(static_cast<const double*>(m2), std::span<double>(it.m2));
    }
  };
};

}  // namespace datamask
