// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief CUDA kernels the Thrust backend's executor runs in place of a generic pass of
/// exec/dense.hpp when Thrust's device system is CUDA (included by exec/backend/thrust.hpp under
/// nvcc only). Each adds the generic pass's terms in its order, so it gives the generic pass's
/// bits on the device (nvcc contracts both alike).

#include <cstdint>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "datamask/exec/dense.hpp"
#include "datamask/core/types.hpp"

namespace datamask::detail::cuda_dense {

/// Rows per thread block of `row_dots`, and columns per shared-memory slice.
inline constexpr int tile_rows = 128;
inline constexpr int tile_cols = 32;

/// out[i] = `dense::lane_dot`(x_i, s), one thread per row. Why not the generic pass: there a
/// warp's 32 threads read 32 rows a row apart, so every load touches 32 cache lines. Here a
/// block's 128 rows pass through shared memory in slices of 32 columns, each row's slice read
/// by 32 neighbouring threads (one 128-byte line), and each thread then adds its own row's
/// values to lane_dot's four partial sums in lane_dot's order (column j to part j mod 4 while
/// j < d - d mod 4, the rest to part 0).
template <class T>
__global__ void row_dots_tiled(matrix_view<const T> x, const double* s, double* out) {
  __shared__ T tile[tile_rows][tile_cols + 1];  // +1: a row's values fall in different banks
  const index_t first = static_cast<index_t>(blockIdx.x) * tile_rows;
  const index_t i = first + threadIdx.x;
  const index_t d = x.cols;
  const index_t body = d - d % 4;
  double part[4] = {0.0, 0.0, 0.0, 0.0};
  for (index_t c0 = 0; c0 < d; c0 += tile_cols) {
    const index_t width = d - c0 < tile_cols ? d - c0 : tile_cols;
    for (int e = static_cast<int>(threadIdx.x); e < tile_rows * tile_cols; e += tile_rows) {
      const int r = e / tile_cols;
      const int c = e % tile_cols;
      if (first + r < x.rows && c < width) tile[r][c] = x(first + r, c0 + c);
    }
    __syncthreads();
    if (i < x.rows) {
      for (index_t c = 0; c < width; ++c) {
        const index_t j = c0 + c;
        part[j < body ? j % 4 : 0] += static_cast<double>(tile[threadIdx.x][c]) * s[j];  // as lane_dot (FMA alike)
      }
    }
    __syncthreads();
  }
  if (i < x.rows) out[i] = (part[0] + part[1]) + (part[2] + part[3]);
}

/// @throws std::runtime_error naming `kernel` when its launch failed (the launch's own error: a
/// launch does not wait for the kernel)
inline void check_launch(const char* kernel) {
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    throw std::runtime_error(std::string("datamask: ") + kernel + " kernel: " + cudaGetErrorString(e));
  }
}

/// Launches `row_dots_tiled` on the default stream (ordered with the executor's other passes;
/// it does not wait for the kernel).
/// @throws std::runtime_error when the launch fails
template <class T>
void row_dots(matrix_view<const T> x, const double* s, double* out) {
  if (x.rows == 0) return;
  const auto blocks = static_cast<unsigned>((x.rows + tile_rows - 1) / tile_rows);
  row_dots_tiled<T><<<blocks, tile_rows>>>(x, s, out);
  check_launch("row_dots");
}

/// Rows of a chunk whose weights a block of `column_sums` holds in shared memory at a time.
inline constexpr int weight_slice = 1024;

/// V adjacent values of a row, loaded as one (16-byte loads for V = 4 floats).
template <class T, int V>
struct alignas(sizeof(T) * V) lanes {
  T v[V];
};

