// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief f(U) = lambda * F_q(U) / s_q + (1 - lambda) * sum_b v_b F_db(U) / s_b as a fixed set
/// function: the one definition the learner, the greedy baselines, the checks and the
/// command-line program all evaluate.

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "datamask/core/detail/chunked_sum.hpp"
#include "datamask/core/concepts.hpp"
#include "datamask/core/detail/prepare.hpp"
#include "datamask/objectives/mix.hpp"
#include "datamask/core/options.hpp"

namespace datamask {

namespace detail {

/// Which terms of f are on, their names and weights: quality first (when lambda > 0), then each
/// diversity objective with a positive weight (when lambda < 1).
struct term_plan {
  bool quality = false;
  std::vector<int> slot;  ///< per mix member: its index in `terms`, or -1 when off
  std::vector<term_value> terms;

  /// f = sum_t weight_t * (raw_t - shift_t) / scale_t of subset `g`, the raw values laid out
  /// term-major (`raw[t * count + g]`, so one subset is `count = 1, g = 0`). The one place f is
  /// written: the learner's rewards, its best-rollout comparison, its final objective and
  /// `objective_function` all call it. `shift` and `scale` (one per term) replace 0 and the
  /// terms' scales when given (group scaling's z-scores).
  [[nodiscard]] double combine(std::span<const double> raw, std::size_t count = 1,
                               std::size_t g = 0, std::span<const double> shift = {},
                               std::span<const double> scale = {}) const {
    double f = 0.0;
    for (std::size_t t = 0; t < terms.size(); ++t) {
      const double v = shift.empty() ? raw[t * count + g] : raw[t * count + g] - shift[t];
      f += terms[t].weight * v / (scale.empty() ? terms[t].scale : scale[t]);
    }
    return f;
  }
};

/// Refuses a term whose value is not finite: finite inputs can overflow (scores near double's
/// limit summed; embeddings whose products pass float's under the dot kernel), and an infinite
/// or NaN term makes f decide nothing, yet the run would end and report it. `where` says which
/// values ("on the selection", "on a calibration subset").
/// @throws invalid_input naming the term and the input that likely overflowed.
inline void check_finite_term(const term_value& t, double value, std::string_view where) {
  if (std::isfinite(value)) return;
  const bool quality = t.name == "quality";
  throw invalid_input(
      "the " + t.name + " term",
      concat("is ", value, " ", where, ", not finite: ",
             quality ? "the quality scores overflow double when combined (their sum or mean); scale them down"
                     : "its values overflow (the embeddings' products under the kernel, or the objective's own "
                       "arithmetic); scale the embeddings down, or use a kernel that normalises them (cosine)"));
}

/// The quality term of a subset of `size` items whose combined scores sum to `sum`: the one
/// place the mean/sum choice is made (learner and `objective_function`).
[[nodiscard]] inline double aggregate_quality(double sum, index_t size, quality_aggregate how) {
  return how == quality_aggregate::mean && size > 0 ? sum / static_cast<double>(size) : sum;
}

/// `rows` sorted, after checking that each lies in [0, n) and appears once; `input` names them.
inline std::vector<index_t> sorted_distinct_rows(std::vector<index_t> rows, index_t n,
                                                 const char* input) {
  std::sort(rows.begin(), rows.end());
  for (std::size_t c = 0; c < rows.size(); ++c) {
    DATAMASK_EXPECTS(rows[c] >= 0 && rows[c] < n, input, "row ", rows[c], " is outside [0, ", n, ")");
    DATAMASK_EXPECTS(c == 0 || rows[c] != rows[c - 1], input, "row ", rows[c], " appears twice");
  }
  return rows;
}

template <class Mix>
term_plan plan_terms(const Mix& mix, double lambda, bool has_quality) {
  DATAMASK_EXPECTS(std::isfinite(lambda) && lambda >= 0.0 && lambda <= 1.0, "lambda",
                   "must be in [0, 1], found ", lambda);
  term_plan p;
  if (lambda > 0.0) {
    DATAMASK_EXPECTS(has_quality, "quality",
                     "no quality column given, but lambda = ", lambda,
                     " > 0 weighs a quality term; pass quality scores or set lambda = 0");
    p.quality = true;
    p.terms.push_back(term_value{"quality", lambda, 1.0, 0.0});
  }
  const auto names = mix.names();
  mix.for_each([&](auto i, const auto& /*objective*/, double w) {
    DATAMASK_EXPECTS(std::isfinite(w) && w >= 0.0, "objective weights",
                     "weight of '", names[i], "' must be finite and >= 0, found ", w);
    if (lambda < 1.0 && w > 0.0) {
      p.slot.push_back(static_cast<int>(p.terms.size()));
      p.terms.push_back(term_value{names[i], (1.0 - lambda) * w, 1.0, 0.0});
    } else {
      p.slot.push_back(-1);
    }
  });
  DATAMASK_EXPECTS(lambda == 1.0 || p.terms.size() > (p.quality ? 1u : 0u), "objectives",
                   "lambda = ", lambda, " < 1 weighs diversity, but no diversity objective has a "
                   "positive weight");
  return p;
}

}  // namespace detail

/// @brief The objective f of a run as a function of a subset, evaluated on the host.
///
/// The reference set of facility location is the whole block unless one is given. Scales start
/// at 1 (raw); set them from a learner's result to evaluate the f that run optimised.
/// @tparam T the embedding element type
/// @tparam Diversity a diversity objective or a `diversity_mix`
template <class T, class Diversity>
class objective_function {
 public:
  using mix_type = decltype(detail::as_mix(std::declval<Diversity>()));

