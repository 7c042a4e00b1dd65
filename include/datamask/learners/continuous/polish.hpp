// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The swap polish after the continuous ascent's read-out: 1-swaps while one clearly
/// improves f, then one 2-swap search at a 1-swap optimum, each applied swap raising f by its
/// exact gain. Candidates are ranked by exact one-sided changes where every term's swap state
/// gives them (`ranked_swap_state`), else by the relaxation's gradient at the selection; each
/// diversity term gives its exact swap gains through its `swap_state` (`swappable_objective`),
/// or, without one, by evaluation on the swapped set.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "datamask/core/concepts.hpp"
#include "datamask/core/detail/keep_first.hpp"
#include "datamask/core/detail/parallel.hpp"
#include "datamask/exec/backend/concept.hpp"
#include "datamask/exec/backend/eigen.hpp"
#include "datamask/exec/host.hpp"
#include "datamask/exec/ops.hpp"
#include "datamask/learners/continuous/projection.hpp"
#include "datamask/objectives/function.hpp"
#include "datamask/objectives/mix.hpp"
#include "datamask/learners/continuous/settings.hpp"

namespace datamask {

/// @brief What the polish did.
struct polish_report {
  index_t rounds = 0;
  index_t swaps = 0;
  index_t evaluations = 0;  ///< swap gains computed
  double gain = 0.0;        ///< sum of the exact gains of the swaps applied
};


namespace detail::continuous {

/// The first `s` candidates by key descending (`largest`) or ascending, ties to the smaller id, in
/// that order.
inline std::vector<index_t> top_by(std::span<const double> key, std::span<const id_t> ids,
                                   std::span<const index_t> candidates, index_t s, bool largest) {
  std::vector<index_t> rows(candidates.begin(), candidates.end());
  detail::keep_first(rows, static_cast<std::size_t>(std::max<index_t>(s, 0)), [&](index_t a, index_t b) {
    if (key[a] != key[b]) return largest ? key[a] > key[b] : key[a] < key[b];
    return ids[a] < ids[b];
  });
  return rows;
}


/// Swap gains of a term without a `swap_state`, by evaluation on the swapped set: O(cost of the
/// objective) per swap. A batched objective scores the swaps `prepare` announces (removals x
/// additions) in `evaluate_batch` calls, the same values as one at a time: an objective given at
/// run time (a Python metric) is then called once per batch, not once per swap.
template <class D, class T>
struct evaluated_swaps {
  const D* objective;
  subset_view<T> base;
  std::vector<index_t> rows;
  double value = 0.0;
  // The deltas of the swaps last prepared (batched objectives): removals x additions.
  std::vector<index_t> prepared_r, prepared_a;
  std::vector<double> prepared;

