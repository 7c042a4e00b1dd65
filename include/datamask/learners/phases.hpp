// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The phases every mask optimiser of a block shares, as separate functions: validate
/// and prepare the block, prune (kept rows), the selection size, the initial logits, the
/// calibrated or fixed scales, scoring subsets, the read-out and the final evaluation into a
/// `selection_result`.
///
/// Why separate: the policy-gradient learner (learner.hpp) is one optimiser over these phases;
/// another (a continuous relaxation, a greedy polish) calls the same functions instead of
/// copying them, so S, the kept rows, the scales and the reported f are the same for all.
/// Typical order:
/// @code
///   auto ctx = phases::make_context(b, p, mix, opt);            // checks, kept rows, S, upload
///   auto [m, k] = phases::batch_sizes(ctx.blk, opt);            // active batch, rollout size
///   auto init = phases::initial_logits(ctx.blk, opt, resumed);  // init mode or resumed logits
///   if (phases::learns(ctx.blk, opt)) phases::calibrate_scales(ctx, m, k);
///   ... optimise the logits ...
///   auto rows = phases::read_out(ctx, logits);
///   selection_result res;
///   phases::finish(ctx, phases::scored_rows{std::move(rows), {}, false}, host_logits, nullptr, res);
/// @endcode

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "datamask/exec/backend/concept.hpp"
#include "datamask/core/detail/prepare.hpp"
#include "datamask/objectives/function.hpp"
#include "datamask/core/options.hpp"
#include "datamask/learners/pg/advantage.hpp"
#include "datamask/core/philox.hpp"

