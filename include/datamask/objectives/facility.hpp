// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Facility location (FL) with four similarity kernels, tiled over the reference set, with
/// everything the backends and the greedy baselines need from it: host evaluation, the greedy
/// state (`incremental_objective`), the device evaluator (`device_evaluable`) and an upper bound
/// on the optimum (`boundable_objective`).

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

#include <Eigen/Core>

#include "datamask/core/concepts.hpp"
#include "datamask/core/config.hpp"
#include "datamask/core/detail/parallel.hpp"
#include "datamask/core/enum_names.hpp"
#include "datamask/core/half.hpp"
#include "datamask/core/kernels.hpp"
#include "datamask/objectives/detail/device_passes.hpp"
#include "datamask/objectives/detail/facility_dual.hpp"
#include "datamask/objectives/detail/facility_mean.hpp"
#include "datamask/core/error.hpp"

namespace datamask {

namespace detail::facility_impl {

/// Columns per call of `fixed_dots`, and reference rows per register block.
inline constexpr index_t dot_width = 32;
inline constexpr index_t dot_rows = 4;

/// The `nc` <= dot_width rows col(c) (each d values) packed as a d x dot_width matrix, the
/// missing columns zero: the right-hand side of `fixed_dots`.
template <class T, class Col>
std::vector<T> pack_columns(index_t nc, index_t d, Col&& col) {
  std::vector<T> xct(static_cast<std::size_t>(d * dot_width), T(0));
  for (index_t c = 0; c < nc; ++c) {
    const T* r = col(c);
    for (index_t j = 0; j < d; ++j) xct[j * dot_width + c] = r[j];
  }
  return xct;
}

/// The dot products of `nr` rows (row_of(v): d values) with the dot_width packed columns `xct`
/// (`pack_columns`): row(v, dots) for each v in order, dots[c] the product with column c. Each
/// dot product is summed in T over the d columns in order, whatever the block around it, so a
/// pair's value is the same bits in every product that holds it: the greedy state's gains, one
/// subset's value and a batch of rollouts scored from shared products (facility_location) agree
/// bit for bit. (A library GEMM's order depends on the matrix shapes.)
template <class T, class RowOf, class Row>
void fixed_dots(index_t nr, index_t d, RowOf&& row_of, const T* xct, Row&& row) {
  constexpr index_t width = dot_width;
  const std::vector<T> zero(static_cast<std::size_t>(d), T(0));
  alignas(64) T dots[dot_rows][width];
  for (index_t v0 = 0; v0 < nr; v0 += dot_rows) {
    const index_t t = std::min(dot_rows, nr - v0);
    const T* a[dot_rows];
    for (index_t r = 0; r < dot_rows; ++r) a[r] = r < t ? row_of(v0 + r) : zero.data();
    for (index_t r = 0; r < dot_rows; ++r)
      for (index_t c = 0; c < width; ++c) dots[r][c] = T(0);
    for (index_t j = 0; j < d; ++j) {
      const T* b = xct + j * width;
      const T a0 = a[0][j], a1 = a[1][j], a2 = a[2][j], a3 = a[3][j];
      for (index_t c = 0; c < width; ++c) {
        dots[0][c] += a0 * b[c];
        dots[1][c] += a1 * b[c];
        dots[2][c] += a2 * b[c];
        dots[3][c] += a3 * b[c];
      }
    }
    for (index_t r = 0; r < t; ++r) row(v0 + r, &dots[r][0]);
  }
}

/// The greedy state over the whole block: best[v] = max_{j in S} sim(v, j), and the gain of i
/// is (1 / n) sum_v max(0, sim(v, i) - best[v]) (sum_v sim(v, i) / n for the first pick).
/// Gains of a chunk of candidates are one tiled product against the block with that sum as
/// epilogue. When the n x n dot products fit `cache_bytes`, they are computed once, by the same
/// kernel, and every later gain reads them (O(n) per candidate instead of O(n d): naive greedy
/// re-scores every candidate in every round); beyond the budget nothing of size n x n is held.
/// The cached dot products are the kernel's own, so gains are the same bits either way.
/// Submodular once S is non-empty (f(empty) = 0 can lie below a singleton under the cosine and
/// dot kernels), which is what `diminishing_gains` promises.
///
/// A 16-bit block is computed in float (`widened_t`): its unit rows (cosine kernels) or a float
/// copy of its rows (the others) are what the products run on, the float block's values. Under
/// the dot and rbf kernels that copy is held beside the block (a float32 block needs none), so
/// the state then holds 1.5x a float32 block's bytes. Widening rows where the products read them
/// would hold no copy, but converts every reference row once per chunk of candidates: tried, the
/// greedy was markedly slower, for a copy that is small beside the time of the n^2 d products.
template <class T>
struct state {
  using W = widened_t<T>;
  using rmat = Eigen::Matrix<W, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  static constexpr bool diminishing_gains = true;

