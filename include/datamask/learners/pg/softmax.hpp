// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The softmax-logit mask policy and its two log-probability gradients, written once
/// against the backend's executor: the backend keeps the memory, the grouping of a step's
/// rollout entries by row (a sort) and the executor; the gradient's maths is here.
///
/// Every sum that decides a logit runs inside one functor call in a fixed order (a row's
/// entries in increasing rollout order; a rollout's items in draw order), so the update has the
/// same bits on every backend and thread count wherever the maths library agrees (under CUDA,
/// `exp` is CUDA's and may differ from glibc's in the last bit).

#include <array>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "datamask/exec/backend/concept.hpp"
#include "datamask/core/config.hpp"
#include "datamask/core/detail/sorted_search.hpp"
#include "datamask/core/enum_names.hpp"
#include "datamask/core/error.hpp"
#include "datamask/exec/ops.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

/// @brief Gradient of ln P(mask) used by the policy update (docs/method.md section 2).
enum class gradient_mode {
  relaxed,       ///< k independent softmax draws: L_j += eta (1/G) sum_g A_g 1[j in M_g]
  plackett_luce  ///< the exact gradient of the without-replacement (Plackett-Luce) draw
};

template <>
struct enum_traits<gradient_mode> {
  static constexpr std::array<enum_choice<gradient_mode>, 2> choices{
      {{"relaxed", gradient_mode::relaxed}, {"plackett-luce", gradient_mode::plackett_luce}}};
};

/// @brief Parses "relaxed" or "plackett-luce" (also "plackett_luce"). @throws invalid_input.
inline gradient_mode parse_gradient(std::string_view text, const char* input = "logprob") {
  return parse_enum<gradient_mode>(text, input);
}

namespace detail::policy {

/// The rollout entries e = g k + t grouped by row (`backend::entries_by_row`): for active row r,
/// the entries with subsets[e] == r, in increasing e, from lower_bound(rows, r) on.
struct row_entries {
  const index_t* rows;     ///< G k rows, ascending
  const index_t* entries;  ///< their entries, ascending within a row
  index_t total;           ///< G k
  /// The first position of row r's entries.
  [[nodiscard]] DATAMASK_HOST_DEVICE index_t first(index_t r) const { return lower_bound(rows, total, r); }
};

/// The relaxed update of one active row: the coefficients of the rollouts that drew it, summed
/// in increasing rollout order, then added.
struct relaxed_row_update {
  const index_t* active;
  row_entries by_row;
  index_t k;
  const double* coef;
  double* logits;
  DATAMASK_HOST_DEVICE void operator()(index_t a) const {
    const index_t r = active[a];
    double acc = 0.0;
    for (index_t i = by_row.first(r); i < by_row.total && by_row.rows[i] == r; ++i) {
      acc += coef[by_row.entries[i] / k];
    }
    logits[r] += acc;
  }
};

/// L_r of active row a, a term of the shift's max.
struct logit_at {
  const index_t* active;
  const double* logits;
  DATAMASK_HOST_DEVICE double operator()(index_t a) const { return logits[active[a]]; }
};

/// w[a] = exp(L_r - shift) for active row a = r.
struct shifted_weight {
  const index_t* active;
  const double* logits;
  double shift;
  double* w;
  DATAMASK_HOST_DEVICE void operator()(index_t a) const { w[a] = ::exp(logits[active[a]] - shift); }
};

/// Plackett-Luce, per rollout: the weight of the active rows it did not draw (summed in active
/// order), then Z_t as suffix sums (each a sum of positive terms, never a difference: no
/// cancellation when k is close to m) and cum_t = sum_{s <= t} 1 / Z_s.
struct plackett_luce_rollout {
  const index_t* active;
  const double* w;  ///< exp(L - shift) per active position
  index_t m;
  const index_t* sorted_per_rollout;  ///< each rollout's k rows, ascending
  const index_t* subsets;
  index_t k;
  const double* logits;
  double shift;
  double* cum;   ///< G x k
  double* wsel;  ///< G x k
  DATAMASK_HOST_DEVICE void operator()(index_t g) const {
    const index_t* mine = sorted_per_rollout + g * k;
    double rest = 0.0;
    for (index_t a = 0; a < m; ++a) {
      if (!contains(mine, k, active[a])) rest += w[a];
    }
    const index_t* sel = subsets + g * k;
    double* c = cum + g * k;
    double* ws = wsel + g * k;
    for (index_t t = 0; t < k; ++t) ws[t] = ::exp(logits[sel[t]] - shift);
    double suffix = rest;
    for (index_t t = k - 1; t >= 0; --t) {
      suffix += ws[t];
      c[t] = suffix;
    }
    double acc = 0.0;
    for (index_t t = 0; t < k; ++t) {
      acc += 1.0 / c[t];
      c[t] = acc;
    }
  }
};

/// last[g] = cum of rollout g's last draw.
struct last_of_rollout {
  const double* cum;
  index_t k;
  double* last;
  DATAMASK_HOST_DEVICE void operator()(index_t g) const { last[g] = cum[g * k + (k - 1)]; }
};

/// Plackett-Luce, per active row: -w u, then each drawing rollout's term in rollout order.
struct plackett_luce_row_update {
  const index_t* active;
  const double* w;
  double u;
  row_entries by_row;
  index_t k;
  const double* coef;
  const double* cum;
  const double* wsel;
  double* logits;
  DATAMASK_HOST_DEVICE void operator()(index_t a) const {
    const index_t r = active[a];
    double acc = -w[a] * u;
    for (index_t i = by_row.first(r); i < by_row.total && by_row.rows[i] == r; ++i) {
      const index_t e = by_row.entries[i];
      const index_t g = e / k;
      acc += coef[g] * (1.0 - wsel[e] * (cum[e] - cum[g * k + (k - 1)]));
    }
    logits[r] += acc;
  }
};

}  // namespace detail::policy

