// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Facility location on a k-nearest-neighbour graph (knn/graph.hpp): every capability
/// the optimizers use -- evaluation (on the host and through a backend's executor), the greedy
/// state (naive, lazy and stochastic greedy) and the relaxation the continuous learner ascends --
/// and an upper bound on the optimum with its certificate (`boundable_objective`).
///
/// F(U) = (1 / |V|) * sum_{v in V} max(0, max_{j in U, j in N(v)} s(v, j)), with N(v) v's K
/// neighbours in the graph and 0 when none of them is in U. V is the reference set, as for dense
/// facility location (`subset_view::reference`: the active batch during learning, the whole
/// block when a selection is evaluated; the greedy state and the relaxation use the whole block).
///
/// Why similarities below 0 count as 0: an item no selected neighbour covers scores 0, so a
/// negative similarity would make covering it worse than leaving it uncovered, and gains would
/// grow as U grows. With the clamp F is monotone and submodular (lazy greedy's stale gains stay
/// upper bounds) and the relaxation below is exact. Where the graph holds every item (K = n)
/// and every reference item's best similarity to U is >= 0 (always under cosine2 and rbf;
/// under cosine and dot where the data make it so, and for reference items in U under cosine),
/// F equals dense facility location (objectives/facility.hpp) up to the rounding of the stored
/// float similarities.
///
///
/// Cost: an evaluation reads each reference item's row up to its first neighbour in U (at most
/// |V| K), plus O(|U|) to mark U (on a device: O(|U| log |U|) to sort U, then a binary search
/// per neighbour read, and G |V| doubles of scratch for G subsets); a greedy gain reads the
/// candidate's reverse neighbours (K on average); the relaxation is O(n K). Memory: the graph
/// (n K ids and floats; under CUDA a second copy in device memory) and, in the greedy state,
/// its transpose.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "datamask/core/concepts.hpp"
#include "datamask/core/config.hpp"
#include "datamask/core/detail/parallel.hpp"
#include "datamask/core/error.hpp"
#include "datamask/exec/ops.hpp"
#include "datamask/objectives/knn/graph.hpp"
#include "datamask/objectives/detail/device_passes.hpp"
#include "datamask/objectives/detail/facility_dual.hpp"
#include "datamask/objectives/detail/facility_mean.hpp"

namespace datamask {

namespace detail::sparse_facility_impl {

/// s(v, j) clamped at 0 (see the file comment).
DATAMASK_HOST_DEVICE inline double clamped(float s) { return s > 0.0f ? static_cast<double>(s) : 0.0; }

/// The device evaluation's per-pair pass: for entry i = g |V| + a, the clamped similarity of
/// reference item a to its first neighbour in subset g (0 when none is), as the host call
/// operator finds it; `sorted` holds each subset's rows ascending (device_passes::sorted_rows).
struct first_in_subset {
  const index_t* ids;  // the graph, n x k, in the executor's memory
  const float* sims;
  index_t k;
  index_view reference;
  const index_t* sorted;  // G x `size`
  index_t size;
  double* best;  // G x |V|
  DATAMASK_HOST_DEVICE void operator()(index_t i) const {
    const index_t g = i / reference.size;
    const index_t v = reference[i - g * reference.size];
    double b = 0.0;
    for (index_t r = 0; r < k; ++r) {
      if (device_passes::contains(sorted + g * size, size, ids[v * k + r])) {
        b = clamped(sims[v * k + r]);
        break;
      }
    }
    best[i] = b;
  }
};

/// One entry of the graph's transpose: a reference item v listing the item, with s(v, j) > 0.
struct listing {
  index_t from;
  double sim;
};

/// The graph's transpose: for item j, the reference items v that list j, with s(v, j) > 0
/// (zero contributions can never raise a reference item's best), by v ascending.
using reverse_graph = grouped_entries<listing>;

inline reverse_graph transpose(const knn_graph& g) {
  return group_by_item(
      g, [&](index_t e) { return g.sims[static_cast<std::size_t>(e)] > 0.0f; },
      [&](index_t e) {
        return listing{e / g.k, static_cast<double>(g.sims[static_cast<std::size_t>(e)])};
      });
}

/// The greedy state over the whole block: best[v] = max(0, max_{j in S, j in N(v)} s(v, j)),
/// and the gain of i is (1 / n) sum_{v listing i} max(0, s(v, i) - best[v]), summed over the
/// reverse neighbours in order (the same bits whichever candidates share a call).
struct state {
  static constexpr bool diminishing_gains = true;

  std::shared_ptr<const reverse_graph> rev;
  std::vector<double> best;
  int threads = 0;