  similarity_kernel kernel;
  double gamma;
  matrix_view<const W> x;  // what the dot products run on (unit rows for the cosine kernels)
  std::vector<W> unit;     // n x d unit rows (cosine kernels), or a 16-bit block's rows widened
  std::span<const double> sq;
  std::vector<double> best;
  index_t k = 0;
  int threads = 0;
  std::vector<W> cache;  // n x n dot products (row v, column c), when they fit the budget

  state(similarity_kernel kern, double gam, const greedy_block<T>& b, std::size_t cache_bytes = 0)
      : kernel(kern), gamma(gam), sq(b.sq_norms), best(static_cast<std::size_t>(b.embeddings.rows), 0.0),
        threads(b.threads) {
    const matrix_view<const T> raw = b.embeddings;
    const index_t n = raw.rows;
    const index_t d = raw.cols;
    const bool cosine = kernel == similarity_kernel::cosine || kernel == similarity_kernel::cosine2;
    if (cosine || half_precision<T>) {
      unit.resize(static_cast<std::size_t>(n * d));
      detail::parallel_for((n + 1023) / 1024, threads, [&](index_t blk) {
        for (index_t i = blk * 1024; i < std::min(n, (blk + 1) * 1024); ++i) {
          for (index_t j = 0; j < d; ++j) {
            unit[i * d + j] = cosine ? static_cast<W>(static_cast<double>(raw(i, j)) * b.inv_norms[i])
                                     : static_cast<W>(raw(i, j));
          }
        }
      }, 1024.0 * static_cast<double>(d));
      x = matrix_view<const W>(unit.data(), n, d, d);
    } else if constexpr (!half_precision<T>) {
      x = raw;
    }
    if (static_cast<double>(n) * static_cast<double>(n) * sizeof(W) <= static_cast<double>(cache_bytes)) fill_cache();
  }
  // `x` may point into `unit`: a move keeps the buffer (and so `x` valid), a copy would not.
  state(state&&) noexcept = default;
  state(const state&) = delete;
  state& operator=(const state&) = delete;
  state& operator=(state&&) = delete;

  [[nodiscard]] double sim(double dot, index_t v, index_t c) const {
    return kernel_similarity(kernel, gamma, dot, sq[v], sq[c]);
  }

  [[nodiscard]] auto block(index_t r0, index_t rows) const {
    using map = Eigen::Map<const rmat, 0, Eigen::OuterStride<>>;
    return map(x.row(r0), rows, x.cols, Eigen::OuterStride<>(x.stride));
  }

  /// Candidates per kernel call (`fixed_dots`): a candidate's gain is bit-identical whatever
  /// chunk it is scored in, so naive and lazy greedy break exact ties (frequent in facility
  /// location: two items that cover each other) the same way.
  static constexpr index_t width = dot_width;
  /// Candidates per pass over the cached rows (`cached_gains`).
  static constexpr index_t cached_group = 8;

  /// The dot products of every reference row with `nc` <= width candidates: row(v, dots) for each
  /// v in order, dots[c] the dot product with cands[c] (`fixed_dots`).
  template <class Row>
  void chunk_dots(const index_t* cands, index_t nc, Row&& row) const {
    const std::vector<W> xct = pack_columns<W>(nc, x.cols, [&](index_t c) { return x.row(cands[c]); });
    fixed_dots<W>(x.rows, x.cols, [&](index_t v) { return x.row(v); }, xct.data(), row);
  }

  /// Every dot product, one chunk of candidates per task (the kernel `chunk_gains` runs).
  void fill_cache() {
    const index_t n = x.rows;
    cache.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(n));
    detail::parallel_for((n + width - 1) / width, threads, [&](index_t b) {
      std::array<index_t, width> cands{};
      const index_t nc = std::min(width, n - b * width);
      for (index_t c = 0; c < nc; ++c) cands[c] = b * width + c;
      chunk_dots(cands.data(), nc, [&](index_t v, const W* dots) {
        std::copy(dots, dots + nc, cache.begin() + static_cast<std::ptrdiff_t>(v * n + b * width));
      });
    }, 2.0 * static_cast<double>(width) * static_cast<double>(n) * static_cast<double>(x.cols));
  }

