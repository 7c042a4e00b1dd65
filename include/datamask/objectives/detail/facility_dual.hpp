// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The upper bound of facility location with a modular part (docs/method.md 7.2): the
/// Lagrangian dual of its LP relaxation. With w_vs = weight sim(v, s) / n (the whole block as
/// reference set) and a_s the modular part, every lambda >= 0 gives
///   max_{|U| = S} f(U) <= L(lambda) = sum_v lambda_v + (sum of the S largest b_s(lambda)),
///   b_s(lambda) = a_s + sum_v max(0, w_vs - lambda_v).
/// (A set U is a feasible point of the LP max sum w_vs x_vs + sum a_s y_s, sum_s x_vs <= 1,
/// 0 <= x_vs <= y_s <= 1, sum y = S; a reference item whose best similarity in U is negative may
/// take x = 0, which only raises the LP; dualising the cover rows gives L.)
/// The method (benchmarks/certificates/STUDY.md, "polyak-level-deflected"): start at the
/// selection's own assignment lambda_v = max(0, max_{s in U} w_vs), where L is the classical
/// f(U) + (the S largest marginal gains) bound, then projected subgradient steps
/// dL/dlambda_v = 1 - #{s in the top set : w_vs > lambda_v} with a variable-target Polyak step
/// (level max(f(U), best - delta), delta halved with a restart at the best lambda after
/// `patience` evaluations without progress) along a deflected direction g + beta d_prev.
/// The pairs come in two forms: dense (every pair, with lambda_v kept above a quarter of the
/// start's, so that only the pairs above those floors can add to b: they are held when they fit
/// the view's memory budget, else recomputed in blocks by matrix products) and the kNN graph (the
/// pairs of the graph, clamped at 0 as sparse facility location counts them). Host code: every
/// evaluation needs a top-S selection. Each evaluation reads the pairs of every column that can
/// reach the top set (`dual_evaluator`: a safe screening skips the others, about two thirds of
/// the kNN pairs at n = 100,000), and during that pass counts the subgradient over the previous
/// top set's columns (most of the new top set: about a tenth of the columns change from one
/// evaluation to the next), then corrects the count by the few columns that changed. The
/// method's cost is bound by memory bandwidth, which is why the kNN pairs are packed in 8 bytes.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <numeric>
#include <span>
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "datamask/core/concepts.hpp"
#include "datamask/core/detail/parallel.hpp"
#include "datamask/core/error.hpp"
#include "datamask/core/kernels.hpp"
#include "datamask/objectives/knn/graph.hpp"
#include "datamask/core/types.hpp"

namespace datamask::detail::facility_dual {

/// Steps of the method when the view asks for the default: enough to come close to the LP's bound
/// on every block of the study, both forms (benchmarks/RESULTS.md, "The certificate's budget").
/// Each step evaluates L but
/// a restart, which returns to the best lambda and reuses its evaluation.
inline constexpr index_t default_steps = 100;
/// The step rule's settings, chosen by the study on two blocks (synth-2000-32 and digits, kNN)
/// and checked on eight others: evaluations without progress before delta halves, and beta.
inline constexpr int patience = 3;
inline constexpr double deflection = 0.5;

/// The dense form's floor on lambda_v, as a share of what the selection gives v (`dense_pairs`).
/// Where it does not bind, the bound is that of the method on lambda >= 0, as on every dense
/// block measured: the numpy reference's fixtures (tests/test_certify.cpp, to 1e-9) and
/// cli_cost.py's 5,000-item block (the same bits). A higher floor holds fewer pairs, but binds
/// sooner.
inline constexpr double hold_floor = 0.25;

/// Columns (or rows) per matrix product of the dense form.
inline constexpr index_t dense_block = 64;

/// The subgradient's count over a set of columns, count_v = #{s in the set : w_vs > lambda_v},
/// gathered during a pass over the columns by relaxed atomic additions (integers: the same count
/// in any order, on any thread count, in O(n) memory whatever the threads).
class column_counts {
 public:
  /// A zero count for a pass over n items, counting the columns of `rows`.
  void begin(index_t n, std::span<const index_t> rows) {
    member_.assign(static_cast<std::size_t>(n), 0);
    for (index_t s : rows) member_[static_cast<std::size_t>(s)] = 1;
    count_.assign(static_cast<std::size_t>(n), 0);
  }
  [[nodiscard]] bool counted(index_t s) const { return member_[static_cast<std::size_t>(s)] != 0; }
  /// count_v += 1, from any thread.
  void add(std::size_t v) { std::atomic_ref<std::int32_t>(count_[v]).fetch_add(1, std::memory_order_relaxed); }
  /// The count, handed over (the pass has ended).
  std::vector<std::int32_t> take() { return std::move(count_); }