namespace datamask::phases {

/// @brief What the host knows of one block before optimising: its per-row quantities, the
/// terms of f, the rows kept after pruning and S.
struct block_plan {
  detail::prepared data;
  detail::term_plan plan;
  std::vector<index_t> kept;  ///< rows kept after pruning, increasing
  index_t selected = 0;       ///< S
  double prune_threshold = -std::numeric_limits<double>::infinity();
  [[nodiscard]] index_t rows() const { return data.n; }
  [[nodiscard]] index_t kept_count() const { return static_cast<index_t>(kept.size()); }
};

/// @brief Under `term_scaling::fixed`, sets each term's scale from `s.scales` (one per term,
/// finite and > 0: the table's range for `scales`, checked here where the term names are known).
inline void apply_fixed_scales(detail::term_plan& plan, const settings& s) {
  if (s.scaling != term_scaling::fixed) return;
  DATAMASK_EXPECTS(s.scales.size() == plan.terms.size(), "scales", "has ", s.scales.size(),
                   " values, expected one per term of f (", plan.terms.size(),
                   ": quality when lambda > 0, then each diversity objective with a positive "
                   "weight when lambda < 1)");
  for (std::size_t t = 0; t < plan.terms.size(); ++t) {
    DATAMASK_EXPECTS(std::isfinite(s.scales[t]) && s.scales[t] > 0.0, "scales", "value ", t,
                     " (term '", plan.terms[t].name, "') must be finite and > 0, found ",
                     s.scales[t]);
    plan.terms[t].scale = s.scales[t];
  }
}

/// @brief The rows whose combined quality is at least `threshold` (all rows without quality).
inline std::vector<index_t> kept_rows(const detail::prepared& data, double threshold) {
  std::vector<index_t> kept;
  kept.reserve(static_cast<std::size_t>(data.n));
  for (index_t i = 0; i < data.n; ++i) {
    if (data.quality.empty() || data.quality[i] >= threshold) kept.push_back(i);
  }
  return kept;
}

/// @brief Validates the settings and the block, and computes the host plan: per-row
/// quantities, S, the terms of f (with fixed scales applied), the prune threshold, kept rows.
/// @throws invalid_input naming the input or setting.
template <class T, class Mix>
block_plan prepare_block(const problem<T>& p, const Mix& mix, const settings& s,
                         const detail::prepared* given = nullptr) {
  validate(s);
  block_plan blk;
  blk.data = detail::prepared_of(p, given, s.normalized, s.threads);
  blk.selected = detail::selection_size(s, blk.data.n);
  const bool has_quality = !blk.data.quality.empty();
  blk.plan = detail::plan_terms(mix, s.lambda, has_quality);
  apply_fixed_scales(blk.plan, s);
  DATAMASK_EXPECTS(s.init != init_mode::quality || has_quality, "init",
                   "quality initialisation needs quality scores");
  DATAMASK_EXPECTS((s.prune == 0.0 && !s.prune_threshold) || has_quality, "prune",
                   "pruning by quality needs quality scores");
  if (has_quality) blk.prune_threshold = detail::prune_threshold(s, blk.data.quality);
  blk.kept = kept_rows(blk.data, blk.prune_threshold);
  DATAMASK_EXPECTS(blk.kept_count() >= blk.selected, "prune", "keeps ", blk.kept_count(),
                   " items (threshold ", blk.prune_threshold, "), fewer than the S = ",
                   blk.selected, " to select");
  return blk;
}

/// @brief Whether a mask must be learned: f is not modular (lambda < 1) and not every kept
/// item is selected. Otherwise the exact optimum is the top S by quality (see `read_out`).
inline bool learns(const block_plan& blk, const settings& s) {
  return s.lambda != 1.0 && blk.selected < blk.kept_count();
}

/// @brief The active batch size m and the rollout size k = round(m S / kept), in [1, m].
struct batch_size {
  index_t active = 0;
  index_t rollout = 0;
};
/// `max_active` caps m (the rollout size follows m).
inline batch_size batch_sizes(index_t kept, index_t selected, const settings& s,
                              index_t max_active = std::numeric_limits<index_t>::max()) {
  batch_size z;
  z.active = std::min({kept, max_active,
                       std::max<index_t>(std::llround(s.active_fraction * static_cast<double>(kept)),
                                         s.min_active)});
  z.rollout = std::clamp<index_t>(
      std::llround(static_cast<double>(z.active) * static_cast<double>(selected) /
                   static_cast<double>(kept)),
      1, z.active);
  return z;
}
inline batch_size batch_sizes(const block_plan& blk, const settings& s) {
  return batch_sizes(blk.kept_count(), blk.selected, s);
}

/// @brief One logit per row: the `init` logits, or the resumed ones (`resumed`, a snapshot's
/// `resume_point::state`; empty: none) on kept rows. Pruned rows hold 0 here; they are never
/// active and read out as -infinity.
inline std::vector<double> initial_logits(const block_plan& blk, const settings& s, std::span<const double> resumed) {
  const index_t n = blk.rows();
  std::vector<double> init(static_cast<std::size_t>(n), 0.0);
  if (s.init == init_mode::quality) {
    double lo = std::numeric_limits<double>::infinity();
    double hi = -lo;
    for (index_t row : blk.kept) {
      lo = std::min(lo, blk.data.quality[row]);
      hi = std::max(hi, blk.data.quality[row]);
    }
    const double delta = hi > lo ? 0.01 * (hi - lo) : 1.0;
    for (index_t row : blk.kept) init[row] = std::log(blk.data.quality[row] - lo + delta);
  }
  if (!resumed.empty()) {
    DATAMASK_EXPECTS(static_cast<index_t>(resumed.size()) == n, "resume_point.state", "has ", resumed.size(),
                     " values, expected one logit per row (", n, ")");
    for (index_t row : blk.kept) {
      DATAMASK_EXPECTS(std::isfinite(resumed[row]), "resume_point.state", "row ", row, " is not finite");
      init[row] = resumed[row];
    }
  }
  return init;
}

/// @brief Checks a best selection carried over from a snapshot (both learners resume one):
/// empty, or S distinct rows of the block, each kept.
/// @throws invalid_input (`input`) otherwise
inline void check_resumed_best(const block_plan& blk, const best_rollout& best, const char* input) {
  DATAMASK_EXPECTS(best.rows.empty() || static_cast<index_t>(best.rows.size()) == blk.selected, input, "has ",
                   best.rows.size(), " rows, expected S = ", blk.selected);
  for (index_t r : detail::sorted_distinct_rows(best.rows, blk.rows(), input)) {
    DATAMASK_EXPECTS(std::binary_search(blk.kept.begin(), blk.kept.end(), r), input, "row ", r,
                     " was pruned (quality below the threshold ", blk.prune_threshold, ")");
  }
}

/// @brief The block in the backend's memory: the dataset, the kept rows and the combined
/// quality (when f has a quality term).
template <backend B, class T>
struct device_block {
  typename B::template dataset<T> ds;
  typename B::template vector<index_t> kept;
  typename B::template vector<double> quality;
  index_t rows = 0;  ///< n, the rows of the block
};

/// @brief Copies the block's per-row data and kept rows to the backend.
template <backend B, class T>
device_block<B, T> upload(const B& b, const problem<T>& p, const block_plan& blk) {
  device_block<B, T> dev{
      b.make_dataset(p.embeddings, std::span<const double>(blk.data.inv_norms),
                     std::span<const double>(blk.data.sq_norms), std::span<const id_t>(blk.data.ids)),
      b.to_device(std::span<const index_t>(blk.kept)),
      {},
      blk.rows()};
  if (blk.plan.quality) dev.quality = b.to_device(std::span<const double>(blk.data.quality));
  return dev;
}

/// @brief One block's run as every optimiser sees it: the backend, the block, the mix, the
/// settings, the host plan (per-row quantities prepared once, the terms of f, the kept rows, S)
/// and the block in the backend's memory. The phases below take it instead of each of its parts.
template <backend B, class T, class Mix>
struct block_context {
  B backend;
  const problem<T>& block;
  const Mix& mix;
  const settings& s;
  block_plan blk;
  device_block<B, T> dev;