  state(const knn_graph& g, int thr)
      : rev(std::make_shared<const reverse_graph>(transpose(g))), best(static_cast<std::size_t>(g.n), 0.0), threads(thr) {}

  [[nodiscard]] double gain(index_t i) const {
    double acc = 0.0;
    for (auto e = rev->at[i]; e < rev->at[i + 1]; ++e) {
      const listing& l = rev->entries[static_cast<std::size_t>(e)];
      acc += std::max(0.0, l.sim - best[static_cast<std::size_t>(l.from)]);
    }
    return acc;
  }
  void accumulate(std::span<const index_t> cands, std::span<double> out, double w) const {
    const auto nc = static_cast<index_t>(cands.size());
    const double inv_n = 1.0 / static_cast<double>(best.size());
    const double avg = static_cast<double>(rev->entries.size()) / static_cast<double>(best.size());
    detail::parallel_for((nc + 255) / 256, threads, [&](index_t b) {
      for (index_t c = b * 256; c < std::min(nc, (b + 1) * 256); ++c) out[c] += w * gain(cands[c]) * inv_n;
    }, 256.0 * std::max(1.0, avg));
  }
  [[nodiscard]] double common() const { return 0.0; }
  void add(index_t j) {
    for (auto e = rev->at[j]; e < rev->at[j + 1]; ++e) {
      const listing& l = rev->entries[static_cast<std::size_t>(e)];
      double& b = best[static_cast<std::size_t>(l.from)];
      b = std::max(b, l.sim);
    }
  }
};

/// Every graph entry e = v K + r grouped by the item it lists: for item j, the entries with
/// ids[e] == j by v ascending (`entry[start[j] .. start[j + 1])`), the order in which a pass over
/// the rows in order adds them to j's gradient. Built once per graph (`relax_cache`).
struct entries_by_item {
  std::shared_ptr<const knn_graph> graph;  ///< the graph grouped (kept alive: the cache's key)
  grouped_entries<index_t> grouped;        ///< `at`: n + 1 offsets; `entries`: the entries e

  explicit entries_by_item(std::shared_ptr<const knn_graph> shared)
      : graph(std::move(shared)),
        grouped(group_by_item(
            *graph, [](index_t) { return true; }, [](index_t e) { return e; })) {}
};

/// The relaxation's grouping of a graph, built on its first use and shared by copies of the
/// objective; rebuilt when the objective is given another graph. Thread-safe.
class relax_cache {
 public:
  std::shared_ptr<const entries_by_item> get(const std::shared_ptr<const knn_graph>& g) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!entries_ || entries_->graph != g) entries_ = std::make_shared<const entries_by_item>(g);
    return entries_;
  }

 private:
  std::mutex mutex_;
  std::shared_ptr<const entries_by_item> entries_;
};

/// Pass 1 of the relaxation, per reference item u (row u of the graph, neighbours sorted): the
/// expected best covered similarity backward, T_K = 0, T_r = s_r p_r + (1 - p_r) T_(r+1)
/// (value[u] = T_0), then each neighbour's share of the gradient forward,
/// contrib[u K + r] = inv_n prod_{r' < r} (1 - p_(r')) (s_r - T_(r+1)) (T_(r+1) is kept in
/// contrib until then; 0 once the product is 0).
struct relax_row {
  const index_t* ids;
  const float* sims;
  index_t k;
  const double* p;
  double inv_n;
  double* contrib;
  double* value;
  DATAMASK_HOST_DEVICE void operator()(index_t u) const {
    const index_t* row = ids + u * k;
    const float* sim = sims + u * k;
    double* c = contrib + u * k;
    double tail = 0.0;
    for (index_t r = k - 1; r >= 0; --r) {
      c[r] = tail;
      const double pr = p[row[r]];
      tail = clamped(sim[r]) * pr + (1.0 - pr) * tail;
    }
    value[u] = tail;
    double none_before = 1.0;
    for (index_t r = 0; r < k; ++r) {
      c[r] = none_before == 0.0 ? 0.0 : inv_n * none_before * (clamped(sim[r]) - c[r]);
      none_before *= 1.0 - p[row[r]];
    }
  }
};

/// Pass 2: grad[j] = the sum of the contributions of the entries listing j, in `entries_by_item`
/// order.
struct gather_gradient {
  const index_t* start;
  const index_t* entry;
  const double* contrib;
  double* grad;
  DATAMASK_HOST_DEVICE void operator()(index_t j) const {
    double a = 0.0;
    for (index_t e = start[j]; e < start[j + 1]; ++e) a += contrib[entry[e]];
    grad[j] = a;
  }
};

