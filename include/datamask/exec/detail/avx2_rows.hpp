// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The host executor's two streaming passes (X^T w and X s) over a float32 or 16-bit block
/// with AVX2 (and F16C for float16), chosen at run time (the library is compiled for baseline
/// x86-64, whose SSE2 holds two doubles an instruction). Why: widening a 16-bit row to float
/// before the float32 block's code left the pass bound by its arithmetic, slower than the float32
/// block it should halve (benchmarks/RESULTS.md, "Half-precision blocks"); the float32 block's
/// passes, in Eigen's SSE2 code, were most of a default run. Each adds the same terms in the same
/// order with the same roundings as the generic passes (`dense::column_sums`' row order and
/// `dense::lane_dot`; a product, then a sum: no fused multiply-add), so a block gives the bits of
/// the float32 block holding the same values, with or without these kernels.

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "datamask/core/half.hpp"
#include "datamask/core/types.hpp"

#if DATAMASK_X86_F16C
#define DATAMASK_PRAGMA(x) _Pragma(#x)
/// Unrolls a loop over registers (an array of them stays in registers only when unrolled).
#define DATAMASK_UNROLL(n) DATAMASK_PRAGMA(GCC unroll n)
#endif

namespace datamask::detail::avx2_rows {

/// Whether these kernels read blocks of T (where the CPU has them).
template <class T>
inline constexpr bool reads = half_precision<T> || std::is_same_v<T, float>;

/// Rows requested ahead of the ones in use (the hardware's prefetch alone left a thread's pass
/// at half the rate of its arithmetic).
inline constexpr index_t ahead = 16;

#if DATAMASK_X86_F16C

/// Whether this CPU runs the kernels below, asked once.
inline bool available() { return cpu_features().f16c && cpu_features().avx2; }

/// Eight elements at `x` as eight floats (exact).
__attribute__((target("avx2,f16c"))) inline __m256 load8(const float16* x) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
}
__attribute__((target("avx2,f16c"))) inline __m256 load8(const float* x) { return _mm256_loadu_ps(x); }
__attribute__((target("avx2,f16c"))) inline __m256 load8(const bfloat16* x) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

/// Elements of T in a 64-byte line: a row is requested a line at a time.
template <class T>
inline constexpr index_t line = 64 / static_cast<index_t>(sizeof(T));

/// acc[j] += double(r[k][j]) * wk[k] for k = 0 .. count - 1 in that order, j in [0, d): 32 columns
/// of acc held in registers over the rows (each element's additions in row order, as one row at a
/// time would make them), so acc is read and written once per `count` rows. `next` (or null):
/// rows to request meanwhile (null entries skipped).
template <class T>
__attribute__((target("avx2,f16c"))) void add_rows(const T* const* r, const T* const* next, const double* wk,
                                                   int count, index_t d, double* acc) {
  index_t j = 0;
  for (; j + 32 <= d; j += 32) {
    __m256d a[8];
DATAMASK_UNROLL(8)
    for (int q = 0; q < 8; ++q) a[q] = _mm256_loadu_pd(acc + j + 4 * q);
    for (int k = 0; k < count; ++k) {
      const T* row = r[k] + j;
      if (next != nullptr && next[k] != nullptr) {
        for (index_t l = 0; l < 32; l += line<T>) _mm_prefetch(reinterpret_cast<const char*>(next[k] + j + l), _MM_HINT_T0);
      }
      const __m256d w = _mm256_set1_pd(wk[k]);
DATAMASK_UNROLL(4)
      for (int h = 0; h < 4; ++h) {
        const __m256 f = load8(row + 8 * h);
        a[2 * h] = _mm256_add_pd(a[2 * h], _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(f)), w));
        a[2 * h + 1] = _mm256_add_pd(a[2 * h + 1], _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)), w));
      }
    }
DATAMASK_UNROLL(8)
    for (int q = 0; q < 8; ++q) _mm256_storeu_pd(acc + j + 4 * q, a[q]);
  }
  for (; j + 8 <= d; j += 8) {
    __m256d lo = _mm256_loadu_pd(acc + j);
    __m256d hi = _mm256_loadu_pd(acc + j + 4);
    for (int k = 0; k < count; ++k) {
      const __m256 f = load8(r[k] + j);
      const __m256d w = _mm256_set1_pd(wk[k]);
      lo = _mm256_add_pd(lo, _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(f)), w));
      hi = _mm256_add_pd(hi, _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)), w));
    }
    _mm256_storeu_pd(acc + j, lo);
    _mm256_storeu_pd(acc + j + 4, hi);
  }
  for (; j < d; ++j) {
    for (int k = 0; k < count; ++k) acc[j] += static_cast<double>(static_cast<float>(r[k][j])) * wk[k];
  }
}

/// acc[j] += double(x_ij) * w_i for the rows i in [first, end) with w_i != 0, in row order
/// (`dense::column_sums`' chunk), eight such rows at a time, each requesting the row `ahead` on.
template <class T>
__attribute__((target("avx2,f16c"))) void accumulate(matrix_view<const T> x, index_t first, index_t end,
                                                     const double* w, double* acc) {
  constexpr int group = 8;
  const T* r[group];
  const T* next[group];
  double wk[group];
  int count = 0;
  for (index_t i = first; i < end; ++i) {
    if (w[i] == 0.0) continue;
    r[count] = x.row(i);
    next[count] = i + ahead < x.rows ? x.row(i + ahead) : nullptr;
    wk[count++] = w[i];
    if (count == group) {
      add_rows(r, next, wk, count, x.cols, acc);
      count = 0;
    }
  }
  add_rows(r, next, wk, count, x.cols, acc);
}

