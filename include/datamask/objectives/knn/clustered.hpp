// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The clustered (inverted-file style) kNN graph builder, and an estimate of a graph's
/// recall against the exact graph (knn/graph.hpp).
///
/// The exact builder compares every pair: n^2 products and comparisons, hours at n = 10^6. The
/// clustered builder compares each item only with the items of a few clusters:
/// 1. C centroids: C rows of a seeded sample (the library's counter-based generator, so the
///    same rows on any thread count), refined by `kmeans_iterations` rounds of k-means on that
///    sample (64 C rows at most): assign, then average (below).
/// 2. Every item goes to its most similar centroid, ties to the smaller centroid.
/// 3. Each cluster is compared with its P most similar clusters (itself first): one matrix
///    product (Eigen GEMM) per pair of member tiles, and the exact builder's running top-K
///    (`detail::knn::offer_products`: the same similarities, order and ties). When the P
///    clusters hold fewer than K items, the next most similar clusters are added. A pair of
///    clusters is compared once, and its products serve both: when a probes b, b's items also
///    get a's as candidates (so a cluster meets every cluster that probes it too, for the
///    price of the products it probes itself).
/// With P = C every item meets every item and the graph is the exact graph: bit for bit in the
/// tests (small d). At large d (a few hundred) the similarities can differ from the exact
/// builder's in the last bits, and near-ties then order differently: Eigen may split a long
/// product by the shapes of the tiles, which differ between the builders. The item itself is
/// in its own cluster, so under cosine, cosine2 and rbf it stays its own first neighbour.
///
/// "Similar" follows the kernel: cosine and dot rank centroids by the product with a unit
/// centroid (spherical k-means, the mean direction); cosine2 by its absolute value (an
/// anti-aligned item is as similar as an aligned one, so a centroid averages its members with
/// the sign of their product); rbf by distance (Lloyd's k-means, the mean). Clusters are
/// compared by the same rule applied to their centroids.
///
/// Why our own builder and not faiss or hnswlib: the graph is bit-identical across thread
/// counts and runs (every split of the work is fixed by the data and the settings, never by the
/// threads, and the kept neighbours do not depend on the order candidates come in), and it adds
/// no dependency.
///
/// Cost: 2 n d C per assignment of all n items, plus at most 2 n d P n / C for the products and
/// 2 P n^2 / C comparisons (balanced clusters; each pair of clusters once, both ways); C =
/// sqrt(n) by default, so O(P n^1.5 d). Memory: the graph, every item's running top-K while the
/// graph is built (n K pairs of 16 bytes), the n cluster numbers and members, C x C centroid
/// products, and per thread one tile of gathered rows and its products: never a copy of the
/// embeddings.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "datamask/objectives/knn/exact.hpp"
#include "datamask/core/philox.hpp"

