// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The exact kNN graph builder, its settings and progress hooks, and the tiled products and
/// running top-K lists it shares with the clustered builder (knn/clustered.hpp).
///
/// The exact builder runs tiles of rows against tiles of columns, one matrix product (Eigen
/// GEMM) per pair of tiles and a running top-K per row: its buffers are tile x tile and n x K,
/// never n x n. Cost 2 n^2 d for the products plus n^2 comparisons. The clustered builder
/// compares each item with a few clusters only, through the same products and running top-K
/// (`detail::knn` below); `build_knn_graph(problem, ...)` (knn/build.hpp) runs the builder
/// `knn_settings::build` names.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "datamask/core/half.hpp"
#include "datamask/core/detail/parallel.hpp"
#include "datamask/core/detail/prepare.hpp"
#include "datamask/core/enum_names.hpp"
#include "datamask/core/error.hpp"
#include "datamask/core/kernels.hpp"
#include "datamask/objectives/knn/graph.hpp"
#include "datamask/core/options.hpp"

namespace datamask {

/// @brief How a kNN graph is built: exactly (every pair), by clusters (knn/clustered.hpp: each
/// cluster of items against its P most similar clusters; approximate, recall below 1), or
/// `automatic`: exact up to `knn_exact_up_to` items, clustered above.
enum class knn_build { exact, clustered, automatic };

template <>
struct enum_traits<knn_build> {
  static constexpr std::array<enum_choice<knn_build>, 3> choices{
      {{"exact", knn_build::exact}, {"clustered", knn_build::clustered}, {"auto", knn_build::automatic}}};
};

/// @brief Blocks of up to this many items get the exact graph under `knn_build::automatic`: up to
/// here the exact build (n^2) costs about the learner's time and loses nothing; above, its cost
/// grows past what the clustered graph loses (benchmarks/RESULTS.md, "Clustered graph settings:
/// recall against build time").
inline constexpr index_t knn_exact_up_to = 50000;

/// @brief Settings of the builders.
struct knn_settings {
  index_t neighbors = 16;  ///< K, in [1, n]
  similarity_kernel kernel = similarity_kernel::cosine;
  double gamma = 1.0;      ///< rbf bandwidth
  index_t tile = 512;      ///< rows (and columns) per matrix product
  int threads = 0;         ///< 0: all
  knn_build build = knn_build::exact;  ///< which builder `build_knn_graph(problem, ...)` runs
  index_t clusters = 0;    ///< clustered: C centroids, in [1, n] (0: about sqrt(n), `default_clusters`)
  index_t probes = 0;      ///< clustered: P clusters per cluster, its own included (0: `default_probes`)
  index_t kmeans_iterations = 5;  ///< clustered: refinements of the centroids
  std::uint64_t seed = 0;  ///< clustered: which rows seed the centroids
};

/// @brief What a graph's build reports and polls, between tiles. A build of minutes (the exact
/// graph of 300,000 rows) must stop when the user asks and show that it is working.
/// Both are called on the thread that started the build only (a front end's hooks need not be
/// thread-safe), at most about every 0.1 s: a build shorter than that calls neither.
struct knn_build_hooks {
  /// The rows compared so far, of the block's n; once more with (n, n) at the end when called before.
  std::function<void(index_t done, index_t total)> on_rows;
  /// Returning true stops the build: it throws `run_stopped` (no graph).
  std::function<bool()> stop;
};

namespace detail::knn {

/// One build's side of `knn_build_hooks`: every thread adds the rows it finished and polls
/// between tiles; the thread that started the build calls the hooks, and the others see its
/// stop at their next poll (parallel_for rethrows the first `run_stopped` once every item has
/// returned, each at its next poll).
class build_watch {
 public:
  build_watch(const knn_build_hooks& h, index_t total) : hooks_(h), total_(total) {}
  /// Adds rows compared, then polls.
  void rows_done(index_t rows) {
    done_ += rows;
    poll();
  }
  /// Reports and asks the stop hook when due (on the starting thread); throws `run_stopped` once stopped.
  void poll() {
    if (!stopped_ && std::this_thread::get_id() == caller_ && std::chrono::steady_clock::now() - last_ >= interval) {
      reported_ = true;
      if (hooks_.on_rows) hooks_.on_rows(done_.load(), total_);
      if (hooks_.stop && hooks_.stop()) stopped_ = true;
      last_ = std::chrono::steady_clock::now();  // after the hooks: their own time is not the build's
    }
    if (stopped_) throw run_stopped();
  }
  /// The last report, (n, n), when there were earlier ones.
  void finish() const {
    if (reported_ && hooks_.on_rows) hooks_.on_rows(total_, total_);
  }