  /// Sum over the reference set of the gain contributions of `nc` <= width candidates, summed
  /// over v in order whichever path computes them.
  void chunk_gains(const index_t* cands, index_t nc, double* acc) const {
    std::fill(acc, acc + nc, 0.0);
    auto term = [&](index_t v, index_t c, W dot) {
      const double s = sim(static_cast<double>(dot), v, c);
      return k == 0 ? s : std::max(0.0, s - best[v]);
    };
    const index_t n = x.rows;
    if (cache.empty()) {
      chunk_dots(cands, nc, [&](index_t v, const W* dots) {
        for (index_t c = 0; c < nc; ++c) acc[c] += term(v, cands[c], dots[c]);
      });
      return;
    }
    // The cache is symmetric bit for bit (each dot product multiplies the same pairs in the same
    // order), so candidate c's dot products are the contiguous row c.
    if (k == 0) {
      for (index_t c = 0; c < nc; ++c) {
        const W* row = cache.data() + cands[c] * n;
        for (index_t v = 0; v < n; ++v) acc[c] += term(v, cands[c], row[v]);
      }
      return;
    }
    switch (kernel) {
      case similarity_kernel::cosine:
      case similarity_kernel::dot:
        return cached_gains(cands, nc, acc, [](double dot, index_t, index_t) { return dot; });
      case similarity_kernel::cosine2:
        return cached_gains(cands, nc, acc, [](double dot, index_t, index_t) { return dot * dot; });
      case similarity_kernel::rbf:
        return cached_gains(cands, nc, acc, [&](double dot, index_t v, index_t c) { return sim(dot, v, c); });
    }
  }

  /// The cached path once a pick is made: `group` candidates per pass over the reference set,
  /// each summed over v in order into its own register (the same bits as one at a time), and
  /// the kernel chosen once per call instead of per term.
  template <class Sim>
  void cached_gains(const index_t* cands, index_t nc, double* acc, Sim sim_of) const {
    constexpr index_t group = cached_group;
    const index_t n = x.rows;
    for (index_t c0 = 0; c0 < nc; c0 += group) {
      const index_t g = std::min(group, nc - c0);
      const W* rows[group];
      index_t ids[group];
      double a[group] = {};
      for (index_t c = 0; c < group; ++c) {
        ids[c] = cands[c0 + std::min(c, g - 1)];  // a short group repeats its last candidate
        rows[c] = cache.data() + ids[c] * n;
      }
      for (index_t v = 0; v < n; ++v) {
        const double b = best[v];
        for (index_t c = 0; c < group; ++c) {
          a[c] += std::max(0.0, sim_of(static_cast<double>(rows[c][v]), v, ids[c]) - b);
        }
      }
      for (index_t c = 0; c < g; ++c) acc[c0 + c] = a[c];
    }
  }

  [[nodiscard]] static constexpr index_t lazy_batch() { return width; }

  void accumulate(std::span<const index_t> cands, std::span<double> out, double w) const {
    const auto nc = static_cast<index_t>(cands.size());
    const double inv_n = 1.0 / static_cast<double>(x.rows);
    detail::parallel_for((nc + width - 1) / width, threads, [&](index_t b) {
      const index_t c0 = b * width;
      const index_t m = std::min(width, nc - c0);
      std::vector<double> acc(static_cast<std::size_t>(m));
      chunk_gains(cands.data() + c0, m, acc.data());
      for (index_t c = 0; c < m; ++c) out[c0 + c] += w * acc[c] * inv_n;
    }, 2.0 * static_cast<double>(width) * static_cast<double>(x.rows) * static_cast<double>(x.cols));
  }
  [[nodiscard]] double common() const { return 0.0; }
  void add(index_t j) {
    const index_t n = x.rows;
    const Eigen::Matrix<W, Eigen::Dynamic, 1> xj = block(j, 1).transpose();
    detail::parallel_for((n + 4095) / 4096, threads, [&](index_t b) {
      const index_t r0 = b * 4096;
      const index_t t = std::min<index_t>(4096, n - r0);
      const Eigen::Matrix<W, Eigen::Dynamic, 1> dots = block(r0, t) * xj;
      for (index_t r = 0; r < t; ++r) {
        const double s = sim(static_cast<double>(dots(r)), r0 + r, j);
        best[r0 + r] = k == 0 ? s : std::max(best[r0 + r], s);
      }
    }, 2.0 * 4096.0 * static_cast<double>(x.cols));
    ++k;
  }

};

/// Device: for reference row v of subset g, the best similarity to the subset, a running
/// maximum over the subset rows (no |V| x k buffer). The dot products are in double over rows
/// rounded to T (a 16-bit block: to float), as the host rounds its unit rows before its product.
template <class T>
struct best_of {
  using W = widened_t<T>;
  batch_view<T> b;  // k >= 1, |V| >= 1
  similarity_kernel kernel;
  double gamma;
  double* best;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const {
    const index_t nv = b.reference.size;
    const index_t g = i / nv;
    const index_t v = b.reference[i % nv];
    const index_t k = b.subsets.cols;
    const matrix_view<const T> x = b.embeddings;
    const double* inv_norms = b.inv_norms;
    const double* sq_norms = b.sq_norms;
    const index_t d = x.cols;
    const bool unit = kernel == similarity_kernel::cosine || kernel == similarity_kernel::cosine2;
    const double wv = unit ? inv_norms[v] : 1.0;
    double out = 0.0;  // max of dot (cosine, dot) or dot^2 (cosine2), min of ||r||^2 - 2 dot (rbf)
    for (index_t t = 0; t < k; ++t) {
      const index_t r = b.subsets(g, t);
      const double wr = unit ? inv_norms[r] : 1.0;
      double dot = 0.0;
      for (index_t j = 0; j < d; ++j) {
        const auto a = static_cast<double>(static_cast<W>(static_cast<double>(x(v, j)) * wv));
        const auto c = static_cast<double>(static_cast<W>(static_cast<double>(x(r, j)) * wr));
        dot += a * c;
      }
      const double val = kernel == similarity_kernel::cosine2 ? dot * dot
                         : kernel == similarity_kernel::rbf   ? sq_norms[r] - 2.0 * dot
                                                              : dot;
      if (t == 0 || (kernel == similarity_kernel::rbf ? val < out : val > out)) out = val;
    }
    if (kernel == similarity_kernel::rbf) {
      const double e = sq_norms[v] + out;
      out = ::exp(-gamma * (e > 0.0 ? e : 0.0));
    }
    best[i] = out;
  }
};

}  // namespace detail::facility_impl