namespace datamask {

/// @brief The default C: round(sqrt(n)), at least 1.
[[nodiscard]] inline index_t default_clusters(index_t n) {
  return std::clamp<index_t>(static_cast<index_t>(std::llround(std::sqrt(static_cast<double>(n)))), 1,
                             std::max<index_t>(n, 1));
}

/// @brief The default P (at most C): where more probes stop buying much of the exact graph's gain
/// for their time, and the 10^6-item block's build (products P n^1.5 d) stays below twice
/// P = 8's (benchmarks/facility_knn.cpp; RESULTS.md, "Clustered graph settings: recall against
/// build time").
[[nodiscard]] inline index_t default_probes(index_t clusters) { return std::min<index_t>(clusters, 16); }

/// @brief Rows on which block_select.hpp estimates a clustered graph's recall (`knn_recall`):
/// 2 x 200 n d multiply-adds, a few seconds at n = 10^6, d = 256.
inline constexpr index_t knn_recall_rows = 200;

namespace detail::knn {

inline constexpr std::uint32_t stream_centroids = 0x6B6E6E63u;  // "knnc"
inline constexpr std::uint32_t stream_recall = 0x6B6E6E72u;     // "knnr"
/// Products of rows against all C centroids (assignment) or clusters against all C clusters
/// (probe lists) hold at most this many entries (16 MiB of floats), whatever C the user asks.
inline constexpr index_t product_entries = index_t{1} << 22;

/// Rows per product when items are assigned to centroids: 1,024, fewer when C is large; fixed
/// by C alone, so the products (and their rounding) do not depend on `tile` or threads.
inline index_t assign_tile(index_t centroids) {
  return std::clamp<index_t>(product_entries / std::max<index_t>(centroids, 1), 16, 1024);
}
/// Sampled rows per centroid for the k-means refinement.
inline constexpr index_t rows_per_centroid = 64;

/// How close a row (or centroid) is to a centroid, from their product and squared norms (see the
/// file comment): larger is closer.
inline double affinity(similarity_kernel k, double dot, double sq_a, double sq_b) {
  switch (k) {
    case similarity_kernel::cosine2: return std::abs(dot);
    case similarity_kernel::rbf: return dot - 0.5 * (sq_a + sq_b);  // -||a - b||^2 / 2
    default: return dot;
  }
}

/// `count` distinct rows of [0, n): those with the smallest uniform draws under (seed, stream),
/// in the order of their draws.
[[nodiscard]] inline std::vector<index_t> sample_rows(index_t n, index_t count, std::uint64_t seed,
                                                      std::uint32_t stream) {
  const rng::philox_key key = rng::block_key(seed, stream);
  std::vector<std::pair<double, index_t>> u(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) u[static_cast<std::size_t>(i)] = {rng::uniform01(key, static_cast<std::uint64_t>(i), 0, stream), i};
  const auto cut = u.begin() + count;
  std::nth_element(u.begin(), cut, u.end());
  std::sort(u.begin(), cut);
  std::vector<index_t> out(static_cast<std::size_t>(count));
  for (index_t i = 0; i < count; ++i) out[static_cast<std::size_t>(i)] = u[static_cast<std::size_t>(i)].second;
  return out;
}

/// Items grouped by cluster: cluster c's members are member[start[c] .. start[c + 1]), in the
/// order the items were listed.
struct clusters_of {
  std::vector<index_t> start;
  std::vector<index_t> member;
  clusters_of(std::span<const index_t> items, std::span<const index_t> cluster, index_t count)
      : start(static_cast<std::size_t>(count + 1), 0), member(items.size()) {
    for (index_t c : cluster) ++start[static_cast<std::size_t>(c + 1)];
    for (index_t c = 0; c < count; ++c) start[static_cast<std::size_t>(c + 1)] += start[static_cast<std::size_t>(c)];
    std::vector<index_t> fill(start.begin(), start.end() - 1);
    for (std::size_t i = 0; i < items.size(); ++i) member[static_cast<std::size_t>(fill[static_cast<std::size_t>(cluster[i])]++)] = items[i];
  }
  [[nodiscard]] std::span<const index_t> of(index_t c) const {
    return std::span<const index_t>(member).subspan(static_cast<std::size_t>(start[static_cast<std::size_t>(c)]),
                                                    static_cast<std::size_t>(start[static_cast<std::size_t>(c + 1)] - start[static_cast<std::size_t>(c)]));
  }
  [[nodiscard]] index_t size(index_t c) const { return static_cast<index_t>(of(c).size()); }
};

/// C centroids in the type the embeddings are computed in (`product_matrix`), and their squared
/// norms.
template <class T>
struct centroids {
  product_matrix<T> c;
  std::vector<double> sq;
  void norms() {
    sq.assign(static_cast<std::size_t>(c.rows()), 0.0);
    for (index_t a = 0; a < static_cast<index_t>(c.rows()); ++a) {
      for (index_t j = 0; j < static_cast<index_t>(c.cols()); ++j) sq[a] += static_cast<double>(c(a, j)) * c(a, j);
    }
  }
};

/// The most similar centroid of each of `items` (ties to the smaller centroid); `watch` polled per tile.
template <class T>
[[nodiscard]] std::vector<index_t> assign(matrix_view<const T> x, std::span<const double> inv_norms,
                                          std::span<const index_t> items, const centroids<T>& cs,
                                          const knn_settings& s, build_watch& watch) {
  const auto count = static_cast<index_t>(items.size());
  const auto k = static_cast<index_t>(cs.c.rows());
  std::vector<index_t> out(items.size());
  const index_t tile = assign_tile(k);
  const index_t tiles = (count + tile - 1) / tile;
  parallel_for(tiles, s.threads, [&](index_t t) {
    watch.poll();
    const index_t r0 = t * tile;
    const index_t rows = std::min(tile, count - r0);
    const auto a = gather(x, inv_norms, unit_rows(s.kernel), rows, [&](index_t q) { return items[r0 + q]; });
    const product_matrix<T> dots = a * cs.c.transpose();
    for (index_t q = 0; q < rows; ++q) {
      index_t best = 0;
      double top = affinity(s.kernel, static_cast<double>(dots(q, 0)), 0.0, cs.sq[0]);
      for (index_t c = 1; c < k; ++c) {
        const double v = affinity(s.kernel, static_cast<double>(dots(q, c)), 0.0, cs.sq[c]);
        if (v > top) {
          top = v;
          best = c;
        }
      }
      out[static_cast<std::size_t>(r0 + q)] = best;
    }
  }, 2.0 * static_cast<double>(tile) * static_cast<double>(k) * static_cast<double>(x.cols));
  return out;
}

/// One k-means update: each centroid becomes its members' mean (rbf) or their mean direction
/// (the other kernels; under cosine2 each member signed by its product with the old centroid).
/// An empty cluster, or one whose members cancel out, keeps its centroid. Sums run in double,
/// over the members in their listed order: the same on any thread count.
template <class T>
void update(centroids<T>& cs, matrix_view<const T> x, std::span<const double> inv_norms, const clusters_of& groups,
            const knn_settings& s) {
  const index_t d = x.cols;
  const bool unit = unit_rows(s.kernel);
  parallel_for(static_cast<index_t>(cs.c.rows()), s.threads, [&](index_t c) {
    const std::span<const index_t> mine = groups.of(c);
    if (mine.empty()) return;
    std::vector<double> sum(static_cast<std::size_t>(d), 0.0);
    for (index_t i : mine) {
      const double scale = unit ? inv_norms[i] : 1.0;
      double sign = 1.0;
      if (s.kernel == similarity_kernel::cosine2) {
        double dot = 0.0;
        for (index_t j = 0; j < d; ++j) dot += static_cast<double>(x(i, j)) * cs.c(c, j);
        sign = dot < 0.0 ? -1.0 : 1.0;
      }
      for (index_t j = 0; j < d; ++j) sum[j] += sign * scale * static_cast<double>(x(i, j));
    }
    double norm = 0.0;
    for (double v : sum) norm += v * v;
    norm = std::sqrt(norm);
    if (s.kernel != similarity_kernel::rbf && !(norm > 0.0)) return;
    const double div = s.kernel == similarity_kernel::rbf ? static_cast<double>(mine.size()) : norm;
    for (index_t j = 0; j < d; ++j) cs.c(c, j) = static_cast<widened_t<T>>(sum[j] / div);
  }, static_cast<double>(x.rows) / static_cast<double>(std::max<index_t>(cs.c.rows(), 1)) * static_cast<double>(d));
  cs.norms();
}

/// The C centroids: C seeded rows (unit rows but under rbf), refined on a seeded sample.
template <class T>
[[nodiscard]] centroids<T> train(matrix_view<const T> x, std::span<const double> inv_norms, index_t count,
                                 const knn_settings& s, build_watch& watch) {
  const index_t n = x.rows;
  std::vector<index_t> sample = sample_rows(n, std::min(n, count * rows_per_centroid), s.seed, stream_centroids);
  centroids<T> cs;
  cs.c = gather(x, inv_norms, s.kernel != similarity_kernel::rbf, count, [&](index_t a) { return sample[a]; });
  cs.norms();
  std::sort(sample.begin(), sample.end());
  for (index_t it = 0; it < s.kmeans_iterations; ++it) {
    const std::vector<index_t> cluster = assign(x, inv_norms, sample, cs, s, watch);
    update(cs, x, inv_norms, clusters_of(sample, cluster, count), s);
  }
  return cs;
}

/// Each cluster's probe list: itself, then the other clusters by similarity of centroids
/// (ties to the smaller cluster), P in all, and more while they hold fewer than K items. The
/// centroid products come a block of clusters at a time (`product_entries`), and only the head
/// of each ranking is sorted.
template <class T>
[[nodiscard]] std::vector<std::vector<index_t>> probe_lists(const centroids<T>& cs, const clusters_of& groups,
                                                            index_t probes, index_t k, const knn_settings& s) {
  const auto count = static_cast<index_t>(cs.c.rows());
  const index_t block = std::clamp<index_t>(product_entries / count, 1, count);
  std::vector<std::vector<index_t>> lists(static_cast<std::size_t>(count));
  parallel_for((count + block - 1) / block, s.threads, [&](index_t t) {
    const index_t a0 = t * block;
    const index_t rows = std::min(block, count - a0);
    const product_matrix<T> dots = cs.c.middleRows(a0, rows) * cs.c.transpose();
    std::vector<std::pair<double, index_t>> others;
    for (index_t q = 0; q < rows; ++q) {
      const index_t a = a0 + q;
      others.clear();
      for (index_t b = 0; b < count; ++b) {
        if (b != a) others.emplace_back(affinity(s.kernel, static_cast<double>(dots(q, b)), cs.sq[a], cs.sq[b]), b);
      }
      // The first P + 16 in order (a total order: the same head as a full sort); the rest only
      // when those clusters hold fewer than K items.
      const auto head = std::min<std::size_t>(others.size(), static_cast<std::size_t>(probes) + 16);
      std::partial_sort(others.begin(), others.begin() + static_cast<std::ptrdiff_t>(head), others.end(), better{});
      std::vector<index_t>& list = lists[static_cast<std::size_t>(a)];
      list.push_back(a);
      index_t held = groups.size(a);
      for (std::size_t i = 0; i < others.size(); ++i) {
        if (static_cast<index_t>(list.size()) >= probes && held >= k) break;
        if (i == head) std::sort(others.begin() + static_cast<std::ptrdiff_t>(head), others.end(), better{});
        list.push_back(others[i].second);
        held += groups.size(others[i].second);
      }
    }
  }, static_cast<double>(block) * static_cast<double>(count) * (static_cast<double>(cs.c.cols()) + 20.0));
  return lists;
}

/// The clustered builder's settings against n rows. @throws invalid_input naming the setting.
inline void check_clustered(const knn_settings& s, index_t n) {
  DATAMASK_EXPECTS(s.neighbors >= 1 && s.neighbors <= n, "neighbors", "must be in [1, n = ", n, "], found ",
                   s.neighbors);
  DATAMASK_EXPECTS(s.tile >= 1, "tile", "must be positive, found ", s.tile);
  DATAMASK_EXPECTS(s.clusters >= 0 && s.clusters <= n, "knn-clusters",
                   "must be in [0, n = ", n, "] (0: about sqrt(n)), found ", s.clusters);
  DATAMASK_EXPECTS(s.probes >= 0, "knn-probes", "must be >= 0 (0: the default), found ", s.probes);
  DATAMASK_EXPECTS(s.kmeans_iterations >= 0, "kmeans-iterations", "must be >= 0, found ", s.kmeans_iterations);
}

/// Each pair of clusters where either probes the other (`probe_lists`), once: its products
/// serve both sides. partners[a]: the clusters b > a paired with a, increasing.
inline std::vector<std::vector<index_t>> partners(const std::vector<std::vector<index_t>>& lists) {
  const auto count = static_cast<index_t>(lists.size());
  std::vector<std::vector<index_t>> out(lists.size());
  for (index_t a = 0; a < count; ++a) {
    for (index_t b : lists[static_cast<std::size_t>(a)]) {
      if (b != a) out[static_cast<std::size_t>(std::min(a, b))].push_back(std::max(a, b));
    }
  }
  for (auto& p : out) {
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
  }
  return out;
}

/// The positions (in `groups.member`) whose rows cluster a's rows meet: its own rows, then its
/// partners' members, in one list.
inline std::vector<index_t> positions_met(const clusters_of& groups, std::span<const index_t> partners, index_t a) {
  std::vector<index_t> out;
  const auto add = [&](index_t c) {
    for (index_t q = 0; q < groups.size(c); ++q) out.push_back(groups.start[static_cast<std::size_t>(c)] + q);
  };
  add(a);
  for (index_t b : partners) add(b);
  return out;
}

}  // namespace detail::knn

/// @brief The clustered (approximate) kNN graph of the rows of `x` under `s.kernel` (see the file
/// comment); the exact graph when P = C. Same arguments as the exact `build_knn_graph`; `hooks`
/// count a cluster's rows once its own products are done.
/// @throws invalid_input when K is not in [1, n], the tile is not positive, C is not in
///         [0, n] (0: `default_clusters`), P or the k-means iterations are negative;
///         run_stopped when `hooks.stop` said so
template <class T>
[[nodiscard]] knn_graph build_clustered_knn_graph(matrix_view<const T> x, std::span<const double> inv_norms,
                                                  std::span<const double> sq_norms, const knn_settings& s,
                                                  const knn_build_hooks& hooks) {
  namespace dk = detail::knn;
  const index_t n = x.rows;
  dk::check_clustered(s, n);
  const index_t count = s.clusters > 0 ? s.clusters : default_clusters(n);
  const index_t probes = std::min(count, s.probes > 0 ? s.probes : default_probes(count));
  dk::build_watch watch(hooks, n);
  const dk::centroids<T> cs = dk::train(x, inv_norms, count, s, watch);
  std::vector<index_t> all(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
  const std::vector<index_t> cluster_of = dk::assign(x, inv_norms, all, cs, s, watch);
  const dk::clusters_of groups(all, cluster_of, count);
  all = {};
  const std::vector<std::vector<index_t>> lists = dk::probe_lists(cs, groups, probes, s.neighbors, s);
  knn_graph g = dk::empty_graph(n, s.neighbors);
  const bool unit = unit_rows(s.kernel);
  const std::vector<std::vector<index_t>> partners = dk::partners(lists);
  // The running top-K of every item, by its position in `groups.member` (a cluster's rows are
  // then contiguous), each cluster's lists behind its own lock: a pair's products are offered
  // to both clusters' rows, from whichever thread holds the pair. The kept neighbours do not
  // depend on the order of the offers (`better` is a total order): the same graph on any
  // thread count.
  std::vector<dk::top_k> top = dk::tops(n, g.k);
  std::vector<std::mutex> locks(static_cast<std::size_t>(count));
  const auto id = [&](index_t at) { return groups.member[static_cast<std::size_t>(at)]; };
  const auto lists_at = [&](index_t at, index_t len) {
    return std::span<dk::top_k>(top).subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(len));
  };
  const double per_cluster = static_cast<double>(n) / static_cast<double>(count) * static_cast<double>(probes) *
                             static_cast<double>(n) / static_cast<double>(count) * static_cast<double>(x.cols);
  detail::parallel_for(count, s.threads, [&](index_t a) {
    const index_t first = groups.start[static_cast<std::size_t>(a)];
    const index_t rows = groups.size(a);
    if (rows == 0) return;
    const auto row = [&](index_t q) { return id(first + q); };
    const auto lhs = dk::gather(x, inv_norms, unit, rows, row);
    // The positions this cluster's rows meet, taken `tile` at a time: each gathered tile meets
    // every tile of this cluster's rows, so products stay large when clusters are small.
    const std::vector<index_t> theirs = dk::positions_met(groups, partners[static_cast<std::size_t>(a)], a);
    dk::product_matrix<T> dots;
    dk::product_matrix<T> back;
    for (index_t c0 = 0; c0 < static_cast<index_t>(theirs.size()); c0 += s.tile) {
      watch.poll();
      const index_t cols = std::min(s.tile, static_cast<index_t>(theirs.size()) - c0);
      const auto at = [&](index_t q) { return theirs[static_cast<std::size_t>(c0 + q)]; };
      const auto col = [&](index_t q) { return id(at(q)); };
      const auto rhs = dk::gather(x, inv_norms, unit, cols, col);
      for (index_t r0 = 0; r0 < rows; r0 += s.tile) {
        const index_t part = std::min(s.tile, rows - r0);
        dots.noalias() = lhs.middleRows(r0, part) * rhs.transpose();
        {
          const std::lock_guard<std::mutex> hold(locks[static_cast<std::size_t>(a)]);
          dk::offer_products(dots, lists_at(first + r0, part), [&](index_t q) { return row(r0 + q); }, col, s, sq_norms);
        }
        // The other side: a partner's rows get this cluster's rows as candidates, a run of
        // one cluster's rows at a time (its own rows met each other above).
        back.noalias() = dots.transpose();
        for (index_t q = std::max<index_t>(0, rows - c0); q < cols;) {
          const index_t b = cluster_of[static_cast<std::size_t>(col(q))];
          index_t end = q + 1;
          while (end < cols && cluster_of[static_cast<std::size_t>(col(end))] == b) ++end;
          const std::lock_guard<std::mutex> hold(locks[static_cast<std::size_t>(b)]);
          dk::offer_products(back.middleRows(q, end - q), lists_at(at(q), end - q),
                             [&](index_t j) { return col(q + j); }, [&](index_t j) { return row(r0 + j); }, s,
                             sq_norms);
          q = end;
        }
      }
    }
    watch.rows_done(rows);
  }, per_cluster);
  watch.finish();
  dk::write_rows(g, std::span<dk::top_k>(top), id);
  g.source = detail::concat("clustered, kernel ", enum_name(s.kernel), ", K = ", g.k, ", C = ", count, ", P = ",
                            probes);
  return g;
}

/// @brief An estimate of g's recall@K: over `rows` items sampled under `seed` (the same items
/// for any graph of the block), the share of the exact K nearest neighbours (as the exact
/// builder orders them) that g lists. Cost 2 rows n d for the products, plus rows n comparisons.
/// @param s the kernel, gamma, tile and threads g was built with (K is g's)
/// @throws invalid_input when g is not a graph of x's rows or `rows` is not in [1, n]
template <class T>
[[nodiscard]] double knn_recall(matrix_view<const T> x, std::span<const double> inv_norms,
                                std::span<const double> sq_norms, const knn_graph& g, const knn_settings& s,
                                index_t rows, std::uint64_t seed = 0) {
  namespace dk = detail::knn;
  const index_t n = x.rows;
  DATAMASK_EXPECTS(g.n == n && g.k >= 1 && g.k <= n && static_cast<index_t>(g.ids.size()) == n * g.k, "graph",
                   "is not a kNN graph of these ", n, " rows");
  DATAMASK_EXPECTS(rows >= 1 && rows <= n, "recall rows", "must be in [1, n = ", n, "], found ", rows);
  DATAMASK_EXPECTS(s.tile >= 1, "tile", "must be positive, found ", s.tile);
  std::vector<index_t> sample = dk::sample_rows(n, rows, seed, dk::stream_recall);
  std::sort(sample.begin(), sample.end());
  const auto row = [&](index_t a) { return sample[static_cast<std::size_t>(a)]; };
  const bool unit = unit_rows(s.kernel);
  const auto lhs = dk::gather(x, inv_norms, unit, rows, row);
  // Column tiles in a fixed number of groups, each with its own lists, merged at the end: the
  // same lists on any thread count.
  const index_t tile = std::min(s.tile, n);
  const index_t tiles = (n + tile - 1) / tile;
  const index_t groups = std::min<index_t>(tiles, 8);
  std::vector<std::vector<dk::top_k>> part(static_cast<std::size_t>(groups));
  detail::parallel_for(groups, s.threads, [&](index_t grp) {
    std::vector<dk::top_k> top = dk::tops(rows, g.k);
    dk::product_matrix<T> dots;
    for (index_t t = grp; t < tiles; t += groups) {
      const index_t c0 = t * tile;
      const index_t cols = std::min(tile, n - c0);
      const auto col = [c0](index_t b) { return c0 + b; };
      dots.noalias() = lhs * dk::gather(x, inv_norms, unit, cols, col).transpose();
      dk::offer_products(dots, top, row, col, s, sq_norms);
    }
    part[static_cast<std::size_t>(grp)] = std::move(top);
  }, 2.0 * static_cast<double>(rows) * static_cast<double>(n) / static_cast<double>(groups) *
         static_cast<double>(x.cols));
  std::vector<dk::top_k> exact = dk::tops(rows, g.k);
  for (const auto& top : part) {
    for (index_t a = 0; a < rows; ++a) {
      for (const auto& [sim, j] : top[static_cast<std::size_t>(a)].heap) exact[static_cast<std::size_t>(a)].offer(sim, j);
    }
  }
  std::vector<char> listed(static_cast<std::size_t>(n), 0);
  std::int64_t hits = 0;
  for (index_t a = 0; a < rows; ++a) {
    const index_t v = row(a);
    for (index_t r = 0; r < g.k; ++r) listed[static_cast<std::size_t>(g.neighbor(v, r))] = 1;
    for (const auto& kept : exact[static_cast<std::size_t>(a)].heap) hits += listed[static_cast<std::size_t>(kept.second)];
    for (index_t r = 0; r < g.k; ++r) listed[static_cast<std::size_t>(g.neighbor(v, r))] = 0;
  }
  return static_cast<double>(hits) / (static_cast<double>(rows) * static_cast<double>(g.k));
}

/// @brief `knn_recall` for a problem's rows (norms as the learners compute them).
template <class T>
[[nodiscard]] double knn_recall(const problem<T>& p, const knn_graph& g, const knn_settings& s, index_t rows,
                                bool normalized = false, std::uint64_t seed = 0) {
  const detail::prepared data = detail::knn::row_norms(p, normalized, s.threads);
  return knn_recall(p.embeddings, std::span<const double>(data.inv_norms), std::span<const double>(data.sq_norms), g,
                    s, rows, seed);
}

}  // namespace datamask
