// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The scorers of the greedy baselines: how the gains of candidates are computed. Not API.
///
/// A scorer splits f into terms (term 0: quality; then one per diversity objective) and gives,
/// for candidates i of the current set S, the candidate-dependent part p_t(i) of each term's
/// gain, weighted, plus a common part, so that f(S + i) - f(S) = sum_t p_t(i) + common(). A
/// term is *bounded* when p_t(i) never grows as S grows (from |S| >= 1) and its weight is not
/// negative: lazy greedy may keep stale values of a bounded term as upper bounds, and must
/// re-score the others. Each scorer provides
/// - `term_count()`, `term_on(t)`, `term_bounded(t)`, `term_accumulate(t, cands, out)` (adds p_t);
/// - `priorities(cands, out)`: out = sum_t p_t in term order (what naive greedy ranks);
/// - `common()`, `add(j)`, `empty_value()`, `lazy_batch()`.

#include <algorithm>
#include <array>
#include <cstddef>
#include <numeric>
#include <optional>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "datamask/core/concepts.hpp"
#include "datamask/core/detail/parallel.hpp"
#include "datamask/objectives/function.hpp"
#include "datamask/objectives/external.hpp"
#include "datamask/core/types.hpp"

namespace datamask::detail::greedy {

/// Operations to evaluate an objective we know nothing about on k rows of dimension d with a
/// reference set of n rows: k d max(k, n), the cost of the dearest built-in (facility location
/// against the block; pairwise similarity costs k d). An over-estimate only opens the one region
/// a round would have opened anyway; an under-estimate would leave each evaluation to open its
/// own region, one per candidate, which is what made greedy slow on a loaded machine (issue 9).
inline double evaluation_work(index_t k, index_t d, index_t n) {
  return static_cast<double>(k) * static_cast<double>(d) * static_cast<double>(std::max(k, n));
}

/// Quality: F = sum q or mean q over the set. Ranked by the candidate-dependent part of the
/// gain, (q_i - min q) / (k + 1) for the mean (non-increasing in k), q_i for the sum.
struct quality_state {
  static constexpr bool diminishing_gains = true;
  std::span<const double> q;
  bool mean = true;
  double qmin = 0.0;
  double sum = 0.0;
  index_t k = 0;

  void accumulate(std::span<const index_t> cands, std::span<double> out, double w) const {
    const double div = mean ? static_cast<double>(k + 1) : 1.0;
    const double shift = mean ? qmin : 0.0;
    for (std::size_t c = 0; c < cands.size(); ++c) out[c] += w * (q[cands[c]] - shift) / div;
  }
  [[nodiscard]] double common() const {
    if (!mean) return 0.0;
    if (k == 0) return qmin;
    return (qmin - sum / static_cast<double>(k)) / static_cast<double>(k + 1);
  }
  void add(index_t j) {
    sum += q[j];
    ++k;
  }
};

/// A diversity objective without `incremental_objective`: gains by evaluating it on S + i
/// (reference set: the block). Not known to be submodular, so never bounded.
template <class T, class D>
struct evaluated_state {
  const D* objective;
  greedy_block<T> block;
  std::vector<index_t> all;
  std::vector<index_t> rows;
  double current = 0.0;

  evaluated_state(const D& o, const greedy_block<T>& b)
      : objective(&o), block(b), all(static_cast<std::size_t>(b.embeddings.rows)) {
    std::iota(all.begin(), all.end(), index_t{0});
    current = eval(rows);
  }
  [[nodiscard]] double eval(const std::vector<index_t>& r) const {
    const subset_view<T> s{block.embeddings, block.inv_norms.data(), block.sq_norms.data(),
                           index_view(std::span<const index_t>(r)), index_view(std::span<const index_t>(all)),
                           block.threads};
    return static_cast<double>((*objective)(s));
  }
  void accumulate(std::span<const index_t> cands, std::span<double> out, double w) const {
    if constexpr (batched_diversity_objective<D, T>) {
      accumulate_batched(cands, out, w);
      return;
    }
    // One region per round at most, and none for a small round (see evaluation_work).
    const double work = evaluation_work(static_cast<index_t>(rows.size()) + 1, block.embeddings.cols,
                                        block.embeddings.rows);
    parallel_for(static_cast<index_t>(cands.size()), block.threads, [&](index_t c) {
      std::vector<index_t> r(rows);
      r.push_back(cands[c]);
      out[c] += w * (eval(r) - current);
    }, work);
  }
  [[nodiscard]] double common() const { return 0.0; }
  void add(index_t j) {
    rows.push_back(j);
    current = eval(rows);
  }