  using ivec = typename B::template vector<index_t>;
  using dvec = typename B::template vector<double>;
};

/// @brief Validates and prepares a block for a run on `b` (with the run's threads), and copies
/// it to the backend: `prepare_block` (on `given` when the caller prepared the block), then
/// `upload`. `p`, `mix` and `s` must outlive the context.
/// @throws invalid_input naming the input or setting
template <backend B, class T, class Mix>
block_context<B, T, Mix> make_context(const B& b, const problem<T>& p, const Mix& mix, const settings& s,
                                      const detail::prepared* given = nullptr) {
  B backend = b;
  if constexpr (requires { backend.threads = s.threads; }) backend.threads = s.threads;
  block_plan blk = prepare_block(p, mix, s, given);
  device_block<B, T> dev = upload(backend, p, blk);
  return block_context<B, T, Mix>{std::move(backend), p, mix, s, std::move(blk), std::move(dev)};
}

/// @brief The raw value of every term on `count` subsets of `size` rows (`subsets`, row-major),
/// with `reference` as facility location's V: `vals[t * count + g]`.
template <backend B, class T, class Mix>
void score(const block_context<B, T, Mix>& ctx, const typename B::template vector<index_t>& subsets, index_t count,
           index_t size, const typename B::template vector<index_t>& reference, std::vector<double>& vals) {
  const B& b = ctx.backend;
  const detail::term_plan& plan = ctx.blk.plan;
  const quality_aggregate aggregate = ctx.s.quality;
  vals.assign(plan.terms.size() * static_cast<std::size_t>(count), 0.0);
  if (plan.quality) {
    std::span<double> out(vals.data(), static_cast<std::size_t>(count));
    b.gather_sum(ctx.dev.quality, subsets, count, size, out);
    for (double& v : out) v = detail::aggregate_quality(v, size, aggregate);
  }
  ctx.mix.for_each([&](auto i, const auto& objective, double /*w*/) {
    const int t = plan.slot[i];
    if (t < 0) return;
    std::span<double> out(vals.data() + t * count, static_cast<std::size_t>(count));
    b.evaluate(objective, ctx.dev.ds, subsets, count, size, reference, out);
  });
}

/// @brief Under group scaling, each term's mean and std over the `count` scored subsets (`vals`
/// from `score`; a constant term's std is infinite, so it contributes 0); otherwise both empty
/// (f divides by the terms' scales).
inline std::pair<std::vector<double>, std::vector<double>> group_shift_div(const detail::term_plan& plan,
                                                                           term_scaling scaling,
                                                                           std::span<const double> vals,
                                                                           index_t count) {
  const auto c = static_cast<std::size_t>(count);
  std::pair<std::vector<double>, std::vector<double>> out;
  if (scaling != term_scaling::group) return out;
  for (std::size_t t = 0; t < plan.terms.size(); ++t) {
    const auto [mean, sd] = mean_std(vals.subspan(t * c, c));
    out.first.push_back(mean);
    out.second.push_back(sd > 0.0 ? sd : std::numeric_limits<double>::infinity());
  }
  return out;
}

/// @brief The rewards r_g = f(M_g) of `count` scored subsets (`vals` from `score`). Under group
/// scaling each term is z-scored over the subsets first (a constant term contributes 0).
inline void rewards(const detail::term_plan& plan, term_scaling scaling,
                    std::span<const double> vals, index_t count, std::vector<double>& out) {
  const auto c = static_cast<std::size_t>(count);
  out.resize(c);
  const auto [shift, div] = group_shift_div(plan, scaling, vals, count);
  for (std::size_t g = 0; g < c; ++g) out[g] = plan.combine(vals, c, g, shift, div);
}

/// @brief The name of the first diversity term of f that cannot give its marginals (not a
/// `marginal_objective`); empty when every term can. Per-item credit needs them all.
template <class T, class Mix>
std::string without_marginals(const Mix& mix, const detail::term_plan& plan) {
  std::string missing;
  const auto names = mix.names();
  mix.for_each([&](auto i, const auto& objective, double /*w*/) {
    using D = std::decay_t<decltype(objective)>;
    if (plan.slot[i] >= 0 && !marginal_objective<D, T> && missing.empty()) missing = names[i];
  });
  return missing;
}

/// @brief `credit_mode::automatic` made concrete: per-item credit when the policy's gradient has
/// the relaxed form and every diversity term of `mix` that counts in f (`counts(i)`: term i) is
/// a `cheap_marginal_objective`, else the paper's estimator; `rollout` and `item` as given.
template <class T, class Mix, class Counts>
[[nodiscard]] credit_mode resolve_credit(credit_mode c, bool relaxed_gradient, const Mix& mix, Counts counts) {
  if (c != credit_mode::automatic) return c;
  bool cheap = true;
  mix.for_each([&](auto i, const auto& objective, double /*w*/) {
    using D = std::decay_t<decltype(objective)>;
    cheap = cheap && (!counts(static_cast<std::size_t>(i)) || cheap_marginal_objective<D, T>);
  });
  return relaxed_gradient && cheap ? credit_mode::item : credit_mode::rollout;
}

/// @brief What per-item credit needs of `count` subsets of `size` rows: the raw value of every
/// term (as `score` gives them, `vals[t * count + g]`) and every entry's marginal for each term,
/// `marg[t * count * size + g * size + j]` = term(M_g) - term(M_g without its j-th row). The
/// quality term's marginals come from the host's scores (G k values); the diversity terms'
/// from the backend's `marginals`. Every weighted diversity term must be a
/// `marginal_objective` (check `without_marginals` first).
template <backend B, class T, class Mix>
void score_marginals(const block_context<B, T, Mix>& ctx, const typename B::template vector<index_t>& subsets,
                     index_t count, index_t size, const typename B::template vector<index_t>& reference,
                     std::vector<double>& vals, std::vector<double>& marg) {
  const B& b = ctx.backend;
  auto& dev = ctx.dev;
  auto& mix = ctx.mix;
  auto& blk = ctx.blk;
  const quality_aggregate aggregate = ctx.s.quality;
  const detail::term_plan& plan = blk.plan;
  const auto c = static_cast<std::size_t>(count);
  const auto entries = static_cast<std::size_t>(count * size);
  vals.assign(plan.terms.size() * c, 0.0);
  marg.assign(plan.terms.size() * entries, 0.0);
  if (plan.quality) {
    std::span<double> out(vals.data(), c);
    b.gather_sum(dev.quality, subsets, count, size, out);
    const std::vector<index_t> rows = b.to_host(subsets);
    for (std::size_t e = 0; e < entries; ++e) {
      const double sum = out[e / static_cast<std::size_t>(size)];
      marg[e] = detail::aggregate_quality(sum, size, aggregate) -
                detail::aggregate_quality(sum - blk.data.quality[rows[e]], size - 1, aggregate);
    }
    for (double& v : out) v = detail::aggregate_quality(v, size, aggregate);
  }
  mix.for_each([&](auto i, const auto& objective, double /*w*/) {
    using D = std::decay_t<decltype(objective)>;
    const int t = plan.slot[i];
    if constexpr (marginal_objective<D, T>) {
      if (t < 0) return;
      b.marginals(objective, dev.ds, subsets, count, size, reference,
                  std::span<double>(vals.data() + t * count, c),
                  std::span<double>(marg.data() + static_cast<std::size_t>(t) * entries, entries));
    } else {
      DATAMASK_EXPECTS(t < 0, "credit", "item credit needs each item's marginal, which '",
                       mix.names()[i], "' cannot give (not a datamask::marginal_objective)");
    }
  });
}

/// @brief Per-item credit (`credit_mode::item`): entry e = g k + j (row j of rollout g) gets the
/// marginal gain of f, D_e = sum_t weight_t marg_t,e / div_t (div: the term's scale; under group
/// scaling its std over the rollouts, as `rewards` divides), into `gains`; the advantage
/// estimator (`advantage_estimator::items`) subtracts a leave-one-out baseline from it.
///
/// Why this estimator: under independent inclusion with probabilities q_j, the gradient of
/// E[f] with respect to logit L_j (softmax over the items, sum q = k) is q_j (df/dq_j - the
/// q-weighted mean of df/dq), and 1[j in M] (D_j(M) - b) estimates it term by term, b estimating
/// the mean marginal from rollouts that do not contain this draw. Each item gets its own
/// signal, where the rollout estimator gives all k items of a rollout the same one.
inline void item_gains(const detail::term_plan& plan, term_scaling scaling, std::span<const double> vals,
                       std::span<const double> marg, index_t count, index_t size, std::vector<double>& gains) {
  const std::size_t entries = static_cast<std::size_t>(count) * static_cast<std::size_t>(size);
  const auto div = group_shift_div(plan, scaling, vals, count).second;
  const std::vector<double> zero(plan.terms.size(), 0.0);
  gains.resize(entries);
  for (std::size_t e = 0; e < entries; ++e) gains[e] = plan.combine(marg, entries, e, zero, div);
}

/// @brief The reference set of a step (`settings::reference_size`): `active`, the step's active
/// batch, when the size is 0; else that many kept rows (at most all) drawn into `drawn` by the
/// active-batch draw under the reference stream's own key, independent of the active batch.
template <backend B, class T, class Mix>
const typename B::template vector<index_t>& step_reference(const block_context<B, T, Mix>& ctx, rng::philox_key key,
                                                          std::uint32_t step,
                                                          const typename B::template vector<index_t>& active,
                                                          typename B::template vector<index_t>& drawn) {
  if (ctx.s.reference_size == 0) return active;
  ctx.backend.active_batch(ctx.dev.ds, ctx.dev.kept, rng::stream_key(key, rng::stream_reference), step,
                           ctx.s.reference_size, drawn);
  return drawn;
}

/// @brief Under calibrated scaling, sets each term's scale to its std over
/// `s.calibration_subsets` uniform subsets of k rows of the first active batch, scored against
/// the first step's reference set (`step_reference`); 1, with the term marked `constant`, when
/// the std is not finite or within `constant_term_tolerance` of the term's magnitude. Other
/// scalings keep their scales. Does not depend on the logits.
template <backend B, class T, class Mix>
void calibrate_scales(block_context<B, T, Mix>& ctx, index_t m, index_t k) {
  const settings& s = ctx.s;
  if (!calibrates(s.scaling)) return;
  using ivec = typename B::template vector<index_t>;
  const B& b = ctx.backend;
  const device_block<B, T>& dev = ctx.dev;
  detail::term_plan& plan = ctx.blk.plan;
  const rng::philox_key key = rng::block_key(s.seed, s.block);
  ivec active;
  ivec subsets;
  ivec drawn;
  b.active_batch(dev.ds, dev.kept, key, 1u, m, active);
  const ivec& reference = step_reference(ctx, key, 1u, active, drawn);
  const std::vector<double> zeros(static_cast<std::size_t>(dev.rows), 0.0);
  const auto zeros_dev = b.to_device(std::span<const double>(zeros));
  const index_t c = s.calibration_subsets;
  b.gumbel_top_k(zeros_dev, dev.ds, active, key, 0u, 0u, c, k, subsets);
  std::vector<double> vals;
  score(ctx, subsets, c, k, reference, vals);
  for (std::size_t t = 0; t < plan.terms.size(); ++t) {
    const std::span<const double> v(vals.data() + t * c, static_cast<std::size_t>(c));
    double magnitude = 0.0;
    for (double x : v) {
      detail::check_finite_term(plan.terms[t], x, "on a calibration subset");
      magnitude = std::max(magnitude, std::abs(x));
    }
    // The std of the values brought near 1 by a power of two (exact), so that values near
    // double's limit do not overflow its squares: a term of 1e160 is no constant.
    const int e = magnitude > 0.0 ? std::ilogb(magnitude) : 0;
    std::vector<double> near_one(v.begin(), v.end());
    for (double& x : near_one) x = std::scalbn(x, -e);
    const double sd = std::scalbn(mean_std(near_one).second, e);
    const double tolerance =
        plan.quality && t == 0 ? constant_term_tolerance<double> : constant_term_tolerance<T>;
    const bool constant = !(std::isfinite(sd) && sd > tolerance * magnitude);
    plan.terms[t].scale = constant ? 1.0 : sd;
    plan.terms[t].constant = constant;
  }
}

/// @brief The S selected rows, in read-out order (final logit descending, ties to the smaller
/// id): the top S by quality when no mask is learned (`learns` is false), else one Gumbel-top-S
/// draw (`readout_mode::sample`) or the S largest logits.
template <backend B, class T, class Mix>
std::vector<index_t> read_out(const block_context<B, T, Mix>& ctx, const typename B::template vector<double>& logits) {
  auto& b = ctx.backend;
  auto& dev = ctx.dev;
  auto& blk = ctx.blk;
  auto& s = ctx.s;
  const index_t n = blk.rows();
  if (!learns(blk, s)) {
    const auto q = b.to_device(std::span<const double>(
        blk.data.quality.empty() ? std::vector<double>(static_cast<std::size_t>(n), 0.0)
                                 : blk.data.quality));
    return b.top_rows(q, dev.ds, dev.kept, blk.selected);
  }
  if (s.readout == readout_mode::sample) {
    typename B::template vector<index_t> one;
    b.gumbel_top_k(logits, dev.ds, dev.kept, rng::block_key(s.seed, s.block), 0u,
                   rng::stream_readout, 1, blk.selected, one);
    const std::vector<index_t> drawn = b.to_host(one);
    return b.top_rows(logits, dev.ds, b.to_device(std::span<const index_t>(drawn)), blk.selected);
  }
  return b.top_rows(logits, dev.ds, dev.kept, blk.selected);
}

/// @brief Every row of the block, in the backend's memory: the reference set of the final
/// evaluation.
template <backend B>
typename B::template vector<index_t> all_rows(const B& b, index_t n) {
  std::vector<index_t> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), index_t{0});
  return b.to_device(std::span<const index_t>(all));
}