 private:
  static constexpr std::chrono::milliseconds interval{100};
  const knn_build_hooks& hooks_;
  index_t total_;
  std::atomic<index_t> done_{0};
  std::atomic<bool> stopped_{false};
  bool reported_ = false;
  std::thread::id caller_ = std::this_thread::get_id();
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

/// Keeps the K best of the candidates offered, as a heap whose front is the worst kept.
struct top_k {
  std::vector<std::pair<double, index_t>> heap;
  index_t k = 0;
  void offer(double s, index_t j) {
    const std::pair<double, index_t> c{s, j};
    if (static_cast<index_t>(heap.size()) < k) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), better{});
    } else if (better{}(c, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better{});
      heap.back() = c;
      std::push_heap(heap.begin(), heap.end(), better{});
    }
  }
  [[nodiscard]] bool full() const { return static_cast<index_t>(heap.size()) == k; }
  /// Best first.
  void sorted() { std::sort_heap(heap.begin(), heap.end(), better{}); }
};

/// Row-major products, rows x columns, in the type the embeddings are computed in (float for a
/// 16-bit block: `widened_t`).
template <class T>
using product_matrix = Eigen::Matrix<widened_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Rows id(0), ..., id(count - 1) of x as the products see them: unit rows rounded to T (float
/// for a 16-bit block) for the cosine kernels (as facility location rounds them), the rows as
/// given otherwise.
template <class T, class Id>
[[nodiscard]] product_matrix<T> gather(matrix_view<const T> x, std::span<const double> inv_norms, bool unit,
                                       index_t count, Id id) {
  using W = widened_t<T>;
  product_matrix<T> out(count, x.cols);
  for (index_t a = 0; a < count; ++a) {
    const index_t i = id(a);
    for (index_t j = 0; j < x.cols; ++j) {
      out(a, j) = unit ? static_cast<W>(static_cast<double>(x(i, j)) * inv_norms[i]) : static_cast<W>(x(i, j));
    }
  }
  return out;
}

/// `rows` empty running top-K lists.
[[nodiscard]] inline std::vector<top_k> tops(index_t rows, index_t k) {
  std::vector<top_k> top(static_cast<std::size_t>(rows));
  for (auto& t : top) {
    t.k = k;
    t.heap.reserve(static_cast<std::size_t>(k));
  }
  return top;
}

/// Candidates per chunk that `chunk_below` may skip at once.
inline constexpr index_t offer_chunk = 32;

/// Whether every product of a chunk gives a similarity below `floor` (so none can enter a full
/// top-K list), from the chunk's largest product (its largest absolute value under cosine2):
/// one vectorised pass instead of one comparison per candidate. Exact, never a guess: the
/// similarity is the product (cosine, dot) or its square (cosine2), and rounding to double is
/// monotone. Under rbf the similarity depends on each candidate's norm: never skipped.
template <similarity_kernel K, class Chunk>
bool chunk_below(const Chunk& dots, double floor) {
  if constexpr (K == similarity_kernel::cosine || K == similarity_kernel::dot) {
    return static_cast<double>(dots.maxCoeff()) < floor;
  } else if constexpr (K == similarity_kernel::cosine2) {
    const auto m = static_cast<double>(dots.cwiseAbs().maxCoeff());
    return m * m < floor;
  } else {
    return false;
  }
}

/// `offer_products` for one kernel known at compile time: the similarity's switch folds away,
/// and the squared norms are read only where the kernel uses them (rbf), which keeps the
/// scattered reads out of the loop that sees every candidate.
template <similarity_kernel K, class M, class Row, class Col>
void offer_products_as(const M& dots, std::span<top_k> top, Row row, Col col, double gamma,
                       std::span<const double> sq_norms) {
  for (index_t a = 0; a < static_cast<index_t>(dots.rows()); ++a) {
    const index_t v = row(a);
    const double sq_v = K == similarity_kernel::rbf ? sq_norms[v] : 0.0;
    top_k& t = top[static_cast<std::size_t>(a)];
    // Below the K-th best kept, a candidate cannot enter (at equality a smaller row still can):
    // most candidates stop at this one comparison.
    double floor = t.full() ? t.heap.front().first : -std::numeric_limits<double>::infinity();
    const auto cols = static_cast<index_t>(dots.cols());
    for (index_t b0 = 0; b0 < cols; b0 += offer_chunk) {
      const index_t len = std::min(offer_chunk, cols - b0);
      if (chunk_below<K>(dots.row(a).segment(b0, len), floor)) continue;
      for (index_t b = b0; b < b0 + len; ++b) {
        const double sq_j = K == similarity_kernel::rbf ? sq_norms[col(b)] : 0.0;
        const double sim = kernel_similarity(K, gamma, static_cast<double>(dots(a, b)), sq_v, sq_j);
        if (sim < floor) continue;
        t.offer(sim, col(b));
        if (t.full()) floor = t.heap.front().first;
      }
    }
  }
}

/// Offers the candidates of one product tile: dots(a, b) is the product of item row(a) with
/// candidate col(b); top[a] keeps row(a)'s best. The kept set does not depend on the order in
/// which tiles come (`better` is a total order), so neither on tiles nor threads.
template <class M, class Row, class Col, class Settings>
void offer_products(const M& dots, std::span<top_k> top, Row row, Col col, const Settings& s,
                    std::span<const double> sq_norms) {
  switch (s.kernel) {
    case similarity_kernel::cosine: return offer_products_as<similarity_kernel::cosine>(dots, top, row, col, s.gamma, sq_norms);
    case similarity_kernel::cosine2: return offer_products_as<similarity_kernel::cosine2>(dots, top, row, col, s.gamma, sq_norms);
    case similarity_kernel::dot: return offer_products_as<similarity_kernel::dot>(dots, top, row, col, s.gamma, sq_norms);
    case similarity_kernel::rbf: return offer_products_as<similarity_kernel::rbf>(dots, top, row, col, s.gamma, sq_norms);
  }
}

/// A graph of n rows of k neighbours, not yet filled.
[[nodiscard]] inline knn_graph empty_graph(index_t n, index_t k) {
  knn_graph g;
  g.n = n;
  g.k = k;
  g.ids.resize(static_cast<std::size_t>(n * k));
  g.sims.resize(static_cast<std::size_t>(n * k));
  return g;
}

/// The norms `objective_function` computes for a problem's rows.
template <class T>
[[nodiscard]] prepared row_norms(const problem<T>& p, bool normalized, int threads) {
  problem<T> rows_only;
  rows_only.embeddings = p.embeddings;
  return prepare(rows_only, normalized, threads);
}

/// Writes the full lists top[a] as row(a) of g, best first.
template <class Row>
void write_rows(knn_graph& g, std::span<top_k> top, Row row) {
  for (index_t a = 0; a < static_cast<index_t>(top.size()); ++a) {
    top_k& t = top[static_cast<std::size_t>(a)];
    t.sorted();
    for (index_t r = 0; r < g.k; ++r) {
      const auto at = static_cast<std::size_t>(row(a) * g.k + r);
      g.ids[at] = t.heap[static_cast<std::size_t>(r)].second;
      g.sims[at] = static_cast<float>(t.heap[static_cast<std::size_t>(r)].first);
    }
  }
}

}  // namespace detail::knn