 private:
  std::vector<char> member_;
  std::vector<std::int32_t> count_;
};

/// Dense pairs: w_vs = c sim(e_v, e_s) for every pair, from the kernel's rows in double.
///
/// The dual is minimised over lambda_v >= floor_v = `hold_floor` x (what the selection gives v),
/// not over lambda >= 0 (`hold`): every such lambda gives a valid bound, and then a pair with
/// w_vs <= floor_v never adds to b_s, so only the pairs above the floors are held, each column's
/// in v order, as (v, w) in 12 bytes, when they fit the view's memory budget; else every
/// evaluation recomputes the columns by blocks of matrix products (2 n^2 d flops).
template <class T>
class dense_pairs {
 public:
  using rmat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

  dense_pairs(const bound_view<T>& v, similarity_kernel kernel, double gamma)
      : n_(v.embeddings.rows),
        kernel_(kernel),
        gamma_(gamma),
        c_(v.weight / static_cast<double>(v.embeddings.rows)),
        threads_(v.threads),
        memory_bytes_(v.memory_bytes),
        sq_(v.sq_norms, v.sq_norms + v.embeddings.rows),
        x_(v.embeddings.rows, v.embeddings.cols) {
    const bool unit = unit_rows(kernel);
    for (index_t i = 0; i < n_; ++i) {
      const double scale = unit ? v.inv_norms[i] : 1.0;
      for (index_t j = 0; j < v.embeddings.cols; ++j)
        x_(i, j) = static_cast<double>(v.embeddings(i, j)) * scale;
    }
  }

  [[nodiscard]] index_t size() const { return n_; }
  /// Whether the pairs above the floors are held (`hold` found room for them).
  [[nodiscard]] bool held() const { return !at_.empty(); }
  /// floor_v, the least lambda_v the method may take (empty before `hold`: 0).
  [[nodiscard]] std::span<const double> floors() const { return floor_; }

  /// Sets floor_v = hold_floor x start_v (start: the selection's assignment, >= 0) and holds the
  /// pairs above the floors when their 12 bytes each fit the memory budget: a pass of products
  /// that counts them, and one that copies them.
  void hold(std::span<const double> start) {
    floor_.resize(start.size());
    for (std::size_t v = 0; v < start.size(); ++v) floor_[v] = hold_floor * start[v];
    std::vector<index_t> length(static_cast<std::size_t>(n_));
    for_columns([&](index_t s, const double* w) {
      length[static_cast<std::size_t>(s)] = above_floor(w, nullptr);
    });
    std::vector<index_t> at(static_cast<std::size_t>(n_) + 1, 0);
    std::partial_sum(length.begin(), length.end(), at.begin() + 1);
    const double bytes = static_cast<double>(at.back()) * (sizeof(std::uint32_t) + sizeof(double));
    const bool fits = bytes <= static_cast<double>(memory_bytes_);
    if (!fits || n_ > std::numeric_limits<std::uint32_t>::max()) return;
    held_v_.resize(static_cast<std::size_t>(at.back()));
    held_w_.resize(static_cast<std::size_t>(at.back()));
    at_ = std::move(at);
    for_columns([&](index_t s, const double* w) {
      above_floor(w, &at_[static_cast<std::size_t>(s)]);
    });
  }

  /// visit(s, w) for every candidate s, w[v] = w_vs (n values), columns in blocks of one matrix
  /// product each, the blocks on the threads (so `visit` runs concurrently for distinct s).
  template <class Visit>
  void for_columns(Visit&& visit) const {
    const index_t blocks = (n_ + dense_block - 1) / dense_block;
    detail::parallel_for(
        blocks, threads_,
        [&](index_t bi) {
          const index_t s0 = bi * dense_block;
          const index_t ns = std::min(dense_block, n_ - s0);
          const rmat dots =
              x_.middleRows(s0, ns) * x_.transpose();  // ns x n: row a holds column s0 + a
          std::vector<double> w(static_cast<std::size_t>(n_));
          for (index_t a = 0; a < ns; ++a) {
            for (index_t v = 0; v < n_; ++v)
              w[static_cast<std::size_t>(v)] = weight(dots(a, v), v, s0 + a);
            visit(s0 + a, static_cast<const double*>(w.data()));
          }
        },
        2.0 * static_cast<double>(dense_block) * static_cast<double>(n_) *
            static_cast<double>(x_.cols()));
  }

  /// The pairs of column s that a pass reads: those above the floors when held, else every
  /// reference item.
  [[nodiscard]] index_t column_length(index_t s) const {
    if (!held()) return n_;
    return at_[static_cast<std::size_t>(s) + 1] - at_[static_cast<std::size_t>(s)];
  }
  /// Whether a pass reads each column apart (the held pairs), so that it may skip one and count
  /// one; recomputed, the columns come from products of blocks of columns, whose last bits need
  /// not match `covered`'s products of blocks of rows.
  [[nodiscard]] bool reads_columns() const { return held(); }