/// @brief Rows [offset, offset + count) of a backend vector, on the host. A backend may offer
/// `to_host(v, offset, count)` to copy only those; otherwise the whole vector is copied.
template <backend B>
std::vector<index_t> rows_to_host(const B& b, const typename B::template vector<index_t>& v,
                                  index_t offset, index_t count) {
  if constexpr (requires { b.to_host(v, offset, count); }) {
    return b.to_host(v, offset, count);
  } else {
    const std::vector<index_t> all = b.to_host(v);
    return {all.begin() + offset, all.begin() + offset + count};
  }
}

/// @brief A selection and, when scored, the raw value of each term on it (whole block as V).
struct scored_rows {
  std::vector<index_t> rows;
  std::vector<double> raw;  ///< empty: not scored
  bool from_candidate = false;
};

/// @brief Scores the read-out and a candidate selection (a best rollout) on the final
/// evaluation, both in the read-out's order (final logit descending, ties to the smaller id) so
/// that the same set is scored by the same sums; returns the better one with its raw values
/// (ties keep the read-out). Fixed f only (not group scaling).
template <backend B, class T, class Mix>
scored_rows better_of(const block_context<B, T, Mix>& ctx, const typename B::template vector<double>& logits,
                      std::vector<index_t> read, const std::vector<index_t>& candidate,
                      const typename B::template vector<index_t>& all) {
  auto& b = ctx.backend;
  auto& dev = ctx.dev;
  auto& blk = ctx.blk;
  const index_t sc = blk.selected;
  std::vector<index_t> cand =
      b.top_rows(logits, dev.ds, b.to_device(std::span<const index_t>(candidate)), sc);
  std::vector<index_t> both(read);
  both.insert(both.end(), cand.begin(), cand.end());
  std::vector<double> two;
  score(ctx, b.to_device(std::span<const index_t>(both)), 2, sc, all, two);
  const bool take = blk.plan.combine(two, 2, 1) > blk.plan.combine(two, 2, 0);
  scored_rows out{take ? std::move(cand) : std::move(read), {}, take};
  for (std::size_t t = 0; t < blk.plan.terms.size(); ++t) out.raw.push_back(two[t * 2 + (take ? 1 : 0)]);
  return out;
}

