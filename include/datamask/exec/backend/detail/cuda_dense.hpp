// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief CUDA kernels the Thrust backend's executor runs in place of a generic pass of
/// executor/dense.hpp when Thrust's device system is CUDA (included by backend/thrust.hpp under
/// nvcc only). Each gives the generic pass's bits: the same terms added in the same order.

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

/// Launches `row_dots_tiled` on the default stream (ordered with the executor's other passes;
/// it does not wait for the kernel).
/// @throws std::runtime_error when the launch fails
template <class T>
void row_dots(matrix_view<const T> x, const double* s, double* out) {
  if (x.rows == 0) return;
  const auto blocks = static_cast<unsigned>((x.rows + tile_rows - 1) / tile_rows);
  row_dots_tiled<T><<<blocks, tile_rows>>>(x, s, out);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    throw std::runtime_error(std::string("datamask: row_dots kernel: ") + cudaGetErrorString(e));
  }
}

}  // namespace datamask::detail::cuda_dense