  /// b_s += sum_v max(0, w_vs - lambda_v) for every s for which `begin(s)` (called first, once
  /// per column, concurrently for distinct s) returns true, and the count over the columns
  /// `counts` marks. Held, only the pairs above the floors: the others add exactly 0.
  template <class Begin>
  void column_excess(std::span<const double> lambda, std::span<double> b, column_counts& counts,
                     Begin&& begin) const {
    if (held()) {
      detail::parallel_for(
          n_, threads_,
          [&](index_t s) {
            if (!begin(s)) return;
            const auto from = static_cast<std::size_t>(at_[static_cast<std::size_t>(s)]);
            const auto to = static_cast<std::size_t>(at_[static_cast<std::size_t>(s) + 1]);
            const bool count = counts.counted(s);
            double acc = 0.0;
            for (std::size_t e = from; e < to; ++e) {
              const double x = held_w_[e] - lambda[held_v_[e]];
              acc += 0.5 * (x + std::abs(x));  // max(0, x) exactly, with no branch to mispredict
              if (count && x > 0.0) counts.add(held_v_[e]);
            }
            b[static_cast<std::size_t>(s)] += acc;
          },
          3.0 * static_cast<double>(n_));
      return;
    }
    for_columns([&](index_t s, const double* w) {
      if (!begin(s)) return;
      double acc = 0.0;
      for (index_t v = 0; v < n_; ++v)
        acc += std::max(0.0, w[v] - lambda[static_cast<std::size_t>(v)]);
      b[static_cast<std::size_t>(s)] += acc;
    });
  }

  /// count_v += sign #{s in rows : w_vs > lambda_v}.
  void covered(std::span<const double> lambda, std::span<const index_t> rows, int sign,
               std::span<std::int32_t> count) const {
    if (rows.empty()) return;
    if (held()) {
      for (index_t s : rows) {
        const auto to = static_cast<std::size_t>(at_[static_cast<std::size_t>(s) + 1]);
        for (auto e = static_cast<std::size_t>(at_[static_cast<std::size_t>(s)]); e < to; ++e)
          count[held_v_[e]] += held_w_[e] > lambda[held_v_[e]] ? sign : 0;
      }
      return;
    }
    for_rows(rows, [&](index_t v, const double* w) {
      const double l = lambda[static_cast<std::size_t>(v)];
      std::int32_t c = 0;
      for (std::size_t t = 0; t < rows.size(); ++t) c += w[t] > l ? 1 : 0;
      count[static_cast<std::size_t>(v)] += sign * c;
    });
  }

  /// best_v = max_{s in rows} w_vs (negative when every similarity is).
  void best(std::span<const index_t> rows, std::span<double> out) const {
    for_rows(rows, [&](index_t v, const double* w) {
      double m = -std::numeric_limits<double>::infinity();
      for (std::size_t t = 0; t < rows.size(); ++t) m = std::max(m, w[t]);
      out[static_cast<std::size_t>(v)] = m;
    });
  }

 private:
  /// The number of w_vs above floor_v in column w; with `to`, also copies them from `*to` on.
  index_t above_floor(const double* w, const index_t* to) {
    index_t k = 0;
    for (index_t v = 0; v < n_; ++v) {
      if (!(w[v] > floor_[static_cast<std::size_t>(v)])) continue;
      if (to != nullptr) {
        held_v_[static_cast<std::size_t>(*to + k)] = static_cast<std::uint32_t>(v);
        held_w_[static_cast<std::size_t>(*to + k)] = w[v];
      }
      ++k;
    }
    return k;
  }

  /// visit(v, w) for every reference item v, w[t] = w_{v, rows[t]}: the S columns of a set, S / n
  /// of a pass, by products.
  template <class Visit>
  void for_rows(std::span<const index_t> rows, Visit&& visit) const {
    const auto k = static_cast<index_t>(rows.size());
    const index_t blocks = (n_ + dense_block - 1) / dense_block;
    rmat xs(k, x_.cols());
    for (index_t t = 0; t < k; ++t) xs.row(t) = x_.row(rows[static_cast<std::size_t>(t)]);
    detail::parallel_for(
        blocks, threads_,
        [&](index_t bi) {
          const index_t v0 = bi * dense_block;
          const index_t nv = std::min(dense_block, n_ - v0);
          std::vector<double> w(static_cast<std::size_t>(k));
          const rmat dots = x_.middleRows(v0, nv) * xs.transpose();
          for (index_t a = 0; a < nv; ++a) {
            const index_t v = v0 + a;
            for (index_t t = 0; t < k; ++t) {
              const index_t s = rows[static_cast<std::size_t>(t)];
              w[static_cast<std::size_t>(t)] = weight(dots(a, t), v, s);
            }
            visit(v, static_cast<const double*>(w.data()));
          }
        },
        2.0 * static_cast<double>(dense_block) * static_cast<double>(k) *
            static_cast<double>(x_.cols()));
  }