  evaluated_swaps(const D& o, const subset_view<T>& v, std::span<const index_t> sel)
      : objective(&o), base(v), rows(sel.begin(), sel.end()), value(eval(rows)) {}
  [[nodiscard]] double eval(const std::vector<index_t>& r) const {
    subset_view<T> s = base;
    s.subset = index_view(std::span<const index_t>(r));
    return static_cast<double>((*objective)(s));
  }
  void prepare(std::span<const index_t> removals, std::span<const index_t> additions) {
    if constexpr (batched_diversity_objective<D, T>) {
      prepared_r.assign(removals.begin(), removals.end());
      prepared_a.assign(additions.begin(), additions.end());
      prepared.assign(removals.size() * additions.size(), 0.0);
      const auto k = static_cast<std::size_t>(rows.size());
      const std::size_t per_batch =
          std::max<std::size_t>(1, static_cast<std::size_t>(evaluation_batch_rows) / std::max<std::size_t>(k, 1));
      std::vector<index_t> subsets;
      for (std::size_t first = 0; first < prepared.size(); first += per_batch) {
        const std::size_t g = std::min(prepared.size() - first, per_batch);
        subsets.resize(g * k);
        for (std::size_t c = 0; c < g; ++c) {
          const std::size_t pair = first + c;
          const auto out = subsets.begin() + static_cast<std::ptrdiff_t>(c * k);
          const auto end = std::copy(rows.begin(), rows.end(), out);
          // A removal no longer in the set (a state copied after a first swap) is never asked.
          const auto at = std::find(out, end, prepared_r[pair / additions.size()]);
          if (at != end) *at = prepared_a[pair % additions.size()];
        }
        const batch_view<T> b{base.embeddings, base.inv_norms, base.sq_norms,
                              make_matrix_view(static_cast<const index_t*>(subsets.data()), static_cast<index_t>(g),
                                               static_cast<index_t>(k)),
                              base.reference, base.threads};
        objective->evaluate_batch(b, std::span<double>(prepared).subspan(first, g));
      }
      for (double& v : prepared) v -= value;
    }
  }
  [[nodiscard]] double delta(index_t r, index_t a) const {
    const auto ri = std::find(prepared_r.begin(), prepared_r.end(), r);
    const auto ai = std::find(prepared_a.begin(), prepared_a.end(), a);
    if (ri != prepared_r.end() && ai != prepared_a.end()) {
      return prepared[static_cast<std::size_t>(ri - prepared_r.begin()) * prepared_a.size() +
                      static_cast<std::size_t>(ai - prepared_a.begin())];
    }
    std::vector<index_t> swapped = rows;
    *std::find(swapped.begin(), swapped.end(), r) = a;
    return eval(swapped) - value;
  }
  void apply(index_t r, index_t a) {
    *std::find(rows.begin(), rows.end(), r) = a;
    value = eval(rows);
    prepared_r.clear();  // the deltas were from the set before this swap
    prepared_a.clear();
    prepared.clear();
  }
};

/// A term's swap state on a selection: its own (`swappable_objective`), else by evaluation.
template <class D, class T>
auto swap_state_for(const D& objective, const subset_view<T>& block, std::span<const index_t> selection) {
  if constexpr (swappable_objective<D, T>) {
    return objective.swap_state(block, selection);
  } else {
    return evaluated_swaps<D, T>(objective, block, selection);
  }
}

/// One optional swap state per term of a mix (a term with weight 0 has none); a list's terms one
/// each (`per_term_t`, read by `term_entry`).
template <class T, class D>
using swap_state_t = std::optional<decltype(swap_state_for(std::declval<const term_type_t<D>&>(),
                                                           std::declval<const subset_view<T>&>(),
                                                           std::span<const index_t>()))>;
template <class T, class... Ds>
std::tuple<per_term_t<Ds, swap_state_t<T, Ds>>...> swap_states_for(const diversity_mix<Ds...>&);

/// Sets p = 1 on rows[k] (`polish_ranking::start`).
struct mark_rows {
  const index_t* rows;
  double* p;
  DATAMASK_HOST_DEVICE void operator()(index_t k) const { p[rows[k]] = 1.0; }
};

/// The row at position `at` of the selection leaves it (its indicator and its place in the
/// rows) and row `in` takes its place (one call).
struct swap_marks {
  double* p;
  index_t* rows;
  index_t at;
  index_t in;
  DATAMASK_HOST_DEVICE void operator()(index_t /*k*/) const {
    p[rows[at]] = 0.0;
    p[in] = 1.0;
    rows[at] = in;
  }
};

/// Whether candidate k is outside the selection (`keep_if`'s predicate).
struct outside_at {
  const index_t* rows;
  const double* p;
  DATAMASK_HOST_DEVICE bool operator()(index_t k) const { return p[rows[k]] == 0.0; }
};

/// to[i] = sign from[i] (sign -1: the keys whose largest are the smallest of `from`).
struct signed_copy {
  const double* from;
  double* to;
  double sign;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const { to[i] = sign * from[i]; }
};

/// val[t] = coef quality[rows[t]], or 0 without a quality (`polish_ranking::refresh`).
struct quality_keys {
  const double* quality;
  double coef;
  const index_t* rows;
  double* val;
  DATAMASK_HOST_DEVICE void operator()(index_t t) const { val[t] = quality != nullptr ? coef * quality[rows[t]] : 0.0; }
};

/// key[rows[t]] = val[t].
struct set_keys {
  const index_t* rows;
  const double* val;
  double* key;
  DATAMASK_HOST_DEVICE void operator()(index_t t) const { key[rows[t]] = val[t]; }
};

}  // namespace detail::continuous

/// @brief The polish's ranking of its candidates, kept in the memory of a backend's executor:
/// the selection's indicator, each row's key (the relaxation's gradient at the selection, or
/// exact one-sided changes, computed on the executor or on the host and given), and the choice
/// of the best-ranked rows on each side, so that per round only the chosen rows' ids reach the
/// host (n values cross only where the host computes the keys).
/// @tparam Relaxed `double(Exec& exec, const double* p, double* grad)`, as the ascent's (the
///         relaxation of f, `relaxation_of`)
template <backend Backend, class Dataset, class Exec, class Relaxed>
class polish_ranking {
 public:
  using executor_type = Exec;

