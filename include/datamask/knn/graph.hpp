// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The k-nearest-neighbour graph of a block, the input of sparse facility location
/// (objectives/sparse_facility.hpp): for every item v, the K items j with the largest sim(v, j)
/// under one of facility location's kernels, with those similarities.
///
/// Conventions (the same whether the graph is built here or loaded from files):
/// - The item itself is a candidate like any other: under the cosine, cosine2 and rbf kernels it
///   is its own nearest neighbour (sim 1), so a graph of K neighbours holds v and K - 1 others,
///   and K = n holds every item: sparse facility location then equals dense facility location.
/// - Each row is sorted by similarity descending, ties to the smaller id: the order is total, so
///   the exact graph is unique and does not depend on tiles or threads.
///
/// The exact builder runs tiles of rows against tiles of columns, one matrix product (Eigen
/// GEMM) per pair of tiles and a running top-K per row: its buffers are tile x tile and n x K,
/// never n x n. Cost 2 n^2 d for the products plus n^2 comparisons. The clustered builder
/// (knn/clustered.hpp) compares each item with a few clusters only, through the same products
/// and running top-K (`detail::knn` below); `build_knn_graph(problem, ...)` runs the builder
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
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "datamask/detail/parallel.hpp"
#include "datamask/enum_names.hpp"
#include "datamask/detail/prepare.hpp"
#include "datamask/error.hpp"
#include "datamask/io/npy.hpp"
#include "datamask/objectives/facility.hpp"
#include "datamask/options.hpp"

namespace datamask {

/// @brief K neighbours and their similarities per item (n x K, row-major), rows sorted by
/// similarity descending, ties to the smaller id, the item itself included (see the file
/// comment).
struct knn_graph {
  index_t n = 0;                ///< items (rows of the block)
  index_t k = 0;                ///< neighbours per item
  std::vector<index_t> ids;     ///< n x k neighbour rows
  std::vector<float> sims;      ///< n x k similarities
  std::string source;           ///< how the graph was made (reported by the program)