  [[nodiscard]] double weight(double dot, index_t v, index_t s) const {
    return c_ * kernel_similarity(kernel_, gamma_, dot, sq_[static_cast<std::size_t>(v)],
                                  sq_[static_cast<std::size_t>(s)]);
  }

  index_t n_;
  similarity_kernel kernel_;
  double gamma_;
  double c_;
  int threads_;
  std::size_t memory_bytes_;
  std::vector<double> sq_;
  rmat x_;
  std::vector<double> floor_;          ///< floor_v (`hold`)
  std::vector<index_t> at_;            ///< column s: held pairs at_[s] .. at_[s + 1] (empty: none)
  std::vector<std::uint32_t> held_v_;  ///< each held pair's reference item v
  std::vector<double> held_w_;         ///< and its w_vs
};

/// kNN pairs: w_e = c max(0, sim_e) for the graph's entries e = v K + r (s = ids[e]). The
/// positive entries are grouped by the item s they list (v ascending), each as (v, sim) in 8
/// bytes, since L's pass over them is bound by memory bandwidth; w = c sim is formed in double as
/// it is read. The columns run on the threads, each summing in its own fixed order (the bits do
/// not depend on the thread count); the start and the count's correction read only the columns
/// of a set.
class knn_pairs {
 public:
  knn_pairs(const knn_graph& g, double weight, int threads)
      : n_(rows_of(g)),
        c_(weight / static_cast<double>(g.n)),
        threads_(threads),
        k_(g.k),
        columns_(group_by_item(
            g,
            // max(0, 0 - lambda) = 0: an entry without a positive similarity never counts
            [&](index_t e) { return g.sims[static_cast<std::size_t>(e)] > 0.0f; },
            [&](index_t e) {
              return entry{static_cast<std::uint32_t>(e / g.k), g.sims[static_cast<std::size_t>(e)]};
            })) {}

  [[nodiscard]] index_t size() const { return n_; }

  /// The positive pairs of column s.
  [[nodiscard]] index_t column_length(index_t s) const {
    return columns_.at[static_cast<std::size_t>(s) + 1] - columns_.at[static_cast<std::size_t>(s)];
  }
  /// A pass reads each column apart: it may skip one and count one.
  [[nodiscard]] static constexpr bool reads_columns() { return true; }

  /// b_s += sum_v max(0, w_vs - lambda_v) for every s for which `begin(s)` (called first, once
  /// per column, concurrently for distinct s) returns true, and the count over the columns
  /// `counts` marks.
  template <class Begin>
  void column_excess(std::span<const double> lambda, std::span<double> b, column_counts& counts,
                     Begin&& begin) const {
    constexpr index_t chunk = 256;
    detail::parallel_for(
        (n_ + chunk - 1) / chunk, threads_,
        [&](index_t bi) {
          for (index_t s = bi * chunk; s < std::min(n_, (bi + 1) * chunk); ++s) {
            if (!begin(s)) continue;
            double acc = 0.0;
            if (counts.counted(s)) {
              for (const entry& e : column(s)) {
                const double x = excess(e, lambda);
                acc += 0.5 * (x + std::abs(x));
                if (x > 0.0) counts.add(e.v);
              }
            } else {
              for (const entry& e : column(s)) {
                const double x = excess(e, lambda);
                acc += 0.5 * (x + std::abs(x));  // max(0, x) exactly, with no branch to mispredict
              }
            }
            b[static_cast<std::size_t>(s)] += acc;
          }
        },
        static_cast<double>(chunk) * 3.0 * static_cast<double>(k_));
  }

  /// count_v += sign #{s in rows : w_vs > lambda_v}.
  void covered(std::span<const double> lambda, std::span<const index_t> rows, int sign,
               std::span<std::int32_t> count) const {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (i + 8 < rows.size()) prefetch(rows[i + 8]);
      for (const entry& e : column(rows[i])) count[e.v] += excess(e, lambda) > 0.0 ? sign : 0;
    }
  }

  /// best_v = max(0, max_{s in rows and N(v)} w_vs): what v gets from the set.
  void best(std::span<const index_t> rows, std::span<double> out) const {
    std::fill(out.begin(), out.end(), 0.0);
    for (index_t s : rows) {
      for (const entry& e : column(s)) out[e.v] = std::max(out[e.v], w(e));
    }
  }

 private:
  struct entry {
    std::uint32_t v;  ///< the reference item
    float sim;        ///< > 0
  };

  /// n, checked to fit an entry's 32-bit row before anything is allocated.
  static index_t rows_of(const knn_graph& g) {
    DATAMASK_EXPECTS(g.n <= std::numeric_limits<std::uint32_t>::max(), "graph", "has ", g.n,
                     " rows; the bound handles at most 2^32 - 1 per block");
    return g.n;
  }