  /// @param ds the block on the backend (its ids break ties); it and `exec` must outlive the
  ///        ranking (the backend and the relaxation are copied)
  /// @param candidates the `m` rows that may be selected, in the executor's memory
  /// @param quality the block's n quality values in the executor's memory (null: f has no
  ///        quality term), for the exact keys computed there
  polish_ranking(Backend b, const Dataset& ds, Exec& exec, Relaxed relaxed, index_t n, const index_t* candidates,
                 index_t m, const double* quality)
      : b_(std::move(b)), ds_(ds), exec_(exec), relaxed_(std::move(relaxed)), n_(n), candidates_(candidates),
        m_(m), quality_(quality) {}

  /// @brief Whether the ranking holds the block's quality (`refresh` with changes).
  [[nodiscard]] bool has_quality() const { return quality_ != nullptr; }

  /// @brief The number of candidates.
  [[nodiscard]] index_t candidate_count() const { return m_; }

  /// @brief Starts from a selection of candidates (keys are 0 until `refresh`).
  void start(std::span<const index_t> selection) {
    if (p_ == nullptr) {  // the n-value arrays, on the first start (none when nothing is polished)
      p_ = exec_.template scratch<double>(n_);
      key_ = exec_.template scratch<double>(n_);
      negated_ = exec_.template scratch<double>(n_);
      exec_.for_each(n_, ops::fill{key_, 0.0});
      exec_.for_each(n_, ops::fill{negated_, 0.0});
    }
    selected_ = static_cast<index_t>(selection.size());
    held_.emplace(exec_.scope());  // frees the last start's rows
    rows_ = held_->upload(selection);
    exec_.for_each(n_, ops::fill{p_, 0.0});
    exec_.for_each(static_cast<index_t>(selection.size()), detail::continuous::mark_rows{rows_, p_});
  }
  /// @brief The row at position `at` of the selection (as `start` was given it, later swaps
  /// in place) leaves it and row a takes its place.
  void swap(index_t at, index_t a) {
    DATAMASK_EXPECTS(at >= 0 && at < selected_, "at", "is ", at, ", not a position of the ", selected_,
                     " selected rows");
    exec_.for_each(1, detail::continuous::swap_marks{p_, rows_, at, a});
  }
  /// @brief Keys: the relaxation's gradient at the selection.
  void refresh() {
    auto scope = exec_.scope();
    (void)relaxed_(scope, static_cast<const double*>(p_), key_);
    exec_.for_each(n_, detail::continuous::signed_copy{key_, negated_, -1.0});
  }
  /// @brief Keys given on the host (n values).
  void refresh(std::span<const double> keys) {
    auto scope = exec_.scope();
    exec_.for_each(n_, detail::continuous::signed_copy{scope.upload(keys), key_, 1.0});
    exec_.for_each(n_, detail::continuous::signed_copy{key_, negated_, -1.0});
  }
  /// @brief Exact keys computed on the executor: a candidate's is quality_coef times its quality
  /// plus what `changes(exec, x, rows, count, inside, out)` adds to out[t] for row rows[t], called
  /// once for the candidates outside the selection (`inside` false) and once for the selection
  /// (x the block as the relaxation reads it; rows and out in the executor's memory).
  template <class Changes>
  void refresh(double quality_coef, Changes&& changes) {
    auto scope = exec_.scope();
    const auto x = b_.relaxation_view(ds_).embeddings;
    index_t* outside = scope.template scratch<index_t>(m_);
    const index_t count = scope.keep_if(m_, detail::continuous::outside_at{candidates_, p_}, outside);
    scope.for_each(count, detail::continuous::positions_to_rows{candidates_, outside});
    for (const bool inside : {false, true}) {
      const index_t* rows = inside ? rows_ : outside;
      const index_t size = inside ? selected_ : count;
      double* val = scope.template scratch<double>(std::max<index_t>(size, 1));
      scope.for_each(size, detail::continuous::quality_keys{quality_, quality_coef, rows, val});
      changes(scope, x, rows, size, inside, val);
      scope.for_each(size, detail::continuous::set_keys{rows, val, key_});
    }
    exec_.for_each(n_, detail::continuous::signed_copy{key_, negated_, -1.0});
  }
  /// @brief The c candidates outside the selection with the largest keys (all of them when
  /// fewer), by key descending, ties to the smaller id.
  [[nodiscard]] std::vector<index_t> best_outside(index_t c) {
    auto scope = exec_.scope();
    index_t* rows = scope.template scratch<index_t>(m_);
    const index_t count = scope.keep_if(m_, detail::continuous::outside_at{candidates_, p_}, rows);
    scope.for_each(count, detail::continuous::positions_to_rows{candidates_, rows});
    return chosen(key_, rows, count, c);
  }
  /// @brief The c selected rows with the smallest keys (all of them when fewer), by key
  /// ascending, ties to the smaller id.
  [[nodiscard]] std::vector<index_t> worst_inside(index_t c) {
    return chosen(negated_, rows_, selected_, c);
  }