  /// @throws invalid_input for bad input (same checks as the learner).
  objective_function(const problem<T>& p, const Diversity& diversity, double lambda,
                     quality_aggregate aggregate = quality_aggregate::mean, bool normalized = false,
                     int threads = 0)
      : objective_function(p.embeddings, detail::prepare(p, normalized, threads), diversity, lambda, aggregate,
                           threads) {}

  /// @brief f on rows already prepared (`detail::prepare` of the same block: a learner's
  /// context holds them), without a second pass over the embeddings.
  objective_function(matrix_view<const T> embeddings, detail::prepared data, const Diversity& diversity,
                     double lambda, quality_aggregate aggregate, int threads)
      : x_(embeddings),
        data_(std::move(data)),
        mix_(detail::as_mix(diversity)),
        plan_(detail::plan_terms(mix_, lambda, !data_.quality.empty())),
        aggregate_(aggregate),
        all_(static_cast<std::size_t>(data_.n)),
        threads_(threads) {
    std::iota(all_.begin(), all_.end(), index_t{0});
  }

  /// @brief The terms: names, weights in f, scales (raw values are not filled in here).
  [[nodiscard]] const std::vector<term_value>& terms() const { return plan_.terms; }
  /// @brief Sets the divisor of each term, in `terms()` order.
  void set_scales(std::span<const double> scales) {
    DATAMASK_EXPECTS(scales.size() == plan_.terms.size(), "scales", "has ", scales.size(),
                     " values, expected one per term (", plan_.terms.size(), ")");
    for (std::size_t t = 0; t < scales.size(); ++t) plan_.terms[t].scale = scales[t];
  }
  [[nodiscard]] index_t size() const { return data_.n; }
  [[nodiscard]] std::span<const id_t> ids() const { return data_.ids; }
  [[nodiscard]] std::span<const double> quality() const { return data_.quality; }
  /// @brief The embeddings of the block, as given.
  [[nodiscard]] matrix_view<const T> embeddings() const { return x_; }
  /// @brief 1 / ||e_i|| per row (1 when the caller declared the rows normalised; 0 for a zero row).
  [[nodiscard]] std::span<const double> inv_norms() const { return data_.inv_norms; }
  /// @brief ||e_i||^2 per row (1 when the caller declared the rows normalised).
  [[nodiscard]] std::span<const double> sq_norms() const { return data_.sq_norms; }
  /// @brief The diversity objectives and their weights v_b.
  [[nodiscard]] const mix_type& mix() const { return mix_; }
  /// @brief Per mix member: its index in `terms()`, or -1 when the term is off.
  [[nodiscard]] std::span<const int> term_slots() const { return plan_.slot; }
  /// @brief Whether `terms()[0]` is the quality term.
  [[nodiscard]] bool has_quality_term() const { return plan_.quality; }
  /// @brief Mean or sum of the quality scores over a set.
  [[nodiscard]] quality_aggregate aggregate() const { return aggregate_; }