  [[nodiscard]] std::span<const entry> column(index_t s) const {
    const auto from = static_cast<std::size_t>(columns_.at[static_cast<std::size_t>(s)]);
    return {columns_.entries.data() + from,
            static_cast<std::size_t>(columns_.at[static_cast<std::size_t>(s) + 1]) - from};
  }
  /// A hint to load column s's first entries: the S columns of a set lie far apart, and each
  /// would otherwise start with a wait on memory.
  void prefetch(index_t s) const {
#if defined(__GNUC__)
    __builtin_prefetch(columns_.entries.data() + columns_.at[static_cast<std::size_t>(s)]);
#else
    (void)s;
#endif
  }
  [[nodiscard]] double w(const entry& e) const { return c_ * static_cast<double>(e.sim); }
  /// w_vs - lambda_v, the one expression of the pass and of the count's correction. A compiler
  /// that contracts it into one fused multiply-add (FMA targets, e.g. -march=native) rounds once:
  /// other last bits of b, the same validity; and where lambda_v = w_vs (as at the start) its sign
  /// may differ from w_vs > lambda_v, so the count may too (either is a subgradient).
  [[nodiscard]] double excess(const entry& e, std::span<const double> lambda) const {
    return w(e) - lambda[e.v];
  }

  index_t n_;
  double c_;  ///< weight / n
  int threads_;
  index_t k_;
  grouped_entries<entry> columns_;  ///< column s: entries[at[s] .. at[s + 1])
};

/// The S largest of b (ties to the smaller index), ascending: the S-th largest value found by
/// a selection on a copy of the values (`scratch`), then the rows above it and the first rows
/// equal to it in index order. `floor`, a value believed to lie below the S-th largest (the
/// previous evaluation's value of rank 5 S / 4, as this call leaves it), limits the copy to the
/// values above it; when fewer than S are, the copy takes every value.
inline std::vector<index_t> top_rows(std::span<const double> b, index_t size,
                                     std::vector<double>& scratch, double& floor) {
  const auto k = static_cast<std::size_t>(size);
  scratch.clear();
  for (double x : b) {
    if (x > floor) scratch.push_back(x);
  }
  if (scratch.size() < k) scratch.assign(b.begin(), b.end());
  const std::size_t spare = std::min(scratch.size(), k + k / 4 + 1);
  std::nth_element(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(spare - 1),
                   scratch.end(), std::greater<>());
  floor = spare > k ? scratch[spare - 1] : -std::numeric_limits<double>::infinity();
  std::nth_element(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(k - 1),
                   scratch.begin() + static_cast<std::ptrdiff_t>(spare), std::greater<>());
  const double cut = scratch[k - 1];
  index_t ties = size;  // the rows equal to the cut that the top set takes
  for (std::size_t i = 0; i < k; ++i) ties -= scratch[i] > cut ? 1 : 0;
  std::vector<index_t> idx;
  idx.reserve(k);
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (b[i] > cut || (b[i] == cut && ties-- > 0)) idx.push_back(static_cast<index_t>(i));
  }
  return idx;
}

/// L at one lambda: its value, its top set (ascending) and the subgradient's count over that set.
struct dual_point {
  double value = std::numeric_limits<double>::infinity();
  std::vector<index_t> top;
  std::vector<std::int32_t> count;
};

/// Evaluates L (`operator()`): one pass over the pairs for b, which also counts the columns of
/// the point's previous top set, the top-S selection, and the count corrected by the columns
/// that joined or left the top set. Holds the evaluations' memory.
///
/// The pass skips the columns that cannot reach the top set (safe screening), where the pairs
/// read each column apart (`reads_columns`: the kNN graph, held dense similarities). As
/// max(0, w - lambda') <= max(0, w - lambda) + max(0, lambda - lambda'), b_s has grown since its
/// last computation by at most the decreases of lambda over its column since then: at most its
/// length times the largest decrease of each evaluation (summed over the evaluations), and at
/// most the sum of all decreases. A column not counted whose last b plus that growth lies below
/// the floor (the previous evaluation's value of rank 5 S / 4; with a margin for rounding)
/// keeps its last b, which lies below the floor too, so the selection, which looks above the
/// floor, never takes it. When the S-th largest b lies below the floor after all, the skipped
/// columns are computed and the selection runs again. Either way the top set, its count and L
/// are those of a full pass, bit for bit.
template <class Pairs>
class dual_evaluator {
 public:
  dual_evaluator(const Pairs& pairs, std::span<const double> linear, index_t size)
      : pairs_(pairs),
        linear_(linear),
        size_(size),
        b_(static_cast<std::size_t>(pairs.size())),
        computed_at_(static_cast<std::size_t>(pairs.size()), -1),
        largest_at_(static_cast<std::size_t>(pairs.size()), 0.0),
        total_at_(static_cast<std::size_t>(pairs.size()), 0.0) {}