/// Rows marked as members of the subset being scored: one buffer per thread, reset after use,
/// so an evaluation costs O(|U|) to mark instead of O(n) to clear.
inline std::vector<unsigned char>& marks(index_t n) {
  thread_local std::vector<unsigned char> m;
  if (static_cast<index_t>(m.size()) < n) m.resize(static_cast<std::size_t>(n), 0);
  return m;
}

/// The swap gains (`swappable_objective`) on a selection, the whole block as
/// reference set: a swap (r leaves, a joins) changes only the reference items whose rows list r
/// or a (with a positive similarity), so a gain costs O(K) per such item -- about 2 K^2 in all --
/// instead of an evaluation over the block.
struct swaps {
  std::shared_ptr<const knn_graph> g;
  std::shared_ptr<const reverse_graph> rev;
  std::vector<unsigned char> in;  // membership of the selection
  std::vector<double> best;       // each reference item's value on the selection

  swaps(std::shared_ptr<const knn_graph> graph, std::span<const index_t> sel)
      : g(std::move(graph)), rev(std::make_shared<const reverse_graph>(transpose(*g))), in(static_cast<std::size_t>(g->n), 0),
        best(static_cast<std::size_t>(g->n)) {
    for (index_t i : sel) in[static_cast<std::size_t>(i)] = 1;
    for (index_t u = 0; u < g->n; ++u) best[static_cast<std::size_t>(u)] = value(u, -1, -1);
  }
  /// Item u's value on the selection with r out and a in (-1: none).
  [[nodiscard]] double value(index_t u, index_t r, index_t a) const {
    for (index_t q = 0; q < g->k; ++q) {
      const index_t j = g->neighbor(u, q);
      if (j == a || (j != r && in[static_cast<std::size_t>(j)])) {
        return clamped(g->similarity(u, q));
      }
    }
    return 0.0;
  }
  /// Calls f(u) once for each reference item listing r or a, by u ascending.
  template <class F>
  void affected(index_t r, index_t a, F&& f) const {
    auto i = rev->at[r];
    auto j = rev->at[a];
    const auto ie = rev->at[r + 1];
    const auto je = rev->at[a + 1];
    while (i < ie || j < je) {
      const index_t ur = i < ie ? rev->entries[static_cast<std::size_t>(i)].from : g->n;
      const index_t ua = j < je ? rev->entries[static_cast<std::size_t>(j)].from : g->n;
      const index_t u = std::min(ur, ua);
      f(u);
      if (ur == u) ++i;
      if (ua == u) ++j;
    }
  }
  void prepare(std::span<const index_t> /*removals*/, std::span<const index_t> /*additions*/) {}
  [[nodiscard]] double delta(index_t r, index_t a) const {
    double d = 0.0;
    affected(r, a, [&](index_t u) { d += value(u, r, a) - best[static_cast<std::size_t>(u)]; });
    return d / static_cast<double>(g->n);
  }
  void apply(index_t r, index_t a) {
    in[static_cast<std::size_t>(r)] = 0;
    in[static_cast<std::size_t>(a)] = 1;
    affected(r, a, [&](index_t u) { best[static_cast<std::size_t>(u)] = value(u, -1, -1); });
  }
};

}  // namespace detail::sparse_facility_impl

/// @brief Facility location on a kNN graph of the block (see the file comment). Copies share the
/// graph. Models `incremental_objective`, `relaxable_objective`, `swappable_objective`,
/// `boundable_objective` (the dual of its LP relaxation) and `subset_mean_objective`. Not
/// `batched_diversity_objective`: the backend's per-subset path already scores G subsets in
/// parallel on the run's threads (a `batch_view` carries no thread count), and one pass over the
/// reference set per subset is the whole cost. Models `device_evaluable`: the graph goes to the
/// executor's memory once per run (`resident`), each subset's rows are sorted there, and each
/// (subset, reference item) searches its row's neighbours in them, O(K log k); the values equal
/// the host call operator's bit for bit (the same clamped float similarities, summed in
/// reference order, divided by |V|).
struct sparse_facility_location {
  static constexpr std::string_view name = "facility_knn";

  /// @brief Its cost per item (`costed_objective`) on a graph of K neighbours: K for a greedy gain
  /// (the candidate's reverse neighbours, K on average), 3 K for the relaxation (two passes over
  /// the item's row, then the gather of its entries).
  static constexpr item_costs costs_per_item(index_t /*dims*/, index_t neighbors) {
    const auto k = static_cast<double>(neighbors);
    return {k, 3.0 * k};
  }

