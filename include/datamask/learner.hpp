// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The policy-gradient mask learner: the one loop (sample, score, advantage, update,
/// read out), written once against the `backend` concept.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "datamask/backend/concept.hpp"
#include "datamask/backend/default.hpp"
#include "datamask/concepts.hpp"
#include "datamask/detail/prepare.hpp"
#include "datamask/objective_function.hpp"
#include "datamask/objectives/mix.hpp"
#include "datamask/options.hpp"
#include "datamask/settings.hpp"
#include "datamask/policy/softmax.hpp"
#include "datamask/rng/philox.hpp"
#include "datamask/sampler/gumbel_top_k.hpp"
#include "datamask/schedule/lr.hpp"

namespace datamask {

namespace detail {
template <class D, class T>
struct mix_models : std::bool_constant<diversity_objective<D, T>> {};
template <class... Ds, class T>
struct mix_models<diversity_mix<Ds...>, T> : std::bool_constant<(diversity_objective<Ds, T> && ...)> {};

/// Population mean and standard deviation, summed in order.
inline std::pair<double, double> mean_std(std::span<const double> v) {
  double m = 0.0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  double s = 0.0;
  for (double x : v) s += (x - m) * (x - m);
  return {m, std::sqrt(s / static_cast<double>(v.size()))};
}
}  // namespace detail

/// @brief DATAMASK selection by policy-gradient mask learning (method.md sections 1 to 3).
///
/// @tparam Backend where the loop runs (`default_backend`: `eigen_backend`, CPU threads, except
///         under nvcc, where it is `thrust_backend`; see backend/default.hpp)
/// @tparam Policy the mask policy: how rollouts update the logits (`softmax_policy`)
/// @tparam Scheduler the learning-rate schedule (`linear_lr`, 10 to 1)
/// @tparam Sampler how rollouts are drawn (`gumbel_top_k_sampler`)
template <backend Backend = default_backend, class Policy = softmax_policy,
          lr_scheduler Scheduler = linear_lr, class Sampler = gumbel_top_k_sampler>
  requires mask_policy<Policy, Backend> && rollout_sampler<Sampler, Backend>
class learner {
 public:
  explicit learner(options opt = {}, Policy policy = {}, Scheduler schedule = {},
                   Sampler sampler = {}, Backend b = {})
      : opt_(std::move(opt)),
        policy_(std::move(policy)),
        schedule_(std::move(schedule)),
        sampler_(std::move(sampler)),
        backend_(std::move(b)) {}

  [[nodiscard]] const options& settings() const { return opt_; }

  /// @brief Selects S items of one block.
  /// @param p the block: embeddings, quality columns, ids
  /// @param diversity a `diversity_objective` or a `diversity_mix` of them (`no_diversity{}` for
  ///        quality only)
  /// @throws invalid_input for bad input or settings; the message names the input.
  template <class T, class Diversity>
  [[nodiscard]] selection_result select(const problem<T>& p, const Diversity& diversity) const {
    static_assert(std::is_floating_point_v<T>, "datamask: embeddings must be float or double");
    constexpr bool ok = detail::mix_models<Diversity, T>::value;
    static_assert(ok,
                  "datamask::learner::select: the diversity argument does not model "
                  "datamask::diversity_objective<D, T>: it needs a const call operator "
                  "double(const datamask::subset_view<T>&), or must be a datamask::diversity_mix "
                  "of such objectives");
    if constexpr (ok) {
      return run(p, detail::as_mix(diversity), false);
    } else {
      return {};
    }
  }

  /// @brief The terms of f and the scales this learner would use on `p` (calibrated from
  /// uniform subsets of the first active batch, `options::scales` under fixed scaling, or 1
  /// under raw and group scaling), without
  /// learning. Greedy baselines and checks use it to optimise exactly the f a run optimises.
  template <class T, class Diversity>
  [[nodiscard]] std::vector<term_value> calibrate(const problem<T>& p,
                                                  const Diversity& diversity) const {
    static_assert(detail::mix_models<Diversity, T>::value,
                  "datamask::learner::calibrate: the diversity argument does not model "
                  "datamask::diversity_objective<D, T>");
    return run(p, detail::as_mix(diversity), true).terms;
  }