/// @brief Fills a result from the chosen rows: ids, logits (pruned rows -infinity), and, when
/// `s.evaluate_selection`, each term's raw value on the rows with the whole block as reference
/// set and f (`sel.raw` when already scored). Under group scaling the reported scales are 1.
template <backend B, class T, class Mix>
void finish(block_context<B, T, Mix>& ctx, scored_rows sel, std::vector<double> host_logits,
            const typename B::template vector<index_t>* all, selection_result& res) {
  auto& b = ctx.backend;
  auto& s = ctx.s;
  block_plan& blk = ctx.blk;
  res.selected = blk.selected;
  res.kept = blk.kept_count();
  res.prune_threshold = blk.prune_threshold;
  res.rows = std::move(sel.rows);
  res.best_rollout_used = sel.from_candidate;
  res.ids.reserve(res.rows.size());
  for (index_t r : res.rows) res.ids.push_back(blk.data.ids[r]);
  std::vector<char> is_kept(static_cast<std::size_t>(blk.rows()), 0);
  for (index_t r : blk.kept) is_kept[r] = 1;
  for (std::size_t i = 0; i < host_logits.size(); ++i) {
    if (!is_kept[i]) host_logits[i] = -std::numeric_limits<double>::infinity();
  }
  res.logits = std::move(host_logits);
  if (s.scaling == term_scaling::group) {
    for (auto& t : blk.plan.terms) t.scale = 1.0;
  }
  if (s.evaluate_selection) {
    if (sel.raw.empty()) {
      const auto ref = all != nullptr ? *all : all_rows(b, blk.rows());
      score(ctx, b.to_device(std::span<const index_t>(res.rows)), 1, blk.selected, ref, sel.raw);
    }
    for (std::size_t t = 0; t < blk.plan.terms.size(); ++t) blk.plan.terms[t].raw = sel.raw[t];
    res.objective = blk.plan.combine(sel.raw);
    res.evaluated = true;
  }
  res.terms = blk.plan.terms;
}

}  // namespace datamask::phases