  std::shared_ptr<const knn_graph> graph;
  /// The relaxation's grouping of the graph's entries by item, built on first use.
  std::shared_ptr<detail::sparse_facility_impl::relax_cache> cache =
      std::make_shared<detail::sparse_facility_impl::relax_cache>();

  /// @brief Scores one subset against `s.reference`: per reference item, its first neighbour in
  /// the subset (rows are sorted, so that one is the best).
  template <class T>
  [[nodiscard]] double operator()(const subset_view<T>& s) const {
    const knn_graph& g = checked(s.embeddings.rows);
    const index_t nv = s.reference.size;
    if (s.subset.size == 0 || nv == 0) return 0.0;
    auto& in = detail::sparse_facility_impl::marks(g.n);
    for (index_t j : s.subset) in[static_cast<std::size_t>(j)] = 1;
    double total = 0.0;
    for (index_t v : s.reference) {
      const index_t* row = g.ids.data() + v * g.k;
      for (index_t r = 0; r < g.k; ++r) {
        if (in[static_cast<std::size_t>(row[r])]) {
          total += detail::sparse_facility_impl::clamped(g.similarity(v, r));
          break;
        }
      }
    }
    for (index_t j : s.subset) in[static_cast<std::size_t>(j)] = 0;
    return total / static_cast<double>(nv);
  }

  /// @brief Scores G subsets through a backend's executor (see `device_evaluable`): each
  /// subset's rows sorted, each (subset, reference item)'s first neighbour in the subset, then
  /// the mean per subset in reference order, as the call operator sums.
  template <class Exec, class T>
  void evaluate_device(Exec& exec, const batch_view<T>& b, double* out) const {
    namespace dp = detail::device_passes;
    const knn_graph& g = checked(b.embeddings.rows);
    const index_t g_count = b.subsets.rows;
    const index_t k = b.subsets.cols;
    const index_t nv = b.reference.size;
    if (dp::zero_when(k == 0 || nv == 0, exec, b, out)) return;
    const index_t* ids = exec.resident(std::span<const index_t>(g.ids), graph);
    const float* sims = exec.resident(std::span<const float>(g.sims), graph);
    index_t* sorted = exec.template scratch<index_t>(g_count * k);
    exec.for_each(g_count, dp::sorted_rows{b.subsets, sorted});
    double* best = exec.template scratch<double>(g_count * nv);
    exec.for_each(g_count * nv,
                  detail::sparse_facility_impl::first_in_subset{ids, sims, g.k, b.reference, sorted, k, best});
    // (1 * sum) / |V|, the sum from 0 in reference order: the call operator's bits.
    exec.for_each(g_count, dp::scaled_row_sum{best, nv, 1.0, static_cast<double>(nv), out});
  }

  /// @brief The greedy state over a block (see `incremental_objective`).
  template <class T>
  [[nodiscard]] detail::sparse_facility_impl::state greedy_state(const greedy_block<T>& b) const {
    return detail::sparse_facility_impl::state(checked(b.embeddings.rows), b.threads);
  }

  /// @brief The relaxation (docs/method.md section 6, the `relaxable_objective` capability), the
  /// whole block as reference set: with each item included independently with probability p_i
  /// and v's neighbours sorted,
  ///   E[max] = sum_r s_(r) p_(r) prod_{r' < r} (1 - p_(r')),
  /// exact (the best included neighbour is the first included in the sorted row; none scores 0).
  /// Gradient by one backward pass: T_(K+1) = 0, T_r = s_(r) p_(r) + (1 - p_(r)) T_(r+1), then
  /// dE[max] / dp_(r) = prod_{r' < r} (1 - p_(r')) (s_(r) - T_(r+1)), added over v. F is the mean
  /// over v. Through `exec`: one pass per reference item, then one gather per item over the
  /// entries that list it (in row order, so no sum depends on the thread count): O(n K) work and
  /// n K doubles of scratch.
  template <class Exec, class T>
  double relax(Exec& exec, const relax_view<T>& v, double* grad) const {
    namespace si = detail::sparse_facility_impl;
    const knn_graph& g = checked(v.embeddings.rows);
    const std::shared_ptr<const si::entries_by_item> by_item = cache->get(graph);
    const index_t* ids = exec.resident(std::span<const index_t>(g.ids), graph);
    const float* sims = exec.resident(std::span<const float>(g.sims), graph);
    const index_t* start = exec.resident(std::span<const index_t>(by_item->grouped.at), by_item);
    const index_t* entry = exec.resident(std::span<const index_t>(by_item->grouped.entries), by_item);
    const double inv_n = 1.0 / static_cast<double>(g.n);
    auto scope = exec.scope();
    double* contrib = scope.template scratch<double>(g.n * g.k);
    double* value = scope.template scratch<double>(g.n);
    const auto k = static_cast<double>(g.k);
    scope.for_each(g.n, si::relax_row{ids, sims, g.k, v.p.data(), inv_n, contrib, value}, 8.0 * k);
    scope.for_each(g.n, si::gather_gradient{start, entry, contrib, grad}, 2.0 * k);
    return scope.reduce(g.n, ops::read{value}, ops::plus{}, 0.0) * inv_n;
  }