/// @brief F_fl(U) = (1 / |V|) * sum_{v in V} max_{j in U} sim(e_v, e_j). Larger is more diverse
/// (better covered). V is `subset_view::reference`.
///
/// Cost 2 |V| k d per subset alone; a batch of G subsets (`evaluate_batch`) costs 2 |V| |U| d
/// for the products with the distinct rows U of all subsets plus |V| k lookups per subset. The
/// reference set is processed in tiles of `tile` rows, each tile one product (`fixed_dots`)
/// against the gathered rows, so the buffers are tile x |U| (a group of tiles, `group_bytes`):
/// never n x n. An empty subset or reference scores 0. Models `batched_diversity_objective`,
/// `batched_marginal_objective`, `incremental_objective` (a running maximum per reference item, the
/// whole block as reference set; exact for lazy greedy), `device_evaluable` (one device call
/// per (subset, reference item)), `boundable_objective` (the dual of its LP relaxation) and
/// `subset_mean_objective`.
///
/// The reference set V is the caller's. The policy-gradient learner (learner.hpp) scores rollout
/// g of a step with V = that step's active batch (m items, drawn anew each step; the rollout's
/// k = round(m S / kept) items are drawn from it), so its reward is how well M_g covers the
/// active batch, not the block; the calibration's uniform subsets use the first active batch.
/// (`settings::reference_size` draws a V of its own instead; it measured worse: RESULTS.md, "The
/// policy-gradient learner's reference set".) All G rollouts of a step share V, so the batch's
/// m x |U| <= m x m products are computed once per step, for the values and for per-item
/// credit's marginals alike. The final evaluation, the best-rollout comparison and greedy use
/// the whole block.
struct facility_location {
  static constexpr std::string_view name = "facility";

  similarity_kernel kernel = similarity_kernel::cosine;
  double gamma = 1.0;  ///< rbf bandwidth
  index_t tile = 256;  ///< reference rows per tile of the products (a subset's sum is per tile)
  /// Greedy: keep the block's n x n dot products when n^2 sizeof(T) bytes (float's for a 16-bit
  /// block) fit this budget (the default, 256 MiB, holds n up to 8,192 in float); 0: never. Same
  /// gains either way; faster re-scoring (naive greedy re-scores every candidate in every round).
  std::size_t cache_bytes = std::size_t{256} << 20;
  /// Scoring: the dot products of the reference tiles held at once (tiles x subsets' distinct
  /// rows), at least one tile. Same values whatever it is.
  std::size_t group_bytes = std::size_t{64} << 20;

  /// @brief Scores one subset against `s.reference` (a batch of one, `evaluate_batch`).
  template <class T>
  [[nodiscard]] double operator()(const subset_view<T>& s) const {
    const batch_view<T> one{s.embeddings, s.inv_norms, s.sq_norms,
                            matrix_view<const index_t>(s.subset.data, 1, s.subset.size), s.reference,
                            s.threads};
    double v = 0.0;
    evaluate_batch(one, std::span<double>(&v, 1));
    return v;
  }