 private:
  /// The c of `count` rows with the largest key, on the host.
  std::vector<index_t> chosen(const double* key, const index_t* rows, index_t count, index_t c) const {
    if (count <= 0 || c <= 0) return {};
    return b_.to_host(b_.largest(key, ds_, rows, count, c));
  }

  Backend b_;
  const Dataset& ds_;
  Exec& exec_;
  Relaxed relaxed_;
  index_t n_;
  const index_t* candidates_;
  index_t m_;
  const double* quality_;
  double* p_ = nullptr;
  double* key_ = nullptr;
  double* negated_ = nullptr;
  index_t selected_ = 0;       ///< S, the rows of the selection
  std::optional<Exec> held_;  ///< holds `rows_`
  index_t* rows_ = nullptr;   ///< the selection, in the positions `start` gave them
};

namespace detail::continuous {

/// The state of one `polish_swaps` run, in steps: the term states on the selection, the exact
/// gain of a swap, the candidates' ranking (`refresh_if_due`), the scans of single swaps, the
/// double-swap search, and the round loop. Not copyable or movable: the term states view `all`.
/// The ranking (`polish_ranking`) chooses each side's candidates where the backend keeps the
/// block.
template <class T, class Diversity, class Ranking>
struct polisher {
  using objective_t = objective_function<T, Diversity>;
  using states_t = decltype(swap_states_for<T>(std::declval<const typename objective_t::mix_type&>()));

  const objective_t& f;
  std::vector<index_t>& rows;
  std::span<const index_t> candidates;
  const polish_settings& cfg;
  int threads;
  Ranking& rank;
  polish_report rep;
  const index_t n;
  const index_t k;
  const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::vector<index_t> all;  ///< every row, in order: the states' base view points into it
  states_t states;
  std::vector<char> in;
  std::vector<double> keys;  ///< the exact ranking's keys (`exact_keys`)
  const double qdiv;
  index_t last_refresh = -1;
  bool force_refresh = false;
  bool exact_ranking = true;  ///< every term of f's state gives one-sided changes (`exact_keys`)
  bool on_executor = true;    ///< and each on the ranking's executor (`executor_ranked_swap_state`)