  /// @brief The raw value of each term on `rows`, with `reference` as facility location's V
  /// (empty: the whole block).
  [[nodiscard]] std::vector<double> raw(std::span<const index_t> rows,
                                        std::span<const index_t> reference = {}) const {
    std::vector<double> out(plan_.terms.size(), 0.0);
    const index_view ref = reference.empty() ? index_view(all_) : index_view(reference);
    // The objectives' own loops (facility location's tiles) use the threads this f was built
    // with, not all cores: a caller that asked for one thread gets one.
    const subset_view<T> s{x_, data_.inv_norms.data(), data_.sq_norms.data(), index_view(rows), ref, threads_};
    if (plan_.quality) {
      // The backends' order of a subset sum (`gather_sum`), so f here is the learners' f.
      const auto k = static_cast<index_t>(rows.size());
      const double q = detail::chunked_sum(k, detail::gathered_at{data_.quality.data(), rows.data()});
      out[0] = detail::aggregate_quality(q, k, aggregate_);
    }
    mix_.for_each([&](auto i, const auto& objective, double /*w*/) {
      if (plan_.slot[i] >= 0) out[plan_.slot[i]] = static_cast<double>(objective(s));
    });
    return out;
  }

  /// @brief The exact mean of f over every set of `size` rows of the block, where every term on
  /// has one: quality (the block's mean score, times S for a sum) and each diversity term a
  /// `subset_mean_objective`; none otherwise. f is linear in its terms, so its mean is theirs.
  [[nodiscard]] std::optional<double> subset_mean(index_t size) const {
    DATAMASK_EXPECTS(size >= 1 && size <= data_.n, "size", "must be in [1, ", data_.n, "], found ", size);
    std::vector<double> out(plan_.terms.size(), 0.0);
    if (plan_.quality) {
      const double mean =
          std::accumulate(data_.quality.begin(), data_.quality.end(), 0.0) / static_cast<double>(data_.n);
      out[0] = aggregate_ == quality_aggregate::mean ? mean : mean * static_cast<double>(size);
    }
    const subset_view<T> s{x_, data_.inv_norms.data(), data_.sq_norms.data(), index_view(all_), index_view(all_),
                           threads_};
    bool exact = true;
    mix_.for_each([&](auto i, const auto& objective, double /*w*/) {
      if (plan_.slot[i] < 0) return;
      if constexpr (subset_mean_objective<std::decay_t<decltype(objective)>, T>) {
        out[plan_.slot[i]] = static_cast<double>(objective.subset_mean(s, size));
      } else {
        exact = false;
      }
    });
    if (!exact) return std::nullopt;
    return combine(out);
  }

  /// @brief f = sum_t weight_t * raw_t / scale_t.
  [[nodiscard]] double combine(std::span<const double> raw_values) const {
    return plan_.combine(raw_values);
  }

  /// @brief f on `rows` with the whole block as reference set.
  [[nodiscard]] double operator()(std::span<const index_t> rows) const { return combine(raw(rows)); }

 private:
  matrix_view<const T> x_;
  detail::prepared data_;
  mix_type mix_;
  detail::term_plan plan_;
  quality_aggregate aggregate_;
  std::vector<index_t> all_;
  int threads_ = 0;
};

}  // namespace datamask