  /// @brief Scores G subsets against `b.reference` (`batched_diversity_objective`), the same
  /// bits as one call per subset: the dot products of the reference rows with the distinct rows
  /// of all subsets are computed once (|V| x |U|, U the union; the active batch's m x m products
  /// during learning, where every rollout is drawn from V), and each subset is scored from them
  /// (|V| k lookups per subset instead of 2 |V| k d flops). Each dot product has the same bits in
  /// any product (`fixed_dots`), and each subset's sum runs over the same tiles in the same
  /// order, so neither G, the other subsets nor the thread count changes a value.
  template <class T>
  void evaluate_batch(const batch_view<T>& b, std::span<double> out) const {
    using W = widened_t<T>;
    const index_t g_count = b.subsets.rows;
    const index_t k = b.subsets.cols;
    const index_t nv = b.reference.size;
    std::fill(out.begin(), out.end(), 0.0);
    if (k == 0 || nv == 0 || g_count == 0) return;
    // Named members, not a structured binding: the lambdas below capture them, which clang
    // before 16 refuses for bindings.
    const auto cols_at = columns_of(b.subsets);
    const auto& cols = cols_at.first;
    const auto& at = cols_at.second;
    const auto nu = static_cast<index_t>(cols.size());
    const index_t tiles = tiles_of(nv).second;
    std::vector<double> partial(static_cast<std::size_t>(tiles * g_count), 0.0);  // per tile, per subset
    tiled_dots(b, cols, g_count, static_cast<double>(tiles_of(nv).first * k),
               [&](index_t c, index_t v0, index_t t, const W* sim, index_t g) {
                 const index_t* pos = at.data() + g * k;
                 double sum = 0.0;
                 for (index_t a = 0; a < t; ++a) {
                   const W* row = sim + a * nu;
                   sum += best(k, [&](index_t j) { return static_cast<double>(row[pos[j]]); }, b.subsets.row(g),
                               b.sq_norms, b.reference[v0 + a]);
                 }
                 partial[c * g_count + g] = sum;
               },
               [](index_t, index_t) {});
    tile_means(partial, tiles, g_count, nv, out);
  }

  /// @brief d(s) and every item's marginal d(s) - d(s without it) (`marginal_objective`): only
  /// the item that is a reference row's best loses it, and that row then falls to its
  /// second-best item, so the marginal of item t is (1 / |V|) sum over the rows whose first best
  /// is t of (best - second best) (0 on ties; the whole d(s) for a single item: the empty set
  /// scores 0). The same tiles and products as the call operator: one pass, the same value.
  static constexpr bool cheap_marginals = true;  ///< `cheap_marginal_objective`: one pass, as d(s)
  template <class T>
  double marginals(const subset_view<T>& s, std::span<double> out) const {
    const batch_view<T> one{s.embeddings, s.inv_norms, s.sq_norms, matrix_view<const index_t>(s.subset.data, 1, s.subset.size),
                            s.reference, s.threads};
    double v = 0.0;
    marginals_batch(one, std::span<double>(&v, 1), out);
    return v;
  }

  /// @brief `marginals` of G subsets (`batched_marginal_objective`), the same bits as one call
  /// per subset: scored from one product of the reference rows with the subsets' distinct rows,
  /// as `evaluate_batch`. Each item's loss is summed per tile, then over the tiles in order; the
  /// losses of a group of tiles are held at once (G k per tile), never those of every tile.
  template <class T>
  void marginals_batch(const batch_view<T>& b, std::span<double> values, std::span<double> out) const {
    using W = widened_t<T>;
    const index_t g_count = b.subsets.rows;
    const index_t k = b.subsets.cols;
    const index_t nv = b.reference.size;
    std::fill(values.begin(), values.end(), 0.0);
    std::fill(out.begin(), out.end(), 0.0);
    if (k == 0 || nv == 0 || g_count == 0) return;
    const auto cols_at = columns_of(b.subsets);  // not a binding: captured below (as above)
    const auto& cols = cols_at.first;
    const auto& at = cols_at.second;
    const auto nu = static_cast<index_t>(cols.size());
    const auto tiling = tiles_of(nv);  // not a binding: captured below (as above)
    const index_t tl = tiling.first;
    const index_t tiles = tiling.second;
    const index_t group = group_of(tl, tiles, nu, sizeof(W));
    const auto gk = static_cast<std::size_t>(g_count * k);
    std::vector<double> partial(static_cast<std::size_t>(tiles * g_count), 0.0);  // per tile, per subset
    std::vector<double> lost(static_cast<std::size_t>(group) * gk);               // per group tile, per entry
    tiled_dots(
        b, cols, g_count, static_cast<double>(tl * k),
        [&](index_t c, index_t v0, index_t t, const W* sim, index_t g) {
          const index_t* pos = at.data() + g * k;
          double* loss = lost.data() + static_cast<std::size_t>(c % group) * gk + static_cast<std::size_t>(g * k);
          std::fill(loss, loss + k, 0.0);
          double sum = 0.0;
          for (index_t a = 0; a < t; ++a) {
            const W* row = sim + a * nu;
            const auto [first, p, second] = best_two(k, [&](index_t j) { return static_cast<double>(row[pos[j]]); },
                                                     b.subsets.row(g), b.sq_norms, b.reference[v0 + a]);
            sum += first;
            loss[p] += k == 1 ? first : first - second;
          }
          partial[c * g_count + g] = sum;
        },
        [&](index_t c0, index_t gc) {  // after each group: its tiles' losses, in tile order
          detail::parallel_for(g_count, b.threads, [&](index_t g) {
            for (index_t c = c0; c < c0 + gc; ++c) {
              const double* loss = lost.data() + static_cast<std::size_t>(c % group) * gk + static_cast<std::size_t>(g * k);
              for (index_t j = 0; j < k; ++j) out[g * k + j] += loss[j];
            }
          }, static_cast<double>(gc * k));
        });
    tile_means(partial, tiles, g_count, nv, values);
    for (double& o : out) o /= static_cast<double>(nv);
  }