 private:
  template <class T, class Mix>
  selection_result run(const problem<T>& p, const Mix& mix, bool calibrate_only) const {
    using ivec = typename Backend::template vector<index_t>;
    using dvec = typename Backend::template vector<double>;
    check_settings();
    Backend b = backend_;
    if constexpr (requires { b.threads = opt_.threads; }) b.threads = opt_.threads;
    const detail::prepared data = detail::prepare(p, opt_.normalized, opt_.threads);
    const index_t n = data.n;
    const index_t s_count = detail::selection_size(opt_, n);
    detail::term_plan plan = detail::plan_terms(mix, opt_.lambda, !data.quality.empty());
    DATAMASK_EXPECTS(opt_.scaling == term_scaling::fixed || opt_.scales.empty(), "scales",
                     "were given, but scaling is not term_scaling::fixed");
    if (opt_.scaling == term_scaling::fixed) {
      DATAMASK_EXPECTS(opt_.scales.size() == plan.terms.size(), "scales", "has ",
                       opt_.scales.size(), " values, expected one per term of f (",
                       plan.terms.size(), ": quality when lambda > 0, then each diversity "
                       "objective with a positive weight when lambda < 1)");
      for (std::size_t t = 0; t < plan.terms.size(); ++t) {
        DATAMASK_EXPECTS(std::isfinite(opt_.scales[t]) && opt_.scales[t] > 0.0, "scales",
                         "value ", t, " (term '", plan.terms[t].name,
                         "') must be finite and > 0, found ", opt_.scales[t]);
        plan.terms[t].scale = opt_.scales[t];
      }
    }
    DATAMASK_EXPECTS(opt_.init != init_mode::quality || !data.quality.empty(), "init",
                     "quality initialisation needs quality scores");
    DATAMASK_EXPECTS((opt_.prune == 0.0 && !opt_.prune_threshold) || !data.quality.empty(),
                     "prune", "pruning by quality needs quality scores");

    selection_result res;
    res.selected = s_count;
    // 1. Pruning.
    std::vector<index_t> kept;
    kept.reserve(static_cast<std::size_t>(n));
    if (!data.quality.empty()) {
      res.prune_threshold = detail::prune_threshold(opt_, data.quality);
      for (index_t i = 0; i < n; ++i) {
        if (data.quality[i] >= res.prune_threshold) kept.push_back(i);
      }
    } else {
      for (index_t i = 0; i < n; ++i) kept.push_back(i);
    }
    res.kept = static_cast<index_t>(kept.size());
    DATAMASK_EXPECTS(res.kept >= s_count, "prune", "keeps ", res.kept,
                     " items (threshold ", res.prune_threshold, "), fewer than the S = ", s_count,
                     " to select");

    // 2. Initial logits (pruned rows are never active; they read out as -infinity).
    std::vector<double> init(static_cast<std::size_t>(n), 0.0);
    if (opt_.init == init_mode::quality) {
      double lo = std::numeric_limits<double>::infinity();
      double hi = -lo;
      for (index_t r : kept) {
        lo = std::min(lo, data.quality[r]);
        hi = std::max(hi, data.quality[r]);
      }
      const double delta = hi > lo ? 0.01 * (hi - lo) : 1.0;
      for (index_t r : kept) init[r] = std::log(data.quality[r] - lo + delta);
    }
    if (!opt_.initial_logits.empty()) {
      DATAMASK_EXPECTS(static_cast<index_t>(opt_.initial_logits.size()) == n, "initial_logits",
                       "has ", opt_.initial_logits.size(), " values, expected one per row (", n, ")");
      for (index_t r : kept) {
        DATAMASK_EXPECTS(std::isfinite(opt_.initial_logits[r]), "initial_logits", "row ", r,
                         " is not finite");
        init[r] = opt_.initial_logits[r];
      }
    }

    const auto ds = b.make_dataset(p.embeddings, std::span<const double>(data.inv_norms),
                                   std::span<const double>(data.sq_norms),
                                   std::span<const id_t>(data.ids));
    const ivec kept_dev = b.to_device(std::span<const index_t>(kept));
    dvec logits = b.to_device(std::span<const double>(init));
    const rng::philox_key key = rng::block_key(opt_.seed, opt_.block);

    res.active = std::min(res.kept, std::max<index_t>(std::llround(opt_.active_fraction *
                                                                    static_cast<double>(res.kept)),
                                                      opt_.min_active));
    res.rollout_size = std::clamp<index_t>(
        std::llround(static_cast<double>(res.active) * static_cast<double>(s_count) /
                     static_cast<double>(res.kept)),
        1, res.active);
    const index_t m = res.active;
    const index_t k = res.rollout_size;
    const index_t g_count = opt_.rollouts;
    const std::size_t nterms = plan.terms.size();

    dvec quality_dev;
    if (plan.quality) quality_dev = b.to_device(std::span<const double>(data.quality));

    // Scores every term on `count` subsets: vals[t * count + g].
    auto score = [&](const ivec& subsets, index_t count, index_t size, const ivec& reference,
                     std::vector<double>& vals) {
      vals.assign(nterms * static_cast<std::size_t>(count), 0.0);
      if (plan.quality) {
        std::span<double> out(vals.data(), static_cast<std::size_t>(count));
        b.gather_sum(quality_dev, subsets, count, size, out);
        if (opt_.quality == quality_aggregate::mean) {
          for (double& v : out) v /= static_cast<double>(size);
        }
      }
      mix.for_each([&](auto i, const auto& objective, double /*w*/) {
        const int t = plan.slot[i];
        if (t < 0) return;
        std::span<double> out(vals.data() + t * count, static_cast<std::size_t>(count));
        b.evaluate(objective, ds, subsets, count, size, reference, out);
      });
    };

    const bool quality_only = opt_.lambda == 1.0;
    const bool learn = !quality_only && s_count < res.kept;  // steps = 0 still calibrates
    ivec active;
    ivec subsets;
    std::vector<double> vals;
    // Every rollout is a complete candidate selection: keep the best one evaluated.
    const bool track_best = learn && opt_.keep_best_rollout && m == res.kept && k == s_count &&
                            opt_.scaling != term_scaling::group;
    best_rollout best;
    if (learn) {
      // 3. Calibrate the term scales on uniform subsets of the first active batch.
      if (opt_.scaling == term_scaling::calibrated) {
        b.active_batch(ds, kept_dev, key, 1u, m, active);
        const std::vector<double> zeros(static_cast<std::size_t>(n), 0.0);
        const dvec zeros_dev = b.to_device(std::span<const double>(zeros));
        const index_t c = opt_.calibration_subsets;
        b.gumbel_top_k(zeros_dev, ds, active, key, 0u, 0u, c, k, subsets);
        score(subsets, c, k, active, vals);
        for (std::size_t t = 0; t < nterms; ++t) {
          const double sd =
              detail::mean_std(std::span<const double>(vals.data() + t * c, static_cast<std::size_t>(c))).second;
          plan.terms[t].scale = (std::isfinite(sd) && sd > 0.0) ? sd : 1.0;
        }
      }
      if (calibrate_only) {
        res.terms = std::move(plan.terms);
        return res;
      }

      // 4. The loop.
      std::vector<double> rewards(static_cast<std::size_t>(g_count));
      std::vector<double> coef(static_cast<std::size_t>(g_count));
      std::vector<double> term_means(nterms);
      dvec scratch;
      if (track_best) {
        best = opt_.initial_best;
        DATAMASK_EXPECTS(best.rows.empty() || static_cast<index_t>(best.rows.size()) == s_count,
                         "initial_best", "has ", best.rows.size(), " rows, expected S = ", s_count);
        // From a snapshot: every row must exist, be kept, and appear once.
        for (index_t r : detail::sorted_distinct_rows(best.rows, n, "initial_best")) {
          DATAMASK_EXPECTS(std::binary_search(kept.begin(), kept.end(), r), "initial_best", "row ",
                           r, " was pruned (quality below the threshold ", res.prune_threshold, ")");
        }
      }
      res.history.reserve(static_cast<std::size_t>(opt_.steps));
      res.steps_run = std::min(opt_.first_step - 1, opt_.steps);  // resumed: those are done
      for (index_t step = opt_.first_step; step <= opt_.steps; ++step) {
        const auto st = static_cast<std::uint32_t>(step);
        const double lr = schedule_(step, opt_.steps);
        b.active_batch(ds, kept_dev, key, st, m, active);
        sampler_.sample(b, logits, ds, active, key, st, g_count, k, subsets);
        score(subsets, g_count, k, active, vals);
        mix_rewards(plan, vals, g_count, rewards);
        for (std::size_t t = 0; t < nterms; ++t) {
          term_means[t] = detail::mean_std(std::span<const double>(vals.data() + t * g_count,
                                                                   static_cast<std::size_t>(g_count)))
                              .first;
        }
        const bool finite = std::all_of(rewards.begin(), rewards.end(),
                                         [](double r) { return std::isfinite(r); });
        const auto [mean, sd] = detail::mean_std(rewards);
        if (track_best && finite) {
          const auto g = std::max_element(rewards.begin(), rewards.end()) - rewards.begin();
          if (rewards[g] > best.reward) {
            const std::vector<index_t> all = b.to_host(subsets);
            best.rows.assign(all.begin() + g * k, all.begin() + (g + 1) * k);
            best.reward = rewards[g];
          }
        }
        if (!finite) {
          ++res.nonfinite_steps;
        } else if (!(sd > 0.0)) {
          ++res.zero_variance_steps;
        } else {
          for (index_t g = 0; g < g_count; ++g) {
            const double a = opt_.advantage == advantage_mode::group_normalized
                                 ? (rewards[g] - mean) / (sd + 1e-8)
                                 : static_cast<double>(g_count) / static_cast<double>(g_count - 1) *
                                       (rewards[g] - mean);
            coef[g] = lr * a / static_cast<double>(g_count);
          }
          policy_.update(b, logits, active, subsets, g_count, k, coef, scratch);
        }
        const double rmax = finite ? *std::max_element(rewards.begin(), rewards.end())
                                   : std::numeric_limits<double>::quiet_NaN();
        res.history.push_back(step_record{step, lr, finite ? mean : rmax, rmax, term_means});
        res.steps_run = step;
        const step_info info{step, opt_.steps, lr, res.history.back().reward_mean, rmax,
                             std::span<const double>(term_means)};
        if (opt_.on_step) opt_.on_step(info);
        const bool stop = opt_.stop && opt_.stop(info);
        if (opt_.on_snapshot &&
            (stop || (opt_.snapshot_every > 0 && step % opt_.snapshot_every == 0))) {
          const std::vector<double> host = b.to_host(logits);
          opt_.on_snapshot(info, std::span<const double>(host), best);
        }
        if (stop) {
          res.stopped_early = step < opt_.steps;
          break;
        }
      }
    }

    if (calibrate_only) {
      res.terms = std::move(plan.terms);
      return res;
    }

    // 5. Read out.
    if (quality_only || s_count == res.kept) {
      // f is modular (or every kept item is selected): the exact optimum is the top S by quality.
      const dvec q = b.to_device(std::span<const double>(
          data.quality.empty() ? std::vector<double>(static_cast<std::size_t>(n), 0.0) : data.quality));
      res.rows = b.top_rows(q, ds, kept_dev, s_count);
    } else if (opt_.readout == readout_mode::sample) {
      ivec one;
      b.gumbel_top_k(logits, ds, kept_dev, key, 0u, rng::stream_readout, 1, s_count, one);
      const std::vector<index_t> drawn = b.to_host(one);
      res.rows = b.top_rows(logits, ds, b.to_device(std::span<const index_t>(drawn)), s_count);
    } else {
      res.rows = b.top_rows(logits, ds, kept_dev, s_count);
    }
    if (track_best && !best.rows.empty() && opt_.readout == readout_mode::top_logits) {
      // Both candidates on the final evaluation (whole block as reference set); ties keep the
      // read-out.
      // Both in the read-out's order (final logit, descending, ties to the smaller id), so the
      // same set is scored by the same sums and a tie stays a tie.
      const std::vector<index_t> best_rows =
          b.top_rows(logits, ds, b.to_device(std::span<const index_t>(best.rows)), s_count);
      std::vector<index_t> both(res.rows);
      both.insert(both.end(), best_rows.begin(), best_rows.end());
      std::vector<index_t> all(static_cast<std::size_t>(n));
      std::iota(all.begin(), all.end(), index_t{0});
      std::vector<double> two;
      score(b.to_device(std::span<const index_t>(both)), 2, s_count,
            b.to_device(std::span<const index_t>(all)), two);
      double f_read = 0.0;
      double f_best = 0.0;
      for (std::size_t t = 0; t < nterms; ++t) {
        f_read += plan.terms[t].weight * two[t * 2] / plan.terms[t].scale;
        f_best += plan.terms[t].weight * two[t * 2 + 1] / plan.terms[t].scale;
      }
      if (f_best > f_read) {
        res.rows = best_rows;
        res.best_rollout_used = true;
      }
    }
    res.ids.reserve(res.rows.size());
    for (index_t r : res.rows) res.ids.push_back(data.ids[r]);
    res.logits = b.to_host(logits);
    {
      std::vector<char> is_kept(static_cast<std::size_t>(n), 0);
      for (index_t r : kept) is_kept[r] = 1;
      for (index_t i = 0; i < n; ++i) {
        if (!is_kept[i]) res.logits[i] = -std::numeric_limits<double>::infinity();
      }
    }

    // 6. Evaluate each term on the selection with the whole block as reference set.
    if (opt_.scaling == term_scaling::group) {
      for (auto& t : plan.terms) t.scale = 1.0;
    }
    if (opt_.evaluate_selection) {
      std::vector<index_t> all(static_cast<std::size_t>(n));
      std::iota(all.begin(), all.end(), index_t{0});
      const ivec sel = b.to_device(std::span<const index_t>(res.rows));
      score(sel, 1, s_count, b.to_device(std::span<const index_t>(all)), vals);
      res.objective = 0.0;
      for (std::size_t t = 0; t < nterms; ++t) {
        plan.terms[t].raw = vals[t];
        res.objective += plan.terms[t].weight * vals[t] / plan.terms[t].scale;
      }
      res.evaluated = true;
    }
    res.terms = std::move(plan.terms);
    return res;
  }