 private:
  /// The round's S + i as batches of subsets, one `evaluate_batch` call each (the same values as
  /// one evaluation per candidate; an objective called at run time, a Python metric, is then
  /// called once per batch), each batch at most `evaluation_batch_rows` row indices.
  void accumulate_batched(std::span<const index_t> cands, std::span<double> out, double w) const {
    const auto k = static_cast<index_t>(rows.size()) + 1;
    const index_t per_batch = std::max<index_t>(1, evaluation_batch_rows / k);
    std::vector<index_t> subsets;
    std::vector<double> values;
    for (std::size_t first = 0; first < cands.size(); first += static_cast<std::size_t>(per_batch)) {
      const std::size_t g = std::min(cands.size() - first, static_cast<std::size_t>(per_batch));
      subsets.resize(g * static_cast<std::size_t>(k));
      for (std::size_t c = 0; c < g; ++c) {
        std::copy(rows.begin(), rows.end(), subsets.begin() + static_cast<std::ptrdiff_t>(c * static_cast<std::size_t>(k)));
        subsets[(c + 1) * static_cast<std::size_t>(k) - 1] = cands[first + c];
      }
      values.assign(g, 0.0);
      const batch_view<T> b{block.embeddings, block.inv_norms.data(), block.sq_norms.data(),
                            make_matrix_view(static_cast<const index_t*>(subsets.data()), static_cast<index_t>(g), k),
                            index_view(std::span<const index_t>(all)), block.threads};
      objective->evaluate_batch(b, std::span<double>(values));
      for (std::size_t c = 0; c < g; ++c) out[first + c] += w * (values[c] - current);
    }
  }
};

/// An objective given at run time: its own greedy state when it brings one (bounded as that
/// state declares), else by evaluation.
struct external_state {
  std::optional<held_greedy_state> own;
  std::optional<evaluated_state<float, external_objective>> evaluated;

  external_state(const external_objective& o, const greedy_block<float>& b) {
    if (o.greedy) {
      own.emplace(o.greedy(b));
    } else {
      evaluated.emplace(o, b);
    }
  }
  void accumulate(std::span<const index_t> cands, std::span<double> out, double w) const {
    own ? own->accumulate(cands, out, w) : evaluated->accumulate(cands, out, w);
  }
  [[nodiscard]] double common() const { return own ? own->common() : evaluated->common(); }
  void add(index_t j) { own ? own->add(j) : evaluated->add(j); }
  [[nodiscard]] bool diminishing_gains() const { return own && own->diminishing; }
  [[nodiscard]] index_t lazy_batch() const { return own ? own->batch : 1; }
};

/// The state greedy keeps for objective D: its own (`incremental_objective`), an objective
/// given at run time's (`external_state`), or by evaluation.
template <class T, class D>
auto make_state(const D& objective, const greedy_block<T>& b) {
  if constexpr (incremental_objective<D, T>) {
    return objective.greedy_state(b);
  } else if constexpr (std::is_same_v<D, external_objective> && std::is_same_v<T, float>) {
    return external_state(objective, b);
  } else {
    return evaluated_state<T, D>(objective, b);
  }
}
template <class T, class D>
using state_t = decltype(make_state<T>(std::declval<const D&>(), std::declval<const greedy_block<T>&>()));

template <class T, class Mix>
struct structured_scorer;

/// f's gains from per-term incremental states (see the file comment). Term t: 0 the quality,
/// t >= 1 the mix's term t - 1 (a `term_list`'s terms one each).
template <class T, class... Ds>
struct structured_scorer<T, diversity_mix<Ds...>> {
  std::optional<quality_state> quality;
  std::tuple<per_term_t<Ds, std::optional<state_t<T, term_type_t<Ds>>>>...> states;
  std::vector<double> w;  ///< per term: weight / scale, 0 where off

  template <class D>
  structured_scorer(const objective_function<T, D>& f, int threads) : w(1 + f.mix().term_count(), 0.0) {
    const auto& terms = f.terms();
    if (f.has_quality_term()) {
      const auto q = f.quality();
      quality.emplace();
      quality->q = q;
      quality->mean = f.aggregate() == quality_aggregate::mean;
      quality->qmin = q.empty() ? 0.0 : *std::min_element(q.begin(), q.end());
      w[0] = terms[0].weight / terms[0].scale;
    }
    const greedy_block<T> block{f.embeddings(), f.inv_norms(), f.sq_norms(), threads};
    const auto slots = f.term_slots();
    f.mix().size_entries(states);
    f.mix().for_each([&](auto i, const auto& objective, double /*v*/) {
      const std::size_t at = i;
      if (slots[at] < 0) return;
      term_entry(states, i).emplace(make_state<T>(objective, block));
      const auto& term = terms[static_cast<std::size_t>(slots[at])];
      w[at + 1] = term.weight / term.scale;
    });
  }