  void operator()(std::span<const double> lambda, dual_point& at) {
    ++evaluation_;
    record_decrease(lambda);
    const bool by_column = pairs_.reads_columns();
    const double floor = by_column ? floor_ : -std::numeric_limits<double>::infinity();
    const double selection_floor = floor_;
    // the columns counted in the pass: the previous top set, which the new one mostly repeats
    const std::span<const index_t> counted =
        by_column ? std::span<const index_t>(at.top) : std::span<const index_t>{};
    counts_.begin(pairs_.size(), counted);
    pairs_.column_excess(lambda, b_, counts_, [&](index_t s) {
      return (counts_.counted(s) || !below(s, floor)) && restart(s);
    });
    skipped_ = std::count_if(computed_at_.begin(), computed_at_.end(),
                             [&](std::int64_t e) { return e != evaluation_; });
    std::vector<index_t> top = top_rows(b_, size_, scratch_, floor_);
    double cut = std::numeric_limits<double>::infinity();
    for (index_t s : top) cut = std::min(cut, b_[static_cast<std::size_t>(s)]);
    recomputed_ = skipped_ > 0 && cut < floor;
    if (recomputed_) {  // the floor was too high: the skipped columns after all, then select again
      pairs_.column_excess(lambda, b_, counts_, [&](index_t s) {
        return computed_at_[static_cast<std::size_t>(s)] != evaluation_ && restart(s);
      });
      floor_ = selection_floor;
      top = top_rows(b_, size_, scratch_, floor_);
    }
    at.count = counts_.take();
    changed_.clear();
    std::set_difference(top.begin(), top.end(), counted.begin(), counted.end(),
                        std::back_inserter(changed_));
    pairs_.covered(lambda, changed_, 1, at.count);  // joined
    changed_.clear();
    std::set_difference(counted.begin(), counted.end(), top.begin(), top.end(),
                        std::back_inserter(changed_));
    pairs_.covered(lambda, changed_, -1, at.count);  // left
    at.top = std::move(top);
    at.value = 0.0;
    for (double l : lambda) at.value += l;
    for (index_t s : at.top) at.value += b_[static_cast<std::size_t>(s)];
  }

  /// The columns the last evaluation's pass skipped, and whether it computed them after all.
  [[nodiscard]] std::ptrdiff_t skipped() const { return skipped_; }
  [[nodiscard]] bool recomputed() const { return recomputed_; }

 private:
  /// Adds the decreases of lambda since the last evaluation to the running sums of the largest
  /// decrease and of all of them.
  void record_decrease(std::span<const double> lambda) {
    if (last_lambda_.empty()) {
      last_lambda_.assign(lambda.begin(), lambda.end());
      return;
    }
    double largest = 0.0;
    double total = 0.0;
    for (std::size_t v = 0; v < lambda.size(); ++v) {
      const double d = std::max(0.0, last_lambda_[v] - lambda[v]);
      largest = std::max(largest, d);
      total += d;
      last_lambda_[v] = lambda[v];
    }
    largest_ += largest;
    total_ += total;
  }
  /// Column s's b lies below `floor` now, by its bound from its last computation. The margin
  /// covers the rounding of b (1e-9 relative) and of the running sums' differences (each sum
  /// has at most one term per evaluation).
  [[nodiscard]] bool below(index_t s, double floor) const {
    const auto at = static_cast<std::size_t>(s);
    if (computed_at_[at] < 0) return false;  // never computed
    const double length = static_cast<double>(pairs_.column_length(s));
    const double growth = std::min(length * (largest_ - largest_at_[at]), total_ - total_at_[at]);
    const double sums = std::max(length * largest_, total_) * static_cast<double>(evaluation_ + 1) *
                        4.0 * std::numeric_limits<double>::epsilon();
    const double margin = 1e-9 * (std::abs(b_[at]) + growth + std::abs(floor)) + sums;
    return b_[at] + growth + margin < floor;
  }
  /// Column s is computed in this evaluation: b_s starts from its linear part. Returns true.
  bool restart(index_t s) {
    const auto at = static_cast<std::size_t>(s);
    b_[at] = linear_.empty() ? 0.0 : linear_[at];
    computed_at_[at] = evaluation_;
    largest_at_[at] = largest_;
    total_at_[at] = total_;
    return true;
  }

  const Pairs& pairs_;
  std::span<const double> linear_;
  index_t size_;
  std::vector<double> b_;                  ///< each column's b at its last computation
  std::vector<std::int64_t> computed_at_;  ///< the evaluation of that computation (-1: none)
  std::vector<double> largest_at_;         ///< `largest_` then
  std::vector<double> total_at_;           ///< `total_` then
  std::vector<double> scratch_;
  double floor_ = -std::numeric_limits<double>::infinity();
  column_counts counts_;
  std::vector<index_t> changed_;
  std::vector<double> last_lambda_;  ///< the lambda of the last evaluation
  std::int64_t evaluation_ = 0;
  double largest_ = 0.0;  ///< the running sum of each evaluation's largest decrease of lambda
  double total_ = 0.0;    ///< the running sum of all decreases of lambda
  std::ptrdiff_t skipped_ = 0;
  bool recomputed_ = false;
};