/// part[c d + j] = `dense::detail::column_chunk`'s sum: over the rows i of chunk c (`rows` rows
/// each) with w_i != 0, x_ij w_i added in row order. Why not the generic pass: there each thread
/// issues the loads of 8 rows, each after its row's weight came from global memory, and the pass
/// kept few bytes in flight (8% of an H200's copy bandwidth, benchmarks/GPU.md). Here a block
/// (chunk c, Threads x V columns) copies its chunk's weights to shared memory a slice at a time,
/// and each thread issues the loads of `Batch` rows of its V columns (those with a weight: a
/// warp skips a zero-weight row together) before adding them, each column in row order: the
/// same terms in the same order as the generic pass (and the CPU's executors), so the generic
/// pass's bits on the device. V > 1 needs V | d, V | stride and rows aligned to V values
/// (`column_chunks_with` checks).
template <class T, int V, int Batch, int Threads>
__global__ void __launch_bounds__(Threads) column_chunks_batched(matrix_view<const T> x, const double* w, index_t rows,
                                                                 double* part) {
  __shared__ double wt[weight_slice];
  const index_t c = blockIdx.x;
  const index_t j = (static_cast<index_t>(blockIdx.y) * Threads + threadIdx.x) * V;
  const index_t first = c * rows;
  const index_t end = first + rows < x.rows ? first + rows : x.rows;
  const bool mine = j < x.cols;
  const T* col = x.data + (mine ? j : 0);
  double acc[V] = {};
  for (index_t s0 = first; s0 < end; s0 += weight_slice) {
    const int count = static_cast<int>(end - s0 < weight_slice ? end - s0 : weight_slice);
    __syncthreads();  // every thread has read the previous slice's weights
    for (int e = static_cast<int>(threadIdx.x); e < count; e += Threads) wt[e] = w[s0 + e];
    __syncthreads();
    if (!mine) continue;
    int r = 0;
    for (; r + Batch <= count; r += Batch) {
      lanes<T, V> xv[Batch];
#pragma unroll
      for (int l = 0; l < Batch; ++l) {
        xv[l] = wt[r + l] != 0.0 ? *reinterpret_cast<const lanes<T, V>*>(col + (s0 + r + l) * x.stride) : lanes<T, V>{};
      }
#pragma unroll
      for (int l = 0; l < Batch; ++l) {
        if (wt[r + l] != 0.0) {
#pragma unroll
          for (int q = 0; q < V; ++q) acc[q] += static_cast<double>(xv[l].v[q]) * wt[r + l];
        }
      }
    }
    for (; r < count; ++r) {
      if (wt[r] != 0.0) {
        for (int q = 0; q < V; ++q) acc[q] += static_cast<double>(col[(s0 + r) * x.stride + q]) * wt[r];
      }
    }
  }
  if (mine) {
    for (int q = 0; q < V; ++q) part[c * x.cols + j + q] = acc[q];
  }
}

/// Launches `column_chunks_batched<T, V, Batch, Threads>` for `chunks` chunks of `rows` rows (on
/// the default stream, without waiting); false (nothing launched) when the block's layout does
/// not allow V-wide loads.
/// @throws std::runtime_error when the launch fails
template <class T, int V, int Batch, int Threads>
bool column_chunks_with(matrix_view<const T> x, const double* w, index_t rows, index_t chunks, double* part) {
  if (x.cols % V != 0 || x.stride % V != 0 || reinterpret_cast<std::uintptr_t>(x.data) % (sizeof(T) * V) != 0) {
    return false;
  }
  if (x.rows == 0 || x.cols == 0) return true;
  const index_t per_block = static_cast<index_t>(Threads) * V;
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>((x.cols + per_block - 1) / per_block));
  column_chunks_batched<T, V, Batch, Threads><<<grid, Threads>>>(x, w, rows, part);
  check_launch("column_sums");
  return true;
}

/// `column_sums`' partials: 16-byte loads where the rows allow them, else one value at a time.
template <class T>
void column_chunks(matrix_view<const T> x, const double* w, index_t rows, index_t chunks, double* part) {
  constexpr int wide = 16 / static_cast<int>(sizeof(T));
  if (!column_chunks_with<T, wide, 32, 64>(x, w, rows, chunks, part)) {
    (void)column_chunks_with<T, 1, 32, 128>(x, w, rows, chunks, part);
  }
}

}  // namespace datamask::detail::cuda_dense