  [[nodiscard]] std::size_t term_count() const { return w.size(); }
  [[nodiscard]] bool term_on(std::size_t t) const {
    bool on = false;
    visit(*this, t, [&](const auto&) { on = true; });
    return on;
  }
  [[nodiscard]] bool term_bounded(std::size_t t) const {
    bool bounded = false;
    visit(*this, t, [&](const auto& st) {
      if constexpr (requires { st.diminishing_gains(); }) {  // known at run time (`external_state`)
        bounded = st.diminishing_gains() && w[t] >= 0.0;
      } else {
        bounded = has_diminishing_gains<std::remove_cvref_t<decltype(st)>> && w[t] >= 0.0;
      }
    });
    return bounded;
  }
  void term_accumulate(std::size_t t, std::span<const index_t> cands, std::span<double> out) const {
    visit(*this, t, [&](const auto& st) { st.accumulate(cands, out, w[t]); });
  }
  void priorities(std::span<const index_t> cands, std::span<double> out) const {
    std::fill(out.begin(), out.end(), 0.0);
    for (std::size_t t = 0; t < term_count(); ++t) term_accumulate(t, cands, out);
  }
  [[nodiscard]] double common() const {
    double c = 0.0;
    for (std::size_t t = 0; t < term_count(); ++t) visit(*this, t, [&](const auto& st) { c += w[t] * st.common(); });
    return c;
  }
  void add(index_t j) {
    if (quality) quality->add(j);
    for (std::size_t t = 1; t < term_count(); ++t) visit(*this, t, [&](auto& st) { st.add(j); });
  }
  [[nodiscard]] double empty_value() const { return 0.0; }
  /// Stale entries lazy greedy re-scores at once: a facility-location kernel call costs the
  /// same for 1 or `width` candidates.
  [[nodiscard]] index_t lazy_batch() const {
    index_t b = 1;
    for (std::size_t t = 0; t < term_count(); ++t) {
      visit(*this, t, [&](const auto& st) {
        if constexpr (requires { st.lazy_batch(); }) b = std::max(b, static_cast<index_t>(st.lazy_batch()));
      });
    }
    return b;
  }

 private:
  /// fn(state of term t) when term t is on, for `self` const or not. Term t >= 1 is element
  /// t - 1 of the mix, or member t - 1 - I of a list at element I (the last).
  template <class Self, class F>
  static void visit(Self& self, std::size_t t, F&& fn) {
    if (t == 0) {
      if (self.quality) fn(*self.quality);
      return;
    }
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            auto& entry = std::get<I>(self.states);
            if constexpr (is_term_list<std::tuple_element_t<I, std::tuple<Ds...>>>) {
              if (t >= I + 1 && t - 1 - I < entry.size() && entry[t - 1 - I]) fn(*entry[t - 1 - I]);
            } else {
              if (t == I + 1 && entry) fn(*entry);
            }
          }(),
          ...);
    }(std::index_sequence_for<Ds...>{});
  }
};

/// f as a black box, one term that is never bounded: gain_i = f(S + i) - f(S).
template <class F>
struct blackbox_scorer {
  [[nodiscard]] static constexpr std::size_t term_count() { return 1; }
  const F* f;
  std::vector<index_t> rows;
  double current = 0.0;
  int threads = 0;

  blackbox_scorer(const F& fn, int th) : f(&fn), threads(th) { current = (*f)(rows); }
  [[nodiscard]] bool term_on(std::size_t /*t*/) const { return true; }
  [[nodiscard]] bool term_bounded(std::size_t /*t*/) const { return false; }
  void term_accumulate(std::size_t /*t*/, std::span<const index_t> cands, std::span<double> out) const {
    const double work = evaluation_work(static_cast<index_t>(rows.size()) + 1, f->embeddings().cols, f->size());
    parallel_for(static_cast<index_t>(cands.size()), threads, [&](index_t c) {
      std::vector<index_t> r(rows);
      r.push_back(cands[c]);
      out[c] += (*f)(std::span<const index_t>(r)) - current;
    }, work);
  }
  void priorities(std::span<const index_t> cands, std::span<double> out) const {
    std::fill(out.begin(), out.end(), 0.0);
    term_accumulate(0, cands, out);
  }
  [[nodiscard]] double common() const { return 0.0; }
  void add(index_t j) {
    rows.push_back(j);
    current = (*f)(std::span<const index_t>(rows));
  }
  [[nodiscard]] double empty_value() const { return (*f)(std::span<const index_t>()); }
  [[nodiscard]] index_t lazy_batch() const { return 1; }
};

}  // namespace datamask::detail::greedy
