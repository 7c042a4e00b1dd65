// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The advantage estimator: how a step's rewards (or, under per-item credit, each draw's
/// marginal gain) become the coefficients of the policy's update (docs/method.md section 2 and
/// section 6, last item). One home for the group-normalised and leave-one-out advantages, so the
/// learner's loop only asks for coefficients and hands them to the policy.

#include <algorithm>
#include <cmath>
#include <span>
#include <utility>
#include <vector>

#include "datamask/core/options.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

/// @brief Population mean and standard deviation, summed in order.
inline std::pair<double, double> mean_std(std::span<const double> v) {
  double m = 0.0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  double s = 0.0;
  for (double x : v) s += (x - m) * (x - m);
  return {m, std::sqrt(s / static_cast<double>(v.size()))};
}

/// @brief Why a step gives the policy no update.
enum class advantage_status {
  ok,
  nonfinite,     ///< a reward (or an item's advantage) is not finite
  zero_variance  ///< every rollout (or item) has the same value: no direction to move in
};

/// @brief Turns a step's values into update coefficients, each eta_t A / G.
struct advantage_estimator {
  advantage_mode mode = advantage_mode::group_normalized;

  /// Whether the step's G rewards can give an update at all.
  [[nodiscard]] static advantage_status check(std::span<const double> rewards) {
    if (!std::all_of(rewards.begin(), rewards.end(), [](double r) { return std::isfinite(r); })) {
      return advantage_status::nonfinite;
    }
    return mean_std(rewards).second > 0.0 ? advantage_status::ok : advantage_status::zero_variance;
  }

  /// The paper's estimator: rollout g's coefficient lr A_g / G, A_g = (r_g - mean) / (std + 1e-8)
  /// (group-normalised) or r_g - the mean of the other rollouts (leave-one-out, written as
  /// G / (G - 1) (r_g - mean)).
  [[nodiscard]] advantage_status rollouts(std::span<const double> rewards, double lr,
                                          std::vector<double>& coef) const {
    const advantage_status status = check(rewards);
    if (status != advantage_status::ok) return status;
    const auto [mean, sd] = mean_std(rewards);
    const auto g_count = static_cast<double>(rewards.size());
    coef.resize(rewards.size());
    for (std::size_t g = 0; g < rewards.size(); ++g) {
      const double a = mode == advantage_mode::group_normalized
                           ? (rewards[g] - mean) / (sd + 1e-8)
                           : g_count / (g_count - 1.0) * (rewards[g] - mean);
      coef[g] = lr * a / g_count;
    }
    return advantage_status::ok;
  }

  /// Per-item credit: `adv` holds each draw's marginal gain D_e (entry e = g k + j) and becomes
  /// its coefficient lr A_e / G, A_e = D_e less a leave-one-out baseline (the mean of D over the
  /// entries of the other rollouts), divided by its population std over the G k entries (+ 1e-8)
  /// when group-normalised, as the rollout advantages are.
  [[nodiscard]] advantage_status items(std::vector<double>& adv, index_t count, index_t size, double lr) const {
    if (!std::all_of(adv.begin(), adv.end(), [](double a) { return std::isfinite(a); })) {
      return advantage_status::nonfinite;
    }
    const auto c = static_cast<std::size_t>(count);
    const auto k = static_cast<std::size_t>(size);
    std::vector<double> mean(c, 0.0);
    double total = 0.0;
    for (std::size_t g = 0; g < c; ++g) {
      for (std::size_t j = 0; j < k; ++j) mean[g] += adv[g * k + j];
      mean[g] /= static_cast<double>(k);
      total += mean[g];
    }
    for (std::size_t g = 0; g < c; ++g) {
      const double baseline = (total - mean[g]) / static_cast<double>(c - 1);
      for (std::size_t j = 0; j < k; ++j) adv[g * k + j] -= baseline;
    }
    const double sd = mean_std(adv).second;
    if (!(sd > 0.0)) return advantage_status::zero_variance;
    if (mode == advantage_mode::group_normalized) {
      for (double& a : adv) a /= sd + 1e-8;
    }
    for (double& a : adv) a *= lr / static_cast<double>(count);
    return advantage_status::ok;
  }
};

}  // namespace datamask
