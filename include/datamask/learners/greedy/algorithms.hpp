// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The greedy algorithms over any scorer (greedy/scorers.hpp): naive, lazy and
/// stochastic greedy, sharing one best-candidate step, one pick and one stop check. Not API:
/// `greedy_select` and `greedy_select_blackbox` (greedy/greedy.hpp) dispatch to them.
///
/// Lazy greedy gives exactly naive greedy's picks on every f:
/// - f whose terms are all bounded (quality, facility location, or a user state declaring
///   `diminishing_gains`): Minoux's priority queue of stale gains, re-scoring the top until it
///   is fresh. The first two rounds are full (facility location is submodular only once the set
///   is non-empty: f(empty) = 0 can lie below a singleton under the cosine and dot kernels).
/// - f with a term that is not bounded (pairwise similarity, DiSF, user objectives: f
///   normalises by |S|, so stale gains are not upper bounds): every round re-scores those terms
///   for all candidates, and keeps only the bounded terms' stale values as bounds, so that the
///   sum is an upper bound on the fresh gain; the top is picked once its bounded terms are fresh
///   too. Each term is summed in naive greedy's order, so the fresh gains are naive's, bit for
///   bit. When no term is bounded this is naive greedy.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <queue>
#include <span>
#include <vector>

#include "datamask/core/error.hpp"
#include "datamask/core/greedy_options.hpp"
#include "datamask/objectives/function.hpp"  // detail::sorted_distinct_rows
#include "datamask/core/philox.hpp"
#include "datamask/core/types.hpp"

namespace datamask::detail::greedy {

inline constexpr std::uint32_t stream_stochastic = 0x67726479u;  // "grdy"

/// Slices of a round scored between two stop checks: a multiple of 64 (so the fixed candidate
/// chunks of the built-in states fall where they would without slicing), resized to take about
/// `slice_seconds`.
inline constexpr index_t slice_quantum = 64;
inline constexpr double slice_seconds = 0.1;

/// What one greedy run carries between rounds.
struct run_state {
  std::span<const id_t> ids;
  const greedy_options* opt = nullptr;
  std::vector<index_t> remaining;  ///< rows not picked yet, in increasing row order at first
  std::vector<double> p;           ///< scratch: the priorities of the last full round
  greedy_result res;
  index_t slice = 16 * slice_quantum;