/// acc[j] += double(x_{rows[t], j}) * w[rows[t]] for t in [0, count), in list order, eight rows
/// at a time, each requesting the row `ahead` on in the list (the caller requests the first
/// `ahead`).
template <class T>
__attribute__((target("avx2,f16c"))) void sums(matrix_view<const T> x, const index_t* rows, index_t count,
                                               const double* w, double* acc) {
  constexpr int group = 8;
  const T* r[group];
  const T* next[group];
  double wk[group];
  for (index_t t = 0; t < count; t += group) {
    const int g = static_cast<int>(std::min<index_t>(group, count - t));
    for (int k = 0; k < g; ++k) {
      r[k] = x.row(rows[t + k]);
      next[k] = t + k + ahead < count ? x.row(rows[t + k + ahead]) : nullptr;
      wk[k] = w[rows[t + k]];
    }
    add_rows<T>(r, next, wk, g, x.cols, acc);
  }
}

/// out[k] = `dense::lane_dot`(r[k], s) for K rows of d elements, side by side, so the rows'
/// independent sums hide the latency of each one's additions: lanes l = 0..3 over the
/// eight-wide steps (columns j..j+3, then j+4..j+7), the rest of the four-wide steps, the
/// remainder into lane 0, the lanes added in the fixed order. `next` (or null): K rows to request
/// meanwhile.
template <int K, class T>
__attribute__((target("avx2,f16c"))) void dot_rows(const T* const* r, const T* const* next, index_t d,
                                                   const double* s, double* out) {
  const index_t wide = d / 8 * 8;
  __m256d part[K];
  for (int k = 0; k < K; ++k) part[k] = _mm256_setzero_pd();
  for (index_t j = 0; j < wide; j += 8) {
    if (next != nullptr && j % line<T> == 0) {
      for (int k = 0; k < K; ++k) _mm_prefetch(reinterpret_cast<const char*>(next[k] + j), _MM_HINT_T0);
    }
    const __m256d s0 = _mm256_loadu_pd(s + j);
    const __m256d s1 = _mm256_loadu_pd(s + j + 4);
    for (int k = 0; k < K; ++k) {
      const __m256 f = load8(r[k] + j);
      part[k] = _mm256_add_pd(part[k], _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(f)), s0));
      part[k] = _mm256_add_pd(part[k], _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)), s1));
    }
  }
  for (int k = 0; k < K; ++k) {
    const T* row = r[k];
    alignas(32) double lanes[4];
    _mm256_store_pd(lanes, part[k]);
    index_t j = wide;
    for (; j + 4 <= d; j += 4) {
      for (index_t l = 0; l < 4; ++l) lanes[l] += static_cast<double>(static_cast<float>(row[j + l])) * s[j + l];
    }
    for (; j < d; ++j) lanes[0] += static_cast<double>(static_cast<float>(row[j])) * s[j];
    out[k] = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  }
}

/// out[t] = `dense::lane_dot`(x_{row(t)}, s) for t in [0, count), four rows at a time, each
/// group requesting the group `ahead` rows on (the caller requests the first `ahead`).
template <class T, class Row>
__attribute__((target("avx2,f16c"))) void dots_by(matrix_view<const T> x, index_t count, Row row, const double* s,
                                                  double* out) {
  const T* r[4];
  const T* next[4];
  index_t t = 0;
  for (; t + 4 <= count; t += 4) {
    const bool ahead_exists = t + ahead + 4 <= count;
    for (int k = 0; k < 4; ++k) {
      r[k] = x.row(row(t + k));
      if (ahead_exists) next[k] = x.row(row(t + ahead + k));
    }
    dot_rows<4, T>(r, ahead_exists ? next : nullptr, x.cols, s, out + t);
  }
  for (; t < count; ++t) {
    r[0] = x.row(row(t));
    dot_rows<1, T>(r, nullptr, x.cols, s, out + t);
  }
}

/// out[i] = `dense::lane_dot`(x_i, s) for i in [first, end).
template <class T>
void dots(matrix_view<const T> x, index_t first, index_t end, const double* s, double* out) {
  dots_by(x, end - first, [first](index_t t) { return first + t; }, s, out + first);
}

/// out[t] = `dense::lane_dot`(x_{rows[t]}, s) for t in [0, count): rows listed in any order.
template <class T>
void dots(matrix_view<const T> x, const index_t* rows, index_t count, const double* s, double* out) {
  dots_by(x, count, [rows](index_t t) { return rows[t]; }, s, out);
}

#else

inline bool available() { return false; }
template <class T>
void accumulate(matrix_view<const T>, index_t, index_t, const double*, double*) {}
template <class T>
void sums(matrix_view<const T>, const index_t*, index_t, const double*, double*) {}
template <class T>
void dots(matrix_view<const T>, index_t, index_t, const double*, double*) {}
template <class T>
void dots(matrix_view<const T>, const index_t*, index_t, const double*, double*) {}

#endif

}  // namespace datamask::detail::avx2_rows
