// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The four dense products of an executor (`executor` concept): X^T w, X s, the weighted
/// scatter of the rows about a centre and the rows' quadratic forms with a d x d matrix, written
/// as `for_each` passes. The Thrust executor runs these, or under CUDA a kernel with the same
/// order of additions for X^T w and X s (exec/backend/detail/cuda_dense.hpp); the host executor
/// runs Eigen's products instead, with the same definitions (exec/host.hpp). All sum X^T w in
/// the same fixed chunks and X s in the same four lanes, so those two add the same terms in the
/// same order on every executor: the same bits on the CPU's executors; under CUDA, nvcc's
/// contraction of a*b+c into one rounding can change the last bit.

#include <algorithm>

#include "datamask/core/config.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

namespace dense {

/// @brief Rows per chunk of a fixed-chunk sum over n rows: at least `min_rows`, at most
/// `max_chunks` chunks. Depends on n only, so the chunks' partial sums, and their sum in chunk
/// order, do not depend on the thread count.
[[nodiscard]] inline index_t chunk_rows(index_t n, index_t max_chunks, index_t min_rows = 1024) {
  return std::max<index_t>(min_rows, (n + max_chunks - 1) / max_chunks);
}

/// @brief Chunks of `column_sums`: 64 at most (each a d-vector of partials).
inline constexpr index_t column_chunks = 64;
/// @brief Chunks of `scatter`: 16 at most (each a d x d matrix of partials).
inline constexpr index_t scatter_chunks = 16;

/// @brief x_i . s in double in four interleaved partial sums added in a fixed order (independent
/// chains: SIMD lanes on CPU threads, instruction-level parallelism on a GPU). The one
/// definition of `row_dots` on every executor.
template <class T>
DATAMASK_HOST_DEVICE double lane_dot(const T* x, const double* s, index_t d) {
  double part[4] = {0.0, 0.0, 0.0, 0.0};
  index_t j = 0;
  for (; j + 4 <= d; j += 4) {
    for (index_t l = 0; l < 4; ++l) part[l] += static_cast<double>(x[j + l]) * s[j + l];
  }
  for (; j < d; ++j) part[0] += static_cast<double>(x[j]) * s[j];
  return (part[0] + part[1]) + (part[2] + part[3]);
}

namespace detail {

/// part[c d + j] = sum over the rows i of chunk c with w_i != 0 of x_ij w_i, in row order.
template <class T>
struct column_chunk {
  matrix_view<const T> x;
  const double* w;
  index_t rows;
  double* part;
  DATAMASK_HOST_DEVICE void operator()(index_t idx) const {
    const index_t d = x.cols;
    const index_t c = idx / d;
    const index_t j = idx % d;
    const index_t end = (c + 1) * rows < x.rows ? (c + 1) * rows : x.rows;
    // Loads of `ahead` rows are issued before their terms are added (in row order, as one at a
    // time would add them): a GPU thread here sums thousands of rows, and one load in flight
    // per thread left the pass at 6.5% of an H200's copy bandwidth (benchmarks/GPU.md).
    constexpr index_t ahead = 8;
    double acc = 0.0;
    index_t i = c * rows;
    for (; i + ahead <= end; i += ahead) {
      double wv[ahead];
      double xv[ahead];
      for (index_t l = 0; l < ahead; ++l) {
        wv[l] = w[i + l];
        xv[l] = wv[l] != 0.0 ? static_cast<double>(x(i + l, j)) : 0.0;
      }
      for (index_t l = 0; l < ahead; ++l) {
        if (wv[l] != 0.0) acc += xv[l] * wv[l];
      }
    }
    for (; i < end; ++i) {
      if (w[i] != 0.0) acc += static_cast<double>(x(i, j)) * w[i];
    }
    part[idx] = acc;
  }
};

/// out[j] = sum_c part[c width + j], chunks in order.
struct chunk_totals {
  const double* part;
  index_t chunks;
  index_t width;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t j) const {
    double acc = 0.0;
    for (index_t c = 0; c < chunks; ++c) acc += part[c * width + j];
    out[j] = acc;
  }
};

/// out[i] = x_i . s (`lane_dot`).
template <class T>
struct row_dot {
  matrix_view<const T> x;
  const double* s;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const { out[i] = lane_dot(x.row(i), s, x.cols); }
};

/// part[c d^2 + a d + b] (b <= a) = sum over the rows i of chunk c with w_i > 0 of
/// w_i (x_ia - mu_a)(x_ib - mu_b), in row order, in double.
template <class T>
struct scatter_chunk {
  matrix_view<const T> x;
  const double* mu;
  const double* w;
  index_t rows;
  double* part;
  DATAMASK_HOST_DEVICE void operator()(index_t idx) const {
    const index_t d = x.cols;
    const index_t c = idx / (d * d);
    const index_t a = (idx / d) % d;
    const index_t b = idx % d;
    if (b > a) return;
    const index_t end = (c + 1) * rows < x.rows ? (c + 1) * rows : x.rows;
    double acc = 0.0;
    for (index_t i = c * rows; i < end; ++i) {
      if (!(w[i] > 0.0)) continue;
      acc += w[i] * (static_cast<double>(x(i, a)) - mu[a]) * (static_cast<double>(x(i, b)) - mu[b]);
    }
    part[idx] = acc;
  }
};

/// sigma_ab = sigma_ba = sum_c part[c d^2 + a d + b] (b <= a), chunks in order.
struct scatter_total {
  const double* part;
  index_t chunks;
  index_t d;
  double* sigma;
  DATAMASK_HOST_DEVICE void operator()(index_t idx) const {
    const index_t a = idx / d;
    const index_t b = idx % d;
    if (b > a) return;
    double acc = 0.0;
    for (index_t c = 0; c < chunks; ++c) acc += part[c * d * d + idx];
    sigma[a * d + b] = acc;
    sigma[b * d + a] = acc;
  }
};

/// out[i] = (x_i - mu)^T G (x_i - mu), in double.
template <class T>
struct quadratic_form {
  matrix_view<const T> x;
  const double* mu;
  const double* g;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const {
    const index_t d = x.cols;
    double quad = 0.0;
    for (index_t a = 0; a < d; ++a) {
      double z = 0.0;
      for (index_t b = 0; b < d; ++b) z += g[a * d + b] * (static_cast<double>(x(i, b)) - mu[b]);
      quad += (static_cast<double>(x(i, a)) - mu[a]) * z;
    }
    out[i] = quad;
  }
};

}  // namespace detail