  /// @brief The greedy state over a block (see `incremental_objective`).
  template <class T>
  [[nodiscard]] detail::facility_impl::state<T> greedy_state(const greedy_block<T>& b) const {
    return detail::facility_impl::state<T>(kernel, gamma, b, cache_bytes);
  }

  /// @brief Scores G subsets through a backend's executor (see `device_evaluable`): the best
  /// similarity of each (subset, reference item), then the mean per subset in reference order.
  template <class Exec, class T>
  void evaluate_device(Exec& exec, const batch_view<T>& b, double* out) const {
    const index_t g_count = b.subsets.rows;
    const index_t nv = b.reference.size;
    if (detail::device_passes::zero_when(b.subsets.cols == 0 || nv == 0, exec, b, out)) return;
    double* best = exec.template scratch<double>(g_count * nv);
    exec.for_each(g_count * nv,
                  detail::facility_impl::best_of<T>{b, kernel, gamma, best});
    // The mean in reference order: (1 * sum) / |V|, as on the host.
    exec.for_each(g_count, detail::device_passes::scaled_row_sum{best, nv, 1.0, static_cast<double>(nv), out});
  }

  /// @brief The mean of F_fl over every set of `size` rows of the block, the whole block as
  /// reference set (`subset_mean_objective`; objectives/detail/facility_mean.hpp): per item, its n
  /// similarities (in double, as the bound computes them) sorted, each weighted by the chance
  /// that it is the best in the set. 2 n^2 d flops and n selections of the few hundred values
  /// that weigh (`facility_mean::leading_terms`).
  /// @throws invalid_input when `s.subset` or `s.reference` is not the whole block
  template <class T>
  [[nodiscard]] double subset_mean(const subset_view<T>& s, index_t size) const {
    const index_t n = s.embeddings.rows;
    DATAMASK_EXPECTS(s.subset.size == n && s.reference.size == n, "subset",
                     "facility location's mean over random sets is over the whole block (", n,
                     " rows), found ", s.subset.size, " candidates and ", s.reference.size, " reference rows");
    const bound_view<T> v{s.embeddings, s.inv_norms, s.sq_norms, {}, 1.0, size, {}, 0, s.threads, 0};
    return detail::facility_mean::dense(detail::facility_dual::dense_pairs<T>(v, kernel, gamma), size);
  }

  /// @brief An upper bound on max f over sets of S items for f = linear + weight * F_fl with the
  /// whole block as reference set, with its certificate lambda >= 0 (`boundable_objective`,
  /// docs/method.md 7.2): the Lagrangian dual of the LP relaxation from the selection's assignment,
  /// `v.iterations` steps (0: 100) of a variable-target Polyak method
  /// (objectives/detail/facility_dual.hpp), each lambda_v kept above a quarter of what the
  /// selection gives v. Similarities in double from the kernel's rows (an n x d copy in double):
  /// the pairs above those floors held once (12 bytes each) when they fit `v.memory_bytes`, else
  /// recomputed by blocks of matrix products in every evaluation (2 n^2 d flops). Host memory.
  template <class T>
  [[nodiscard]] bound_certificate bound(const bound_view<T>& v) const {
    DATAMASK_EXPECTS(v.weight >= 0.0 && std::isfinite(v.weight), "weight",
                     "must be finite and >= 0, found ", v.weight);
    detail::facility_dual::dense_pairs<T> pairs(v, kernel, gamma);
    return detail::facility_dual::minimise(pairs, v.linear, v.size, v.selection, v.iterations);
  }
  /// @brief L(lambda) recomputed from the data alone (every pair, from products of the rows in
  /// double); throws `invalid_input` for a multiplier that is negative or not finite.
  template <class T>
  [[nodiscard]] double check_bound(const bound_view<T>& v, std::span<const double> lambda) const {
    return detail::facility_dual::check_dense(v, kernel, gamma, lambda);
  }