  /// The shared tie rule: larger priority, then smaller id.
  [[nodiscard]] bool better(double a, index_t ra, double b, index_t rb) const {
    return a != b ? a > b : ids[ra] < ids[rb];
  }
  /// Asks the stop hook once; remembers a yes.
  bool stopping() {
    if (!res.stopped && opt->stop && opt->stop()) res.stopped = true;
    return res.stopped;
  }
};

/// Validates the options and sets up the run: the candidate rows, `count` checked against them.
template <class Scorer>
run_state start_run(const Scorer& scorer, index_t n, std::span<const id_t> ids, index_t count,
                    const greedy_options& opt) {
  run_state r;
  r.ids = ids;
  r.opt = &opt;
  if (opt.candidates.empty()) {
    r.remaining.resize(static_cast<std::size_t>(n));
    std::iota(r.remaining.begin(), r.remaining.end(), index_t{0});
  } else {
    r.remaining = datamask::detail::sorted_distinct_rows(opt.candidates, n, "candidates");
  }
  const auto pool = static_cast<index_t>(r.remaining.size());
  DATAMASK_EXPECTS(count >= 1 && count <= pool, "count", "must be in [1, ", pool, "]",
                   opt.candidates.empty() ? "" : " (the number of candidates)", ", found ", count);
  DATAMASK_EXPECTS(opt.threads >= 0, "threads", "must be >= 0 (0: all), found ", opt.threads);
  DATAMASK_EXPECTS(opt.method != greedy_method::stochastic ||
                       (std::isfinite(opt.epsilon) && opt.epsilon > 0.0 && opt.epsilon < 1.0),
                   "epsilon", "must be in (0, 1), found ", opt.epsilon);
  r.res.rows.reserve(static_cast<std::size_t>(count));
  r.res.gains.reserve(static_cast<std::size_t>(count));
  r.res.objective = scorer.empty_value();
  return r;
}

/// score(cands, out) over `cands`, in slices with a stop check before each when a stop hook is
/// set. Returns false when the run was stopped.
template <class Score>
bool score_sliced(run_state& r, std::span<const index_t> cands, std::span<double> out, Score&& score) {
  if (!r.opt->stop) {
    score(cands, out);
    return true;
  }
  for (std::size_t c0 = 0; c0 < cands.size();) {
    if (r.stopping()) return false;
    const std::size_t len = std::min(cands.size() - c0, static_cast<std::size_t>(r.slice));
    const auto t0 = std::chrono::steady_clock::now();
    score(cands.subspan(c0, len), out.subspan(c0, len));
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (len == static_cast<std::size_t>(r.slice)) {
      const double ratio = std::clamp(slice_seconds / std::max(took, 1e-6), 0.25, 4.0);
      const auto next = static_cast<index_t>(static_cast<double>(r.slice) * ratio);
      r.slice = std::max(slice_quantum, next / slice_quantum * slice_quantum);
    }
    c0 += len;
  }
  return true;
}

/// All of f's gains (priorities) of `cands`; false when stopped.
template <class Scorer>
bool score_all(const Scorer& scorer, run_state& r, std::span<const index_t> cands, std::span<double> out) {
  return score_sliced(r, cands, out, [&](auto c, auto o) { scorer.priorities(c, o); });
}

/// The best-candidate step every algorithm shares: the position of the best of `cands`.
inline std::size_t best_of(const run_state& r, std::span<const index_t> cands, std::span<const double> p) {
  std::size_t b = 0;
  for (std::size_t c = 1; c < cands.size(); ++c) {
    if (r.better(p[c], cands[c], p[b], cands[b])) b = c;
  }
  return b;
}

/// Adds j to the set with the gain priority + common().
template <class Scorer>
void pick(Scorer& scorer, run_state& r, index_t j, double priority) {
  const double gain = priority + scorer.common();
  r.res.rows.push_back(j);
  r.res.gains.push_back(gain);
  r.res.objective += gain;
  scorer.add(j);
  if (r.opt->on_pick) r.opt->on_pick(static_cast<index_t>(r.res.rows.size()));
}

/// One naive round: scores every remaining row, picks the best; `r.p` keeps the others' scores
/// (aligned with `r.remaining`). False when stopped.
template <class Scorer>
bool full_round(Scorer& scorer, run_state& r) {
  if (r.stopping()) return false;
  r.p.resize(r.remaining.size());
  if (!score_all(scorer, r, r.remaining, r.p)) return false;
  r.res.evaluations += static_cast<index_t>(r.remaining.size());
  const std::size_t b = best_of(r, r.remaining, r.p);
  const index_t j = r.remaining[b];
  const double pj = r.p[b];
  r.remaining.erase(r.remaining.begin() + static_cast<std::ptrdiff_t>(b));
  r.p.erase(r.p.begin() + static_cast<std::ptrdiff_t>(b));
  pick(scorer, r, j, pj);
  return true;
}

/// Naive greedy: every remaining row scored in every round.
template <class Scorer>
void naive_greedy(Scorer& scorer, run_state& r, index_t count) {
  for (index_t t = static_cast<index_t>(r.res.rows.size()); t < count; ++t) {
    if (!full_round(scorer, r)) return;
  }
}

/// Lazy greedy when every term is bounded: a priority queue of stale gains (Minoux).
template <class Scorer>
void lazy_bounded(Scorer& scorer, run_state& r, index_t count) {
  struct entry {
    double key;
    index_t row;
    index_t round;
  };
  auto cmp = [&](const entry& a, const entry& b) { return r.better(b.key, b.row, a.key, a.row); };
  std::vector<entry> init;
  init.reserve(r.remaining.size());
  for (std::size_t c = 0; c < r.remaining.size(); ++c) init.push_back({r.p[c], r.remaining[c], 1});
  std::priority_queue<entry, std::vector<entry>, decltype(cmp)> heap(cmp, std::move(init));
  const auto batch = static_cast<std::size_t>(std::max<index_t>(1, scorer.lazy_batch()));
  std::vector<index_t> stale;
  std::vector<double> fresh;
  for (index_t t = 2; t < count; ++t) {
    for (;;) {
      if (r.stopping()) return;
      if (heap.top().round == t) {
        pick(scorer, r, heap.top().row, heap.top().key);
        heap.pop();
        break;
      }
      // Re-score the top stale entries (one, or a kernel's worth).
      stale.clear();
      while (stale.size() < batch && !heap.empty() && heap.top().round != t) {
        stale.push_back(heap.top().row);
        heap.pop();
      }
      fresh.resize(stale.size());
      scorer.priorities(stale, fresh);
      r.res.evaluations += static_cast<index_t>(stale.size());
      for (std::size_t c = 0; c < stale.size(); ++c) heap.push({fresh[c], stale[c], t});
    }
  }
}

/// Per-row, per-term gains of lazy greedy on an f with unbounded terms (see the file comment).
struct term_table {
  std::size_t terms = 0;
  std::vector<double> value;    ///< row-major n x terms: the weighted p_t(row)
  std::vector<index_t> fresh;   ///< the round in which a row's bounded terms were last scored
  [[nodiscard]] double key(index_t row, const std::vector<char>& on) const {
    double k = 0.0;  // naive greedy's order: 0, then each term that is on
    for (std::size_t t = 0; t < terms; ++t) {
      if (on[t]) k += value[static_cast<std::size_t>(row) * terms + t];
    }
    return k;
  }
};

/// Scores terms `which` (a mask) of `rows` into the table; false when stopped.
template <class Scorer>
bool score_terms(const Scorer& scorer, run_state& r, term_table& tab, std::span<const index_t> rows,
                 const std::vector<char>& which, std::vector<double>& buf) {
  buf.resize(rows.size());
  for (std::size_t t = 0; t < tab.terms; ++t) {
    if (!which[t]) continue;
    std::fill(buf.begin(), buf.end(), 0.0);
    auto one = [&](auto c, auto o) { scorer.term_accumulate(t, c, o); };
    if (!score_sliced(r, rows, std::span<double>(buf), one)) return false;
    for (std::size_t c = 0; c < rows.size(); ++c) tab.value[static_cast<std::size_t>(rows[c]) * tab.terms + t] = buf[c];
  }
  return true;
}

/// Lazy greedy on an f with unbounded terms: fresh unbounded terms plus stale bounded ones.
template <class Scorer>
void lazy_mixed(Scorer& scorer, run_state& r, index_t n, index_t count) {
  const std::size_t nt = scorer.term_count();
  std::vector<char> on(nt), bounded(nt), unbounded(nt);
  for (std::size_t t = 0; t < nt; ++t) {
    on[t] = scorer.term_on(t) ? 1 : 0;
    bounded[t] = on[t] && scorer.term_bounded(t) ? 1 : 0;
    unbounded[t] = on[t] && !bounded[t] ? 1 : 0;
  }
  term_table tab{nt, std::vector<double>(static_cast<std::size_t>(n) * nt, 0.0),
                 std::vector<index_t>(static_cast<std::size_t>(n), 0)};
  const auto batch = static_cast<std::size_t>(std::max<index_t>(1, scorer.lazy_batch()));
  std::vector<double> buf;
  std::vector<index_t> stale;
  using entry = std::pair<double, index_t>;
  auto cmp = [&](const entry& a, const entry& b) { return r.better(b.first, b.second, a.first, a.second); };
  for (index_t t = 2; t < count; ++t) {
    if (r.stopping()) return;
    if (!score_terms(scorer, r, tab, r.remaining, t == 2 ? on : unbounded, buf)) return;
    if (t == 2) r.res.evaluations += static_cast<index_t>(r.remaining.size());
    if (t == 2) std::fill(tab.fresh.begin(), tab.fresh.end(), index_t{2});
    std::vector<entry> init;
    init.reserve(r.remaining.size());
    for (index_t row : r.remaining) init.emplace_back(tab.key(row, on), row);
    std::priority_queue<entry, std::vector<entry>, decltype(cmp)> heap(cmp, std::move(init));
    while (tab.fresh[heap.top().second] != t) {
      stale.clear();
      while (stale.size() < batch && !heap.empty() && tab.fresh[heap.top().second] != t) {
        stale.push_back(heap.top().second);
        heap.pop();
      }
      if (!score_terms(scorer, r, tab, stale, bounded, buf)) return;
      r.res.evaluations += static_cast<index_t>(stale.size());
      for (index_t row : stale) {
        tab.fresh[row] = t;
        heap.emplace(tab.key(row, on), row);
      }
    }
    const index_t j = heap.top().second;
    r.remaining.erase(std::find(r.remaining.begin(), r.remaining.end(), j));  // naive's order
    pick(scorer, r, j, heap.top().first);
  }
}

/// Lazy greedy: two full rounds, then the bounded or the mixed form (see the file comment).
template <class Scorer>
void lazy_greedy(Scorer& scorer, run_state& r, index_t n, index_t count) {
  bool all_bounded = true;
  bool any_bounded = false;
  for (std::size_t t = 0; t < scorer.term_count(); ++t) {
    if (!scorer.term_on(t)) continue;
    all_bounded = all_bounded && scorer.term_bounded(t);
    any_bounded = any_bounded || scorer.term_bounded(t);
  }
  if (!any_bounded) return naive_greedy(scorer, r, count);
  if (!full_round(scorer, r) || count == 1) return;
  if (!full_round(scorer, r) || count == 2) return;  // stale gains from here on are bounds
  if (all_bounded) {
    lazy_bounded(scorer, r, count);
  } else {
    lazy_mixed(scorer, r, n, count);
  }
}

/// Stochastic greedy: R = ceil((n / S) ln(1 / epsilon)) remaining rows drawn per round.
template <class Scorer>
void stochastic_greedy(Scorer& scorer, run_state& r, index_t count) {
  const auto pool = static_cast<index_t>(r.remaining.size());
  const double r_real = std::ceil(static_cast<double>(pool) / static_cast<double>(count) *
                                  std::log(1.0 / r.opt->epsilon));
  const auto r_size = static_cast<index_t>(std::max(1.0, r_real));
  const rng::philox_key key = rng::block_key(r.opt->seed, stream_stochastic);
  std::vector<char> taken(static_cast<std::size_t>(pool), 0);
  std::vector<index_t> sample_pos;
  std::vector<index_t> sample;
  for (index_t t = 0; t < count; ++t) {
    if (r.stopping()) return;
    const auto rem = static_cast<index_t>(r.remaining.size());
    sample_pos.clear();
    if (r_size >= rem) {
      sample_pos.resize(static_cast<std::size_t>(rem));
      std::iota(sample_pos.begin(), sample_pos.end(), index_t{0});
    } else {
      // Uniform draws without replacement by rejection: draw number u of round t.
      for (std::uint64_t u = 0; static_cast<index_t>(sample_pos.size()) < r_size; ++u) {
        const double x = rng::uniform01(key, u, static_cast<std::uint32_t>(t), stream_stochastic);
        const auto pos = std::min(rem - 1, static_cast<index_t>(x * static_cast<double>(rem)));
        if (taken[pos]) continue;
        taken[pos] = 1;
        sample_pos.push_back(pos);
      }
      for (index_t pos : sample_pos) taken[pos] = 0;
    }
    sample.resize(sample_pos.size());
    for (std::size_t c = 0; c < sample_pos.size(); ++c) sample[c] = r.remaining[sample_pos[c]];
    r.p.resize(sample.size());
    if (!score_all(scorer, r, sample, r.p)) return;
    r.res.evaluations += static_cast<index_t>(sample.size());
    const std::size_t b = best_of(r, sample, r.p);
    // Swap-remove: the layout of `remaining` depends only on the picks, so draws are
    // reproducible for a seed.
    r.remaining[sample_pos[b]] = r.remaining.back();
    r.remaining.pop_back();
    pick(scorer, r, sample[b], r.p[b]);
  }
}

/// Runs the method `opt` names.
template <class Scorer>
greedy_result run(Scorer& scorer, index_t n, std::span<const id_t> ids, index_t count, const greedy_options& opt) {
  run_state r = start_run(scorer, n, ids, count, opt);
  switch (opt.method) {
    case greedy_method::naive:
      naive_greedy(scorer, r, count);
      break;
    case greedy_method::lazy:
      lazy_greedy(scorer, r, n, count);
      break;
    case greedy_method::stochastic:
      stochastic_greedy(scorer, r, count);
      break;
  }
  return std::move(r.res);
}

}  // namespace datamask::detail::greedy