/// Refuses what `minimise` cannot bound: S outside [1, n], a selection of another size or with
/// rows outside the block, a modular part that is not finite.
inline void check_minimise_inputs(index_t n, std::span<const double> linear, index_t size,
                                  std::span<const index_t> selection) {
  DATAMASK_EXPECTS(size >= 1 && size <= n, "size", "must be in [1, ", n, "] (the block's items), found ",
                   size);
  DATAMASK_EXPECTS(static_cast<index_t>(selection.size()) == size, "selection", "has ",
                   selection.size(), " rows, expected the bound's size ", size);
  for (index_t s : selection) {
    DATAMASK_EXPECTS(s >= 0 && s < n, "selection", "row ", s, " is outside the block's ", n,
                     " items");
  }
  for (double a : linear) {
    DATAMASK_EXPECTS(std::isfinite(a), "linear", "the modular part must be finite, found ", a);
  }
}

/// The start at the selection U's assignment: lambda_v = max(0, best w_vs over U); returns the
/// Polyak target f(U) = a(U) + sum_v best w_vs.
template <class Pairs>
double start_at_selection(const Pairs& pairs, std::span<const double> linear,
                          std::span<const index_t> selection, std::vector<double>& lambda) {
  double target = 0.0;
  for (index_t s : selection) target += linear.empty() ? 0.0 : linear[static_cast<std::size_t>(s)];
  pairs.best(selection, lambda);
  for (double& l : lambda) {
    target += l;
    l = std::max(0.0, l);
  }
  return target;
}

/// The step's direction into `dir`: the subgradient 1 - #{s in the top set : w_vs > lambda_v},
/// projected on lambda >= floor, deflected by the previous direction (none when `previous` is
/// empty); returns its squared norm.
inline double deflected_direction(std::span<const std::int32_t> count, std::span<const double> lambda,
                                  std::span<const double> floor, std::span<const double> previous,
                                  std::vector<double>& dir) {
  double norm2 = 0.0;
  for (std::size_t v = 0; v < dir.size(); ++v) {
    double g = 1.0 - static_cast<double>(count[v]);
    if (lambda[v] <= floor[v] && g > 0.0) g = 0.0;
    dir[v] = previous.empty() ? g : g + deflection * previous[v];
    norm2 += dir[v] * dir[v];
  }
  return norm2;
}

/// The variable-target Polyak method from the selection's assignment (see the file comment), on
/// lambda >= 0, or on lambda >= the floors of pairs that hold only the pairs above them (the dense
/// form: `dense_pairs::hold`); returns the best L seen and its lambda.
template <class Pairs>
bound_certificate minimise(Pairs& pairs, std::span<const double> linear, index_t size,
                           std::span<const index_t> selection, index_t steps) {
  const index_t n = pairs.size();
  check_minimise_inputs(n, linear, size, selection);
  if (steps <= 0) steps = default_steps;
  std::vector<double> lambda(static_cast<std::size_t>(n), 0.0);
  const double target = start_at_selection(pairs, linear, selection, lambda);
  std::vector<double> floor(static_cast<std::size_t>(n), 0.0);
  if constexpr (requires { pairs.hold(lambda); }) {
    pairs.hold(lambda);
    floor.assign(pairs.floors().begin(), pairs.floors().end());
  }
  bound_certificate out;
  out.method = "lagrangian-dual";
  dual_evaluator<Pairs> evaluate(pairs, linear, size);
  dual_point at;    // L at lambda
  dual_point best;  // L at the best lambda
  std::vector<double> best_lambda = lambda;
  std::vector<double> previous;
  std::vector<double> dir(lambda.size());
  double delta = 0.0;
  bool has_delta = false;
  bool restarted = false;
  int stall = 0;
  for (index_t t = 0; t < steps; ++t) {
    if (restarted) {
      at = best;  // lambda is the best lambda: its evaluation is known
      restarted = false;
    } else {
      evaluate(lambda, at);
      ++out.evaluations;
    }
    if (at.value < out.bound) {
      out.bound = at.value;
      best_lambda = lambda;
      best = at;
      stall = 0;
    } else {
      ++stall;
    }
    if (!has_delta) {
      delta = out.bound - target;
      has_delta = true;
    }
    if (stall >= patience) {  // no progress: a lower level, restarted at the best lambda
      delta /= 2.0;
      stall = 0;
      previous.clear();
      lambda = best_lambda;
      restarted = !best.top.empty();  // no best evaluation yet (L was never finite): evaluate
      continue;
    }
    const double level = std::max(target, out.bound - delta);
    const double norm2 = deflected_direction(at.count, lambda, floor, previous, dir);
    previous = dir;
    if (norm2 == 0.0 || at.value <= level) break;  // optimal (0 is a subgradient), or the level is met
    const double step = (at.value - level) / norm2;
    for (std::size_t v = 0; v < dir.size(); ++v)
      lambda[v] = std::max(floor[v], lambda[v] - step * dir[v]);
  }
  out.certificate = std::move(best_lambda);
  return out;
}