/// @brief `column_sums` with an executor's own pass over the chunks: `chunk_pass(scope, rows,
/// chunks, part)` fills part[c d + j] as `detail::column_chunk` does (the same terms in the same
/// order), as the CUDA backend's kernel does; the chunks are then added in order.
template <class Exec, class T, class ChunkPass>
void column_sums_with(Exec& exec, matrix_view<const T> x, double* out, ChunkPass chunk_pass) {
  const index_t d = x.cols;
  const index_t rows = chunk_rows(x.rows, column_chunks);
  const index_t chunks = (x.rows + rows - 1) / rows;
  auto scope = exec.scope();
  double* part = scope.template scratch<double>(chunks * d);
  chunk_pass(scope, rows, chunks, part);
  scope.for_each(d, detail::chunk_totals{part, chunks, d, out}, static_cast<double>(chunks));
}
/// @brief out = sum_i w_i x_i over the rows with w_i != 0 (d doubles), in `column_chunks`
/// fixed chunks, each in row order, the chunks added in order. One thread per (chunk, column):
/// a row's columns are read side by side (coalesced on a GPU).
template <class Exec, class T>
void column_sums(Exec& exec, matrix_view<const T> x, const double* w, double* out) {
  column_sums_with(exec, x, out, [&](auto& scope, index_t rows, index_t chunks, double* part) {
    scope.for_each(chunks * x.cols, detail::column_chunk<T>{x, w, rows, part}, static_cast<double>(rows));
  });
}

/// @brief out[i] = x_i . s for every row (`lane_dot`).
template <class Exec, class T>
void row_dots(Exec& exec, matrix_view<const T> x, const double* s, double* out) {
  exec.for_each(x.rows, detail::row_dot<T>{x, s, out}, 2.0 * static_cast<double>(x.cols));
}

/// @brief sigma = sum_i w_i (x_i - mu)(x_i - mu)^T over the rows with w_i > 0 (d x d, row-major,
/// symmetric), in double, in `scatter_chunks` fixed chunks added in order.
template <class Exec, class T>
void scatter(Exec& exec, matrix_view<const T> x, const double* mu, const double* w, double* sigma) {
  const index_t d = x.cols;
  const index_t rows = chunk_rows(x.rows, scatter_chunks);
  const index_t chunks = (x.rows + rows - 1) / rows;
  auto scope = exec.scope();
  double* part = scope.template scratch<double>(chunks * d * d);
  scope.for_each(chunks * d * d, detail::scatter_chunk<T>{x, mu, w, rows, part}, 3.0 * static_cast<double>(rows));
  scope.for_each(d * d, detail::scatter_total{part, chunks, d, sigma}, static_cast<double>(chunks));
}

/// @brief out[i] = (x_i - mu)^T G (x_i - mu) for every row (G: d x d, row-major).
template <class Exec, class T>
void quadratic_forms(Exec& exec, matrix_view<const T> x, const double* mu, const double* g, double* out) {
  const auto d = static_cast<double>(x.cols);
  exec.for_each(x.rows, detail::quadratic_form<T>{x, mu, g, out}, 2.0 * d * d);
}

}  // namespace dense

}  // namespace datamask