 private:
  /// The kernel's row of a block row r: unit for the cosine kernels, rounded to T (a 16-bit
  /// block: to float) as the greedy state's unit rows are.
  template <class T>
  void gather(const batch_view<T>& b, index_t r, widened_t<T>* dst) const {
    using W = widened_t<T>;
    const bool unit = kernel == similarity_kernel::cosine || kernel == similarity_kernel::cosine2;
    const T* src = b.embeddings.row(r);
    for (index_t j = 0; j < b.embeddings.cols; ++j) {
      dst[j] = unit ? static_cast<W>(static_cast<double>(src[j]) * b.inv_norms[r]) : static_cast<W>(src[j]);
    }
  }

  /// Reference rows per tile, and the number of tiles, for |V| = nv.
  [[nodiscard]] std::pair<index_t, index_t> tiles_of(index_t nv) const {
    const index_t tl = std::max<index_t>(1, std::min(tile, nv));
    return {tl, (nv + tl - 1) / tl};
  }

  /// Tiles whose products (tl x nu values of `bytes` each) are held at once: as many as fit
  /// `group_bytes`, at least one, at most all. Groups start at multiples of it.
  [[nodiscard]] index_t group_of(index_t tl, index_t tiles, index_t nu, std::size_t bytes) const {
    const double tile_bytes = static_cast<double>(tl) * static_cast<double>(nu) * static_cast<double>(bytes);
    return std::clamp<index_t>(static_cast<index_t>(static_cast<double>(group_bytes) / tile_bytes), 1, tiles);
  }

  /// The distinct rows of G subsets (sorted: the products' columns) and the column of each
  /// entry, at[g k + j].
  [[nodiscard]] static std::pair<std::vector<index_t>, std::vector<index_t>> columns_of(
      const matrix_view<const index_t>& subsets) {
    const index_t k = subsets.cols;
    std::vector<index_t> cols;
    cols.reserve(static_cast<std::size_t>(subsets.rows * k));
    for (index_t g = 0; g < subsets.rows; ++g) cols.insert(cols.end(), subsets.row(g), subsets.row(g) + k);
    std::sort(cols.begin(), cols.end());
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    std::vector<index_t> at(static_cast<std::size_t>(subsets.rows * k));
    for (index_t g = 0; g < subsets.rows; ++g) {
      for (index_t j = 0; j < k; ++j) at[g * k + j] = std::lower_bound(cols.begin(), cols.end(), subsets(g, j)) - cols.begin();
    }
    return {std::move(cols), std::move(at)};
  }

  /// out[g] = (sum of subset g's tile sums `partial[c * G + g]`, tiles in order) / nv.
  static void tile_means(const std::vector<double>& partial, index_t tiles, index_t g_count, index_t nv,
                         std::span<double> out) {
    for (index_t g = 0; g < g_count; ++g) {
      double total = 0.0;
      for (index_t c = 0; c < tiles; ++c) total += partial[c * g_count + g];
      out[g] = total / static_cast<double>(nv);
    }
  }