/// Checks a certificate's domain: n finite values >= 0.
inline void check_lambda(std::span<const double> lambda, index_t n) {
  DATAMASK_EXPECTS(static_cast<index_t>(lambda.size()) == n, "certificate", "has ", lambda.size(),
                   " values, expected one multiplier per reference item (", n, ")");
  for (double l : lambda) {
    DATAMASK_EXPECTS(std::isfinite(l) && l >= 0.0, "certificate",
                     "a multiplier must be finite and >= 0, found ", l);
  }
}

/// L(lambda) from the data alone, for `check_bound`: b_s summed over every reference item (dense:
/// from products of the rows as given, in double; kNN: row by row, the reference items' order),
/// then the S largest.
inline double bound_of(std::span<const double> lambda, std::vector<double> b, index_t size) {
  double value = 0.0;
  for (double l : lambda) value += l;
  const auto k = static_cast<std::ptrdiff_t>(size);
  std::nth_element(b.begin(), b.begin() + (k - 1), b.end(), std::greater<>());
  for (std::ptrdiff_t i = 0; i < k; ++i) value += b[static_cast<std::size_t>(i)];
  return value;
}

template <class T>
double check_dense(const bound_view<T>& v, similarity_kernel kernel, double gamma,
                   std::span<const double> lambda) {
  using rmat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const index_t n = v.embeddings.rows;
  const index_t d = v.embeddings.cols;
  check_lambda(lambda, n);
  DATAMASK_EXPECTS(v.weight >= 0.0 && std::isfinite(v.weight), "weight",
                   "must be finite and >= 0, found ", v.weight);
  const double c = v.weight / static_cast<double>(n);
  const bool unit = unit_rows(kernel);
  // The rows as they are, in double: the norms enter after the products (the method's pairs
  // scale the rows first), so the check rounds its own way.
  rmat x(n, d);
  for (index_t i = 0; i < n; ++i) {
    for (index_t j = 0; j < d; ++j) x(i, j) = static_cast<double>(v.embeddings(i, j));
  }
  std::vector<double> b(static_cast<std::size_t>(n));
  detail::parallel_for(
      (n + dense_block - 1) / dense_block, v.threads,
      [&](index_t bi) {
        const index_t s0 = bi * dense_block;
        const index_t ns = std::min(dense_block, n - s0);
        const rmat dots = x.middleRows(s0, ns) * x.transpose();
        for (index_t a = 0; a < ns; ++a) {
          const index_t s = s0 + a;
          double acc = v.linear.empty() ? 0.0 : v.linear[static_cast<std::size_t>(s)];
          for (index_t r = 0; r < n; ++r) {
            const double dot = unit ? dots(a, r) * (v.inv_norms[r] * v.inv_norms[s]) : dots(a, r);
            const double w =
                c * kernel_similarity(kernel, gamma, dot, v.sq_norms[r], v.sq_norms[s]);
            acc += std::max(0.0, w - lambda[static_cast<std::size_t>(r)]);
          }
          b[static_cast<std::size_t>(s)] = acc;
        }
      },
      2.0 * static_cast<double>(dense_block) * static_cast<double>(n) * static_cast<double>(d));
  return bound_of(lambda, std::move(b), v.size);
}

template <class T>
double check_knn(const bound_view<T>& v, const knn_graph& g, std::span<const double> lambda) {
  check_lambda(lambda, g.n);
  DATAMASK_EXPECTS(v.weight >= 0.0 && std::isfinite(v.weight), "weight",
                   "must be finite and >= 0, found ", v.weight);
  const double c = v.weight / static_cast<double>(g.n);
  std::vector<double> b(static_cast<std::size_t>(g.n), 0.0);
  if (!v.linear.empty()) std::copy(v.linear.begin(), v.linear.end(), b.begin());
  for (index_t r = 0; r < g.n; ++r) {  // row by row: the reference items' order, not the items'
    for (index_t k = 0; k < g.k; ++k) {
      const double w =
          g.similarity(r, k) > 0.0f ? c * static_cast<double>(g.similarity(r, k)) : 0.0;
      b[static_cast<std::size_t>(g.neighbor(r, k))] +=
          std::max(0.0, w - lambda[static_cast<std::size_t>(r)]);
    }
  }
  return bound_of(lambda, std::move(b), v.size);
}

}  // namespace datamask::detail::facility_dual