  /// @brief Exact swap gains on a selection (`swappable_objective`): a swap changes only the
  /// reference items whose rows list the two items, about 2 K^2 work.
  template <class T>
  [[nodiscard]] detail::sparse_facility_impl::swaps swap_state(const subset_view<T>& block,
                                                             std::span<const index_t> selection) const {
    checked(block.embeddings.rows);
    return detail::sparse_facility_impl::swaps(graph, selection);
  }

  /// @brief The mean of F over every set of `size` rows of the block against `s.reference`
  /// (`subset_mean_objective`; objectives/detail/facility_mean.hpp): a reference item's score is
  /// its first neighbour in the set (rows are stored best first), clamped at 0, and 0 when none is
  /// in it, so its mean is sum_t q_t max(0, s_t) over its distinct neighbours in row order
  /// (a repeated neighbour is never the first). O(|V| K).
  /// @throws invalid_input when `s.subset` is not the whole block
  template <class T>
  [[nodiscard]] double subset_mean(const subset_view<T>& s, index_t size) const {
    const knn_graph& g = checked(s.embeddings.rows);
    DATAMASK_EXPECTS(s.subset.size == g.n, "subset", "the mean over random sets is over the whole block (", g.n,
                     " rows), found ", s.subset.size, " candidates");
    const index_t nv = s.reference.size;
    if (size == 0 || nv == 0) return 0.0;
    const std::vector<double> q = detail::facility_mean::first_pick(g.n, size, g.k);
    auto& seen = detail::sparse_facility_impl::marks(g.n);
    double total = 0.0;
    for (index_t v : s.reference) {
      const index_t* row = g.ids.data() + v * g.k;
      index_t t = 0;  // distinct neighbours before this one
      for (index_t r = 0; r < g.k; ++r) {
        if (seen[static_cast<std::size_t>(row[r])]) continue;
        seen[static_cast<std::size_t>(row[r])] = 1;
        total += detail::sparse_facility_impl::clamped(g.similarity(v, r)) * q[static_cast<std::size_t>(t++)];
      }
      for (index_t r = 0; r < g.k; ++r) seen[static_cast<std::size_t>(row[r])] = 0;
    }
    return total / static_cast<double>(nv);
  }

  /// @brief An upper bound on max f over sets of S items for f = linear + weight * F with the
  /// whole block as reference set, with its certificate lambda >= 0 (`boundable_objective`,
  /// docs/method.md 7.2): the Lagrangian dual of the LP relaxation on the graph's pairs (similarities
  /// clamped at 0, as F counts them), so the bound is for this sparse objective, not for dense
  /// facility location. From the selection's assignment, `v.iterations` steps (0: 100) of a
  /// variable-target Polyak method (objectives/detail/facility_dual.hpp), each (but a restart) a
  /// pass over the graph's positive entries (8 bytes each) of the items that can reach the top
  /// set, a top-S selection and a pass over the items that joined or left the top set. Host
  /// memory.
  template <class T>
  [[nodiscard]] bound_certificate bound(const bound_view<T>& v) const {
    const knn_graph& g = checked(v.embeddings.rows);
    DATAMASK_EXPECTS(v.weight >= 0.0 && std::isfinite(v.weight), "weight",
                     "must be finite and >= 0, found ", v.weight);
    const detail::facility_dual::knn_pairs pairs(g, v.weight, v.threads);
    return detail::facility_dual::minimise(pairs, v.linear, v.size, v.selection, v.iterations);
  }
  /// @brief L(lambda) recomputed from the graph alone (its rows in order); throws `invalid_input`
  /// for a multiplier that is negative or not finite.
  template <class T>
  [[nodiscard]] double check_bound(const bound_view<T>& v, std::span<const double> lambda) const {
    return detail::facility_dual::check_knn(v, checked(v.embeddings.rows), lambda);
  }

 private:
  const knn_graph& checked(index_t n) const {
    DATAMASK_EXPECTS(graph != nullptr, "graph", "sparse facility location has no kNN graph");
    DATAMASK_EXPECTS(graph->n == n, "graph", "has ", graph->n, " rows, but the block has ", n,
                     " items; build or load the graph for this block");
    return *graph;
  }
};

}  // namespace datamask