  /// r_g = sum_t weight_t * value_tg / scale_t, or with group scaling the z-score of each term
  /// over the G rollouts (a term constant over the rollouts contributes 0).
  void mix_rewards(const detail::term_plan& plan, const std::vector<double>& vals, index_t g_count,
                   std::vector<double>& rewards) const {
    std::fill(rewards.begin(), rewards.end(), 0.0);
    for (std::size_t t = 0; t < plan.terms.size(); ++t) {
      const double* v = vals.data() + t * g_count;
      double shift = 0.0;
      double div = plan.terms[t].scale;
      if (opt_.scaling == term_scaling::group) {
        const auto [mean, sd] = detail::mean_std(std::span<const double>(v, static_cast<std::size_t>(g_count)));
        shift = mean;
        div = sd > 0.0 ? sd : std::numeric_limits<double>::infinity();
      }
      for (index_t g = 0; g < g_count; ++g) rewards[g] += plan.terms[t].weight * (v[g] - shift) / div;
    }
  }

  void check_settings() const {
    validate(static_cast<const datamask::settings&>(opt_));
    DATAMASK_EXPECTS(opt_.first_step >= 1, "first_step", "must be at least 1, found ",
                     opt_.first_step);
  }

  options opt_;
  Policy policy_;
  Scheduler schedule_;
  Sampler sampler_;
  Backend backend_;
};

/// @brief Selects with the default policies on `default_backend`:
/// `datamask::select(problem, datamask::pairwise_similarity{}, opts)`.
template <class T, class Diversity>
[[nodiscard]] selection_result select(const problem<T>& p, const Diversity& diversity,
                                      const options& opt = {}) {
  return learner<>(opt).select(p, diversity);
}

}  // namespace datamask