  polisher(const objective_t& f_, std::vector<index_t>& rows_, std::span<const index_t> candidates_,
           const polish_settings& cfg_, int threads_, Ranking& rank_)
      : f(f_), rows(rows_), candidates(candidates_), cfg(cfg_), threads(threads_), rank(rank_), n(f_.size()),
        k(static_cast<index_t>(rows_.size())), all(static_cast<std::size_t>(n)),
        in(static_cast<std::size_t>(n), 0),
        qdiv(f_.aggregate() == quality_aggregate::mean ? static_cast<double>(k) : 1.0) {
    std::iota(all.begin(), all.end(), index_t{0});
    const subset_view<T> base{f.embeddings(), f.inv_norms().data(), f.sq_norms().data(), index_view{},
                              index_view(std::span<const index_t>(all)), threads};
    f.mix().size_entries(states);
    f.mix().for_each([&](auto i, const auto& objective, double /*v*/) {
      if (f.term_slots()[i] < 0) return;
      auto& state = term_entry(states, i);
      state.emplace(swap_state_for(objective, base, rows));
      using state_t = typename std::remove_reference_t<decltype(state)>::value_type;
      exact_ranking = exact_ranking && ranked_swap_state<state_t>;
      on_executor = on_executor && executor_ranked_swap_state<state_t, typename Ranking::executor_type, T>;
    });
    on_executor = on_executor && (rank.has_quality() || !f.has_quality_term());
    for (index_t r : rows) in[r] = 1;
    rank.start(rows);
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
  double pair_gain(const states_t& st, index_t r, index_t a) const {
    const auto& terms = f.terms();
    double gain = 0.0;
    if (f.has_quality_term()) {
      gain += terms[0].weight / terms[0].scale * (f.quality()[a] - f.quality()[r]) / qdiv;
    }
    f.mix().for_each([&](auto i, const auto& /*o*/, double /*v*/) {
      const int t = f.term_slots()[i];
      if (t < 0) return;
      const double dlt = term_entry(st, i)->delta(r, a);
      gain += terms[static_cast<std::size_t>(t)].weight / terms[static_cast<std::size_t>(t)].scale * dlt;
    });
    return gain;
  }

  void apply_to(states_t& st, index_t r, index_t a) const {
    f.mix().for_each([&](auto i, const auto& /*o*/, double /*v*/) {
      if (f.term_slots()[i] >= 0) term_entry(st, i)->apply(r, a);
    });
  }

  void prepare_all(states_t& st, std::span<const index_t> rm, std::span<const index_t> ad) const {
    f.mix().for_each([&](auto i, const auto& /*o*/, double /*v*/) {
      if (f.term_slots()[i] >= 0) term_entry(st, i)->prepare(rm, ad);
    });
  }

  /// Row r leaves the selection (states, rows, membership) and row a takes its place.
  void swap_in(index_t r, index_t a) {
    apply_to(states, r, a);
    const auto at = std::find(rows.begin(), rows.end(), r);
    *at = a;
    in[r] = 0;
    in[a] = 1;
    rank.swap(at - rows.begin(), a);
  }

  /// The exact ranking, where every term's state gives one-sided changes: a selected row's key
  /// is what f loses without it, another row's what f gains with it (quality included as in
  /// `pair_gain`), so the best swaps pair the smallest keys inside with the largest outside.
  /// Computed on the ranking's executor where every state can (`on_executor`), else on the host
  /// a row at a time and given to the ranking.
  void exact_keys() {
    const auto& terms = f.terms();
    const double quality_coef = f.has_quality_term() ? terms[0].weight / terms[0].scale / qdiv : 0.0;
    // Each term's weight / scale, with the state: fn(state, coef).
    auto for_each_ranked = [&](auto&& fn) {
      f.mix().for_each([&](auto t, const auto& /*o*/, double /*v*/) {
        const int slot = f.term_slots()[t];
        if (slot < 0) return;
        const auto& term = terms[static_cast<std::size_t>(slot)];
        fn(*term_entry(std::as_const(states), t), term.weight / term.scale);
      });
    };
    if (on_executor) {
      rank.refresh(quality_coef, [&](auto& exec, matrix_view<const T> x, const index_t* side, index_t count,
                                     bool inside, double* out) {
        for_each_ranked([&](const auto& state, double coef) {
          using exec_t = std::remove_cvref_t<decltype(exec)>;
          if constexpr (executor_ranked_swap_state<std::remove_cvref_t<decltype(state)>, exec_t, T>) {
            state.add_one_sided(exec, x, side, count, inside, inside ? -coef : coef, out);
          }
        });
      });
      return;
    }
    keys.assign(static_cast<std::size_t>(n), 0.0);
    if (f.has_quality_term()) {
      for (index_t i : candidates) keys[i] = quality_coef * f.quality()[i];
    }
    const double per_row = static_cast<double>(f.embeddings().cols) * static_cast<double>(f.embeddings().cols);
    for_each_ranked([&](const auto& state, double coef) {
      if constexpr (ranked_swap_state<std::remove_cvref_t<decltype(state)>>) {
        detail::parallel_for(static_cast<index_t>(candidates.size()), threads, [&](index_t c) {
          const index_t i = candidates[static_cast<std::size_t>(c)];
          const bool inside = in[i] != 0;
          keys[i] += (inside ? -coef : coef) * state.one_sided(i, inside);
        }, per_row);
      }
    });
    rank.refresh(std::span<const double>(keys));
  }

  /// The ranking at the selection, when due (or forced): exact (`exact_keys`) where every term
  /// offers it, else the relaxation's gradient; true when refreshed.
  bool refresh_if_due(index_t round) {
    const bool fresh = force_refresh || last_refresh < 0 || round - last_refresh >= cfg.refresh_every;
    if (fresh) {
      if (exact_ranking) {
        exact_keys();
      } else {
        rank.refresh();
      }
      last_refresh = round;
      force_refresh = false;
    }
    return fresh;
  }

  /// A swap among the candidates: indices into the removals and additions, and its gain.
  struct single_move {
    std::size_t r = 0;
    std::size_t a = 0;
    double gain = 0.0;
  };

  /// Exact gains of every pair, in parallel over the removals; the clearly improving ones,
  /// best first (ties by removal, then addition order).
  std::vector<single_move> improving_pairs(const std::vector<index_t>& rems, const std::vector<index_t>& adds) {
    std::vector<std::vector<single_move>> found(rems.size());
    detail::parallel_for(static_cast<index_t>(rems.size()), threads, [&](index_t ri) {
      const auto r = static_cast<std::size_t>(ri);
      for (std::size_t a = 0; a < adds.size(); ++a) {
        const double gain = pair_gain(states, rems[r], adds[a]);
        if (clear_gain(gain)) found[r].push_back({r, a, gain});
      }
    });
    rep.evaluations += static_cast<index_t>(rems.size() * adds.size());
    std::vector<single_move> moves;
    for (const auto& some : found) moves.insert(moves.end(), some.begin(), some.end());
    std::stable_sort(moves.begin(), moves.end(),
                     [](const single_move& x, const single_move& y) { return x.gain > y.gain; });
    return moves;
  }

  /// Single swaps while they clearly improve f: each scan scores every pair of the remaining
  /// candidates once, then applies its improving swaps best first, each on rows no earlier swap
  /// of the scan moved and after its gain is checked again on the current set (only the first
  /// is unchanged). Why: rescoring all C^2 pairs after every swap made the polish cost C^3 / 3
  /// exact gains a round; DiSF's are d^2 / 2 each. @return the number applied
  index_t single_swaps(std::vector<index_t>& adds, std::vector<index_t>& rems) {
    index_t swaps = 0;
    while (!adds.empty() && !rems.empty() && !out_of_time()) {
      prepare_all(states, rems, adds);
      const std::vector<single_move> moves = improving_pairs(rems, adds);
      std::vector<char> moved_r(rems.size(), 0);
      std::vector<char> moved_a(adds.size(), 0);
      index_t applied = 0;
      for (const single_move& m : moves) {
        if (moved_r[m.r] || moved_a[m.a]) continue;
        const index_t r = rems[m.r];
        const index_t a = adds[m.a];
        double gain = m.gain;
        if (applied > 0) {
          const index_t one_r[1] = {r};
          const index_t one_a[1] = {a};
          prepare_all(states, one_r, one_a);
          gain = pair_gain(states, r, a);
          ++rep.evaluations;
          if (!clear_gain(gain)) continue;
        }
        swap_in(r, a);
        rep.gain += gain;
        ++rep.swaps;
        ++applied;
        moved_r[m.r] = 1;
        moved_a[m.a] = 1;
      }
      if (applied == 0) break;
      swaps += applied;
      std::erase_if(rems, [&](index_t i) { return !in[i]; });
      std::erase_if(adds, [&](index_t i) { return in[i] != 0; });
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
  bool double_swap() {
    const auto outside = static_cast<index_t>(candidates.size()) - k;
    const index_t b2 = std::min(cfg.pair_candidates, std::min(k, outside));
    if (b2 < 2) return false;
    const std::vector<index_t> r2 = rank.worst_inside(b2);
    const std::vector<index_t> a2 = rank.best_outside(b2);
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

  /// The rounds: rank by the (possibly stale) ranking, apply single swaps; with none, refresh a
  /// stale ranking and retry, else try one double swap and stop without one.
  void run() {
    for (index_t round = 0; round < cfg.rounds && !out_of_time(); ++round) {
      ++rep.rounds;
      const bool fresh = refresh_if_due(round);
      std::vector<index_t> adds = rank.best_outside(cfg.candidates);
      std::vector<index_t> rems = rank.worst_inside(cfg.candidates);
      if (single_swaps(adds, rems) > 0) continue;
      if (!fresh) {  // no single swap by the stale ranking: refresh before giving up
        force_refresh = true;
        continue;
      }
      if (!double_swap()) break;
    }
  }
};

}  // namespace detail::continuous

/// @brief Swap local search on a selection (see `polish_settings`): 1-swaps, then a 2-swap search
/// at a 1-swap optimum; each applied swap raises f by its exact gain; candidates are ranked by
/// exact one-sided changes where every term's swap state gives them (`ranked_swap_state`), else
/// by the gradient of the relaxation at the selection, and chosen by `rank` on its backend.
///
/// @param f the objective (terms, weights, scales)
/// @param rank the ranking of `candidates` (its relaxation is f's), on the backend that keeps
///        the block (the continuous learner's)
/// @param rows the selection, changed in place (the same number of rows)
/// @param candidates the rows that may be selected (sorted, distinct)
/// @param threads as `settings::threads` (0: all); the result does not depend on it
/// @return rounds, swaps and the total gain
template <class T, class Diversity, backend B, class Dataset, class Exec, class Relaxed>
polish_report polish_swaps(const objective_function<T, Diversity>& f, polish_ranking<B, Dataset, Exec, Relaxed>& rank,
                           std::vector<index_t>& rows, std::span<const index_t> candidates,
                           const polish_settings& cfg, int threads = 0) {
  validate(cfg);
  DATAMASK_EXPECTS(rank.candidate_count() == static_cast<index_t>(candidates.size()), "rank",
                   "ranks ", rank.candidate_count(), " candidates, not the ", candidates.size(), " given");
  const auto k = static_cast<index_t>(rows.size());
  if (k == 0 || k >= static_cast<index_t>(candidates.size())) return polish_report{};
  detail::continuous::polisher<T, Diversity, polish_ranking<B, Dataset, Exec, Relaxed>> polish(f, rows, candidates,
                                                                                                cfg, threads, rank);
  polish.run();
  return polish.rep;
}

/// @brief `polish_swaps` on the host, with the relaxation on host spans.
/// @param relaxed `double(std::span<const double> p, std::span<double> grad)`
///        (`relaxed_objective(f, S, threads)`), to rank the candidates where the ranking is not
///        exact
template <class T, class Diversity, class Relaxed>
  requires std::is_invocable_r_v<double, const Relaxed&, std::span<const double>, std::span<double>>
polish_report polish_swaps(const objective_function<T, Diversity>& f, const Relaxed& relaxed,
                           std::vector<index_t>& rows, std::span<const index_t> candidates,
                           const polish_settings& cfg, int threads = 0) {
  const eigen_backend b{threads};
  const auto ds = b.make_dataset(f.embeddings(), std::span<const double>(f.inv_norms()),
                                 std::span<const double>(f.sq_norms()), f.ids());
  const auto n = static_cast<std::size_t>(f.size());
  auto on_host = [&relaxed, n](host_executor& /*exec*/, const double* p, double* grad) {
    return relaxed(std::span<const double>(p, n), std::span<double>(grad, n));
  };
  host_executor exec(threads);
  const double* quality = f.has_quality_term() ? exec.upload(std::span<const double>(f.quality())) : nullptr;
  polish_ranking rank(b, ds, exec, on_host, f.size(), exec.upload(candidates),
                      static_cast<index_t>(candidates.size()), quality);
  return polish_swaps(f, rank, rows, candidates, cfg, threads);
}

}  // namespace datamask