/// @brief The relaxed update: L_j += sum_g coef_g 1[j in M_g] on the active rows, each row's
/// coefficients summed in increasing rollout order. With advantages that sum to zero this is the
/// relaxed gradient (its -k p_j part cancels); per-item credit calls it with one item per
/// "rollout" (k = 1), each draw its own coefficient.
/// @param subsets G x k rows (each a subset of `active`)
/// @param coef G coefficients (eta_t A_g / G)
template <backend B>
void relaxed_update(const B& b, typename B::template vector<double>& logits,
                    const typename B::template vector<index_t>& active,
                    const typename B::template vector<index_t>& subsets, index_t g_count, index_t k,
                    std::span<const double> coef) {
  auto exec = b.make_executor();
  const auto grouped = b.entries_by_row(active, subsets);
  const detail::policy::row_entries by_row{B::data(grouped.rows), B::data(grouped.entries), g_count * k};
  const auto m = static_cast<index_t>(active.size());
  exec.for_each(m, detail::policy::relaxed_row_update{B::data(active), by_row, k, exec.upload(coef),
                                                      B::data(logits)});
}

/// @brief The exact Plackett-Luce update: L_j += sum_g coef_g d ln P(order_g) / d L_j with
/// d ln P / d L_j = 1[j in M] - exp(L_j) sum_{t <= min(k, pos_j)} 1 / Z_t (docs/method.md section 2).
template <backend B>
void plackett_luce_update(const B& b, typename B::template vector<double>& logits,
                          const typename B::template vector<index_t>& active,
                          const typename B::template vector<index_t>& subsets, index_t g_count, index_t k,
                          std::span<const double> coef) {
  namespace dp = detail::policy;
  auto exec = b.make_executor();
  const auto m = static_cast<index_t>(active.size());
  const index_t total = g_count * k;
  const index_t* act = B::data(active);
  double* l = B::data(logits);
  const double shift = exec.reduce(m, dp::logit_at{act, l}, ops::max{}, -std::numeric_limits<double>::infinity());
  double* w = exec.template scratch<double>(m);
  exec.for_each(m, dp::shifted_weight{act, l, shift, w});
  index_t* sorted = exec.template scratch<index_t>(total);
  exec.for_each(g_count, detail::sorted_rows{matrix_view<const index_t>(B::data(subsets), g_count, k), sorted},
                static_cast<double>(k) * 16.0);
  double* cum = exec.template scratch<double>(total);
  double* wsel = exec.template scratch<double>(total);
  exec.for_each(g_count, dp::plackett_luce_rollout{act, w, m, sorted, B::data(subsets), k, l, shift, cum, wsel},
                8.0 * static_cast<double>(m));
  // u = sum_g coef_g cum_g,last on the host, in order (G values come back).
  double* last = exec.template scratch<double>(g_count);
  exec.for_each(g_count, dp::last_of_rollout{cum, k, last});
  std::vector<double> host_last(static_cast<std::size_t>(g_count));
  exec.download(static_cast<const double*>(last), std::span<double>(host_last));
  double u = 0.0;
  for (index_t g = 0; g < g_count; ++g) u += coef[g] * host_last[g];
  const auto grouped = b.entries_by_row(active, subsets);
  const dp::row_entries by_row{B::data(grouped.rows), B::data(grouped.entries), total};
  exec.for_each(m, dp::plackett_luce_row_update{act, w, u, by_row, k, exec.upload(coef), cum, wsel, l});
}

/// @brief One logit per item; masks are k draws without replacement from softmax(L) over the
/// active items. The update is plain gradient ascent, no optimiser state.
struct softmax_policy {
  gradient_mode mode = gradient_mode::relaxed;

  template <class B>
  void update(const B& b, typename B::template vector<double>& logits,
              const typename B::template vector<index_t>& active,
              const typename B::template vector<index_t>& subsets, index_t g, index_t k,
              std::span<const double> coef) const {
    if (mode == gradient_mode::relaxed) {
      relaxed_update(b, logits, active, subsets, g, k, coef);
    } else {
      plackett_luce_update(b, logits, active, subsets, g, k, coef);
    }
  }

  /// Per-item credit (`item_credit_policy`): each of the `entries` draws has its own
  /// coefficient. Only the relaxed gradient has this form (the Plackett-Luce gradient of a draw
  /// depends on its whole rollout).
  [[nodiscard]] bool takes_item_credit() const { return mode == gradient_mode::relaxed; }

  /// L_j += the coefficients of j's draws, summed in entry order: the relaxed update with every
  /// entry a rollout of one item.
  template <class B>
  void update_items(const B& b, typename B::template vector<double>& logits,
                    const typename B::template vector<index_t>& active,
                    const typename B::template vector<index_t>& draws, index_t entries,
                    std::span<const double> coef) const {
    relaxed_update(b, logits, active, draws, entries, 1, coef);
  }
};

}  // namespace datamask