  /// The dot products of the reference rows with the rows `cols`, in tiles of `tile` reference
  /// rows (`tiles_of`), then score(c, v0, t, sim, p) for every tile c and part p < parts
  /// (sim: the tile's t x |cols| products, row-major), the products of a group of tiles at a
  /// time on up to `b.threads` threads (when not already inside a parallel region), then the
  /// group's (tile, part) pairs. Parts split the scoring of a tile (a batch's subsets), so a
  /// batch whose reference set is one tile still runs on every thread. The buffers are the
  /// group's tile x |cols| products (at most `group_bytes`, at least one tile), never
  /// |V| x |cols| of a large V. After each group, done(c0, gc) (its first tile and its tiles).
  template <class T, class Score, class Done>
  void tiled_dots(const batch_view<T>& b, std::span<const index_t> cols, index_t parts, double part_work,
                  Score&& score, Done&& done) const {
    namespace fi = detail::facility_impl;
    using W = widened_t<T>;
    const index_t d = b.embeddings.cols;
    const auto nu = static_cast<index_t>(cols.size());
    const index_t chunks = (nu + fi::dot_width - 1) / fi::dot_width;
    std::vector<W> rows(static_cast<std::size_t>(nu * d));
    for (index_t u = 0; u < nu; ++u) gather(b, cols[u], rows.data() + u * d);
    std::vector<std::vector<W>> packed(static_cast<std::size_t>(chunks));
    for (index_t ch = 0; ch < chunks; ++ch) {
      const index_t c0 = ch * fi::dot_width;
      packed[ch] = fi::pack_columns<W>(std::min(fi::dot_width, nu - c0), d,
                                       [&](index_t c) { return rows.data() + (c0 + c) * d; });
    }
    const auto tiling = tiles_of(b.reference.size);  // not a binding: captured below
    const index_t tl = tiling.first;
    const index_t tiles = tiling.second;
    const index_t group = group_of(tl, tiles, nu, sizeof(W));
    std::vector<std::vector<W>> sims(static_cast<std::size_t>(group));
    for (index_t c0 = 0; c0 < tiles; c0 += group) {
      const index_t gc = std::min(group, tiles - c0);
      auto span_of = [&](index_t c) {
        const index_t v0 = c * tl;
        return std::pair<index_t, index_t>{v0, std::min(tl, b.reference.size - v0)};
      };
      detail::parallel_for(gc, b.threads, [&](index_t i) {
        const auto [v0, t] = span_of(c0 + i);
        std::vector<W> xv(static_cast<std::size_t>(t * d));
        for (index_t a = 0; a < t; ++a) gather(b, b.reference[v0 + a], xv.data() + a * d);
        std::vector<W>& sim = sims[i];
        sim.resize(static_cast<std::size_t>(t * nu));
        for (index_t ch = 0; ch < chunks; ++ch) {
          const index_t u0 = ch * fi::dot_width;
          const index_t nc = std::min(fi::dot_width, nu - u0);
          fi::fixed_dots<W>(t, d, [&](index_t a) { return xv.data() + a * d; }, packed[ch].data(),
                            [&](index_t a, const W* dots) { std::copy(dots, dots + nc, sim.begin() + (a * nu + u0)); });
        }
      }, 2.0 * static_cast<double>(tl) * static_cast<double>(nu) * static_cast<double>(d));
      detail::parallel_for(gc * parts, b.threads, [&](index_t i) {
        const index_t c = c0 + i / parts;
        const auto [v0, t] = span_of(c);
        score(c, v0, t, static_cast<const W*>(sims[i / parts].data()), i % parts);
      }, part_work);
      done(c0, gc);
    }
  }

  /// The best similarity of reference row v to a subset of k rows (`rows`), dot(j) its dot
  /// product with row j.
  template <class Dot>
  [[nodiscard]] double best(index_t k, Dot&& dot, const index_t* rows, const double* sq_norms, index_t v) const {
    switch (kernel) {
      case similarity_kernel::cosine:
      case similarity_kernel::dot: {
        double m = -std::numeric_limits<double>::infinity();
        for (index_t j = 0; j < k; ++j) m = std::max(m, dot(j));
        return m;
      }
      case similarity_kernel::cosine2: {
        double m = 0.0;
        for (index_t j = 0; j < k; ++j) {
          const double c = dot(j);
          m = std::max(m, c * c);
        }
        return m;
      }
      case similarity_kernel::rbf: {
        // max_j exp(-gamma ||v - j||^2) = exp(-gamma * min_j (||v||^2 + ||j||^2 - 2 v.j)).
        double m = std::numeric_limits<double>::infinity();
        for (index_t j = 0; j < k; ++j) m = std::min(m, sq_norms[rows[j]] - 2.0 * dot(j));
        return std::exp(-gamma * std::max(0.0, sq_norms[v] + m));
      }
    }
    return 0.0;
  }

  /// The best similarity of reference row v to the subset (as `best`), the position of the
  /// first item reaching it, and the best similarity without that item (the best again on a
  /// tie; unused for a single item). Compared as `best` compares (rbf: the smallest
  /// ||j||^2 - 2 v.j), so the best is `best`'s value bit for bit.
  template <class Dot>
  [[nodiscard]] std::tuple<double, index_t, double> best_two(index_t k, Dot&& dot, const index_t* rows,
                                                             const double* sq_norms, index_t v) const {
    auto key = [&](index_t j) {  // larger is better
      const double c = dot(j);
      switch (kernel) {
        case similarity_kernel::cosine2: return c * c;
        case similarity_kernel::rbf: return -(sq_norms[rows[j]] - 2.0 * c);
        default: return c;
      }
    };
    double k1 = -std::numeric_limits<double>::infinity();
    double k2 = k1;
    index_t at = 0;
    for (index_t j = 0; j < k; ++j) {
      const double x = key(j);
      if (x > k1) {
        k2 = k1;
        k1 = x;
        at = j;
      } else if (x > k2) {
        k2 = x;
      }
    }
    auto value = [&](double x) {
      return kernel == similarity_kernel::rbf ? std::exp(-gamma * std::max(0.0, sq_norms[v] + (-x))) : x;
    };
    return {value(k1), at, k < 2 ? 0.0 : value(k2)};
  }
};

}  // namespace datamask