  [[nodiscard]] index_t neighbor(index_t v, index_t r) const { return ids[static_cast<std::size_t>(v * k + r)]; }
  [[nodiscard]] float similarity(index_t v, index_t r) const { return sims[static_cast<std::size_t>(v * k + r)]; }
  /// @brief Bytes held by the two arrays.
  [[nodiscard]] std::size_t bytes() const { return ids.size() * sizeof(index_t) + sims.size() * sizeof(float); }
};

/// @brief How a kNN graph is built: exactly (every pair), by clusters (knn/clustered.hpp: each
/// cluster of items against its P most similar clusters; approximate, recall below 1), or
/// `automatic`: exact up to `knn_exact_up_to` items, clustered above.
enum class knn_build { exact, clustered, automatic };

template <>
struct enum_traits<knn_build> {
  static constexpr std::array<enum_choice<knn_build>, 3> choices{
      {{"exact", knn_build::exact}, {"clustered", knn_build::clustered}, {"auto", knn_build::automatic}}};
};

/// @brief Blocks of up to this many items get the exact graph under `knn_build::automatic`.
/// Measured (benchmarks/RESULTS.md, "Clustered graph settings: recall against build time"), d = 64,
/// K = 32, CPU seconds: the exact build takes 1.5 at n = 20,000, 7.6 at 50,000 and 29 at 10^5
/// (n^2 growth), the clustered one at P = 16 0.6, 1.6 and 4.3 (recall 0.63, 0.56, 0.52). Up to
/// 50,000 the exact graph costs seconds (about the learner's time) and loses nothing; above,
/// its n^2 cost grows past the clustered graph's loss (6.4% of the learner's gain at 10^5).
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

/// (similarity, row) ordered best first: larger similarity, then the smaller row.
struct better {
  bool operator()(const std::pair<double, index_t>& a, const std::pair<double, index_t>& b) const {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  }
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

/// Row-major products, rows x columns, in the embeddings' type.
template <class T>
using product_matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Whether the products run on unit rows (the cosine kernels) or on the rows as given.
inline bool unit_rows(similarity_kernel k) { return k == similarity_kernel::cosine || k == similarity_kernel::cosine2; }

/// Rows id(0), ..., id(count - 1) of x as the products see them: unit rows rounded to T for the
/// cosine kernels (as facility location rounds them), the rows as given otherwise.
template <class T, class Id>
[[nodiscard]] product_matrix<T> gather(matrix_view<const T> x, std::span<const double> inv_norms, bool unit,
                                       index_t count, Id id) {
  product_matrix<T> out(count, x.cols);
  for (index_t a = 0; a < count; ++a) {
    const index_t i = id(a);
    for (index_t j = 0; j < x.cols; ++j) {
      out(a, j) = unit ? static_cast<T>(static_cast<double>(x(i, j)) * inv_norms[i]) : x(i, j);
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
        const double sim = facility_impl::similarity(K, gamma, static_cast<double>(dots(a, b)), sq_v, sq_j);
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
///        computes, dot products over rows rounded to T)
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
  const bool unit = detail::knn::unit_rows(s.kernel);
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

template <class T>
[[nodiscard]] knn_graph build_clustered_knn_graph(matrix_view<const T> x, std::span<const double> inv_norms,
                                                  std::span<const double> sq_norms, const knn_settings& s,
                                                  const knn_build_hooks& hooks = {});

/// @brief Whether `s.build` gives a block of n items the exact graph.
[[nodiscard]] inline bool builds_exact(const knn_settings& s, index_t n) {
  return s.build == knn_build::exact || (s.build == knn_build::automatic && n <= knn_exact_up_to);
}

/// @brief The kNN graph of a problem's embeddings (norms as the learners compute them), by the
/// builder `s.build` names (exact by default).
/// @throws invalid_input for bad embeddings or settings; run_stopped when `hooks.stop` said so
template <class T>
[[nodiscard]] knn_graph build_knn_graph(const problem<T>& p, const knn_settings& s, bool normalized = false,
                                        const knn_build_hooks& hooks = {}) {
  const detail::prepared data = detail::knn::row_norms(p, normalized, s.threads);
  const std::span<const double> inv(data.inv_norms);
  const std::span<const double> sq(data.sq_norms);
  return builds_exact(s, p.embeddings.rows) ? build_knn_graph(p.embeddings, inv, sq, s, hooks)
                                            : build_clustered_knn_graph(p.embeddings, inv, sq, s, hooks);
}

/// @brief The two files a graph is read from: PREFIX.ids.npy (integer, n x K neighbour rows)
/// and PREFIX.sims.npy (float, n x K similarities).
[[nodiscard]] inline std::pair<std::string, std::string> knn_graph_files(const std::string& prefix) {
  return {prefix + ".ids.npy", prefix + ".sims.npy"};
}

/// @brief Checks the shapes of a graph's two arrays for a block of n items: each 2-D with n rows
/// and K >= 1 columns, the same K. The names name the arrays in errors (files' paths, or
/// arguments). Returns K.
/// @throws invalid_input naming the array and what is wrong
inline index_t check_knn_shapes(const std::string& ids_name, std::span<const std::int64_t> ids_shape,
                                const std::string& sims_name, std::span<const std::int64_t> sims_shape, index_t n) {
  for (const auto& [name, shape] : {std::pair{&ids_name, ids_shape}, std::pair{&sims_name, sims_shape}}) {
    DATAMASK_EXPECTS(shape.size() == 2, *name, "expected a 2-D array (n x K), found ", shape.size(), " dimension",
                     shape.size() == 1 ? "" : "s");
    DATAMASK_EXPECTS(shape[0] == n, *name, "has ", shape[0], " rows, expected ", n, " (one per item of the block)");
    DATAMASK_EXPECTS(shape[1] >= 1, *name, "has 0 columns; expected K >= 1 neighbours per item");
  }
  DATAMASK_EXPECTS(sims_shape[1] == ids_shape[1], sims_name, "has shape ", sims_shape[0], " x ", sims_shape[1],
                   ", but ", ids_name, " has ", ids_shape[0], " x ", ids_shape[1], "; the two must match");
  return static_cast<index_t>(ids_shape[1]);
}

/// @brief A graph from the rows a pipeline made (n x K neighbour ids and similarities,
/// row-major, their shapes checked by `check_knn_shapes`): checks the values and sorts each row by
/// similarity descending, ties to the smaller id. Rows should list the item itself (see the file
/// comment); nothing requires it. `ids_name` and `sims_name` name the two arrays in errors.
/// @throws invalid_input naming the array and the entry: an id outside [0, n) or repeated in a
/// row, a non-finite similarity or one beyond the float range
[[nodiscard]] inline knn_graph make_knn_graph(std::span<const std::int64_t> ids, std::span<const double> sims,
                                              index_t n, index_t k, const std::string& ids_name,
                                              const std::string& sims_name, std::string source) {
  const auto entries = static_cast<std::size_t>(n) * static_cast<std::size_t>(k);
  if (ids.size() != entries || sims.size() != entries) {
    throw std::logic_error("make_knn_graph: the arrays do not hold n x K entries");  // shapes are checked first
  }
  knn_graph g;
  g.n = n;
  g.k = k;
  g.ids.resize(entries);
  g.sims.resize(entries);
  std::vector<std::pair<double, index_t>> row(static_cast<std::size_t>(k));
  std::vector<char> listed(static_cast<std::size_t>(n), 0);  // the ids of the current row: O(K) per row
  for (index_t v = 0; v < n; ++v) {
    for (index_t r = 0; r < k; ++r) {
      const auto at = static_cast<std::size_t>(v * k + r);
      DATAMASK_EXPECTS(ids[at] >= 0 && ids[at] < n, ids_name, "row ", v, ", column ", r, " holds id ", ids[at],
                       ", outside [0, ", n, ")");
      DATAMASK_EXPECTS(std::isfinite(sims[at]), sims_name, "row ", v, ", column ", r, " is ",
                       std::isnan(sims[at]) ? "NaN" : "infinite", "; every similarity must be finite");
      DATAMASK_EXPECTS(std::isfinite(static_cast<float>(sims[at])), sims_name, "row ", v, ", column ", r, " is ",
                       sims[at], ", beyond the float range the graph stores");
      row[static_cast<std::size_t>(r)] = {static_cast<double>(static_cast<float>(sims[at])),
                                          static_cast<index_t>(ids[at])};
    }
    std::sort(row.begin(), row.end(), detail::knn::better{});
    for (index_t r = 0; r < k; ++r) {
      const auto at = static_cast<std::size_t>(v * k + r);
      g.ids[at] = row[static_cast<std::size_t>(r)].second;
      g.sims[at] = static_cast<float>(row[static_cast<std::size_t>(r)].first);
      char& seen = listed[static_cast<std::size_t>(g.ids[at])];
      DATAMASK_EXPECTS(!seen, ids_name, "row ", v, " lists id ", g.ids[at], " twice; neighbours must be distinct");
      seen = 1;
    }
    for (index_t r = 0; r < k; ++r) listed[static_cast<std::size_t>(g.ids[static_cast<std::size_t>(v * k + r)])] = 0;
  }
  g.source = std::move(source);
  return g;
}

/// @brief Reads a graph a pipeline wrote (see `knn_graph_files`) for a block of n items, checks
/// it and sorts its rows (`make_knn_graph`).
/// @throws invalid_input naming the file and the problem: not a .npy file, a wrong dtype, not
/// 2-D, rows other than n, shapes that differ, an id outside [0, n) or repeated in a row, a
/// non-finite similarity or one beyond the float range
[[nodiscard]] inline knn_graph load_knn_graph(const std::string& prefix, index_t n) {
  const auto [ids_path, sims_path] = knn_graph_files(prefix);
  const io::npy_file fi(ids_path);
  const io::npy_file fs(sims_path);
  const index_t k = check_knn_shapes(fi.path(), fi.header().shape, fs.path(), fs.header().shape, n);
  const std::vector<std::int64_t> ids = fi.read_int64();
  const std::vector<double> sims = fs.read_doubles();
  return make_knn_graph(ids, sims, n, k, fi.path(), fs.path(),
                        detail::concat("loaded from ", ids_path, " and ", sims_path, ", K = ", k));
}

}  // namespace datamask

#include "datamask/knn/clustered.hpp"  // the clustered builder build_knn_graph(problem, ...) can run