/// @brief The exact kNN graph of the rows of `x` under `s.kernel`.
/// @param inv_norms, sq_norms 1 / ||e_i|| (0 for a zero row) and ||e_i||^2, n each (as
///        `objective_function` computes them: the similarities are then those facility location
///        computes, dot products over rows rounded to T, or to float for a 16-bit block: the
///        builder multiplies a float copy of the rows, as for a float32 block)
/// @param hooks progress and stop, polled between tiles
/// @throws invalid_input when K is not in [1, n] or the tile is not positive; run_stopped when
///         `hooks.stop` said so
template <class T>
[[nodiscard]] knn_graph build_knn_graph(matrix_view<const T> x, std::span<const double> inv_norms,
                                        std::span<const double> sq_norms, const knn_settings& s,
                                        const knn_build_hooks& hooks = {}) {
  const index_t n = x.rows;
  DATAMASK_EXPECTS(s.neighbors >= 1 && s.neighbors <= n, "neighbors", "must be in [1, n = ", n, "], found ",
                   s.neighbors);
  DATAMASK_EXPECTS(s.tile >= 1, "tile", "must be positive, found ", s.tile);
  const bool unit = unit_rows(s.kernel);
  const auto xs = detail::knn::gather(x, inv_norms, unit, n, [](index_t i) { return i; });
  knn_graph g = detail::knn::empty_graph(n, s.neighbors);
  const index_t tile = std::min(s.tile, n);
  const index_t tiles = (n + tile - 1) / tile;
  detail::knn::build_watch watch(hooks, n);
  detail::parallel_for(tiles, s.threads, [&](index_t rt) {
    const index_t r0 = rt * tile;
    const index_t rows = std::min(tile, n - r0);
    std::vector<detail::knn::top_k> top = detail::knn::tops(rows, g.k);
    detail::knn::product_matrix<T> dots;
    for (index_t c0 = 0; c0 < n; c0 += tile) {
      watch.poll();
      const index_t cols = std::min(tile, n - c0);
      dots.noalias() = xs.middleRows(r0, rows) * xs.middleRows(c0, cols).transpose();
      detail::knn::offer_products(dots, top, [r0](index_t a) { return r0 + a; }, [c0](index_t b) { return c0 + b; },
                                  s, sq_norms);
    }
    detail::knn::write_rows(g, top, [r0](index_t a) { return r0 + a; });
    watch.rows_done(rows);
  }, 2.0 * static_cast<double>(tile) * static_cast<double>(n) * static_cast<double>(x.cols));
  watch.finish();
  g.source = detail::concat("exact, kernel ", enum_name(s.kernel), ", K = ", g.k);
  return g;
}

/// @brief Whether `s.build` gives a block of n items the exact graph.
[[nodiscard]] inline bool builds_exact(const knn_settings& s, index_t n) {
  return s.build == knn_build::exact || (s.build == knn_build::automatic && n <= knn_exact_up_to);
}

}  // namespace datamask
