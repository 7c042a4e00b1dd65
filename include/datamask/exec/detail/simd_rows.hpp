// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The host executor's two streaming passes (X^T w and X s) over a float32 or 16-bit block
/// with AVX2 (and F16C for float16), and with AVX-512 where the CPU has it, chosen at run time
/// (the library is compiled for baseline x86-64, whose SSE2 holds two doubles an instruction).
/// Why: a pass widens each element to double and adds its product; over a 16-bit block, which
/// halves the bytes, that arithmetic, not the memory, set the pass's rate (benchmarks/RESULTS.md,
/// "Half-precision blocks"), and AVX-512 widens and multiplies eight elements an instruction
/// where AVX2 takes two. Each adds the same terms in the same order with the same roundings as the
/// generic passes (`dense::column_sums`' row order and `dense::lane_dot`; a product, then a sum:
/// no fused multiply-add), so a block gives the bits of the float32 block holding the same values,
/// with AVX-512, AVX2 or neither.

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "datamask/core/detail/row_map.hpp"
#include "datamask/core/half.hpp"
#include "datamask/core/types.hpp"

#if DATAMASK_X86_F16C
#define DATAMASK_PRAGMA(x) _Pragma(#x)
/// Unrolls a loop over registers (an array of them stays in registers only when unrolled).
#define DATAMASK_UNROLL(n) DATAMASK_PRAGMA(GCC unroll n)
/// The instructions of the AVX-512 loops (the AVX2 helpers they call inline into them).
#define DATAMASK_AVX512 __attribute__((target("avx512f,avx512vl,avx2,f16c")))
#endif

namespace datamask::detail::simd_rows {

/// Whether these kernels read blocks of T (where the CPU has them).
template <class T>
inline constexpr bool reads = half_precision<T> || std::is_same_v<T, float>;

/// Rows requested ahead of the ones in use (the hardware's prefetch alone left a thread's pass
/// at half the rate of its arithmetic).
inline constexpr index_t ahead = 16;

/// The instructions a pass runs with: none (the generic passes), AVX2 with F16C, or AVX-512 (F
/// and VL) for the inner loops as well. Every level gives the same bits.
enum class level { none, avx2, avx512 };

#if DATAMASK_X86_F16C

/// The best level this CPU runs, asked once.
inline level best() {
  static const level found = !(cpu_features().f16c && cpu_features().avx2) ? level::none
                             : cpu_features().avx512                      ? level::avx512
                                                                          : level::avx2;
  return found;
}

/// Whether this CPU runs the kernels below.
inline bool available() { return best() != level::none; }

/// Eight elements at `x` as eight floats (exact).
__attribute__((target("avx2,f16c"))) inline __m256 floats8(const float* x) { return _mm256_loadu_ps(x); }
__attribute__((target("avx2,f16c"))) inline __m256 floats8(const float16* x) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
}
__attribute__((target("avx2,f16c"))) inline __m256 floats8(const bfloat16* x) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

/// Eight elements at `x` as doubles (exact): the first four in `lo`, the rest in `hi`. A float32
/// row widens straight from memory (on two ports; from a register, and the extraction of its
/// upper half, on the one shuffle port).
__attribute__((target("avx2,f16c"))) inline void widen8(const float* x, __m256d& lo, __m256d& hi) {
  lo = _mm256_cvtps_pd(_mm_loadu_ps(x));
  hi = _mm256_cvtps_pd(_mm_loadu_ps(x + 4));
}
template <class T>
__attribute__((target("avx2,f16c"))) inline void widen8(const T* x, __m256d& lo, __m256d& hi) {
  const __m256 f = floats8(x);
  lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
  hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
}

/// acc + a b, the product rounded, then the sum: the empty asm hides the product from the
/// compiler, which would otherwise fuse the two into one fused multiply-add (one rounding) where
/// the target has one (AVX-512) or the flags enable it (-march=native), under GCC's default
/// -ffp-contract=fast.
__attribute__((target("avx2,f16c"))) inline __m256d add_product(__m256d acc, __m256d a, __m256d b) {
  __m256d p = _mm256_mul_pd(a, b);
  asm("" : "+x"(p));
  return _mm256_add_pd(acc, p);
}
DATAMASK_AVX512 inline __m512d add_product(__m512d acc, __m512d a, __m512d b) {
  __m512d p = _mm512_mul_pd(a, b);
  asm("" : "+v"(p));
  return _mm512_add_pd(acc, p);
}

/// Eight floats as eight doubles (exact), and four doubles twice over: the forms with a zero mask
/// operand (all lanes kept), as GCC 12's plain forms warn (-Wmaybe-uninitialized) of their
/// undefined pass-through operand wherever they are inlined.
DATAMASK_AVX512 inline __m512d doubles8(__m256 f) { return _mm512_maskz_cvtps_pd(0xff, f); }
DATAMASK_AVX512 inline __m512d twice4(const double* s) { return _mm512_maskz_broadcast_f64x4(0xff, _mm256_loadu_pd(s)); }

/// Elements of T in a 64-byte line: a row is requested a line at a time.
template <class T>
inline constexpr index_t line = 64 / static_cast<index_t>(sizeof(T));

/// Requests columns [j, j + 32) of row next[k]: one line of a 16-bit row, two of a float32 row
/// (none where `next` or the entry is null).
template <class T>
inline void request32(const T* const* next, int k, index_t j) {
  if (next == nullptr || next[k] == nullptr) return;
  for (index_t l = 0; l < 32; l += line<T>) detail::request_line(next[k] + j + l);
}

/// `add_rows`' 32-column stripes with AVX-512 (eight columns a register): the columns done.
template <class T>
DATAMASK_AVX512 index_t add_stripes_512(const T* const* r, const T* const* next, const double* wk, int count,
                                        index_t d, double* acc) {
  index_t j = 0;
  for (; j + 32 <= d; j += 32) {
    __m512d a[4];
DATAMASK_UNROLL(4)
    for (int q = 0; q < 4; ++q) a[q] = _mm512_loadu_pd(acc + j + 8 * q);
    for (int k = 0; k < count; ++k) {
      request32(next, k, j);
      const __m512d w = _mm512_set1_pd(wk[k]);
DATAMASK_UNROLL(4)
      for (int q = 0; q < 4; ++q) {
        a[q] = add_product(a[q], doubles8(floats8(r[k] + j + 8 * q)), w);
      }
    }
DATAMASK_UNROLL(4)
    for (int q = 0; q < 4; ++q) _mm512_storeu_pd(acc + j + 8 * q, a[q]);
  }
  return j;
}

/// acc[j] += double(r[k][j]) * wk[k] for k = 0 .. count - 1 in that order, j in [0, d): 32 columns
/// of acc held in registers over the rows (each element's additions in row order, as one row at a
/// time would make them), so acc is read and written once per `count` rows. `next` (or null):
/// rows to request meanwhile (null entries skipped).
template <class T>
__attribute__((target("avx2,f16c"))) void add_rows(const T* const* r, const T* const* next, const double* wk,
                                                   int count, index_t d, double* acc, level at) {
  index_t j = at == level::avx512 ? add_stripes_512(r, next, wk, count, d, acc) : 0;
  for (; j + 32 <= d; j += 32) {
    __m256d a[8];
DATAMASK_UNROLL(8)
    for (int q = 0; q < 8; ++q) a[q] = _mm256_loadu_pd(acc + j + 4 * q);
    for (int k = 0; k < count; ++k) {
      request32(next, k, j);
      const __m256d w = _mm256_set1_pd(wk[k]);
DATAMASK_UNROLL(4)
      for (int h = 0; h < 4; ++h) {
        __m256d lo, hi;
        widen8(r[k] + j + 8 * h, lo, hi);
        a[2 * h] = add_product(a[2 * h], lo, w);
        a[2 * h + 1] = add_product(a[2 * h + 1], hi, w);
      }
    }
DATAMASK_UNROLL(8)
    for (int q = 0; q < 8; ++q) _mm256_storeu_pd(acc + j + 4 * q, a[q]);
  }
  for (; j + 8 <= d; j += 8) {
    __m256d lo = _mm256_loadu_pd(acc + j);
    __m256d hi = _mm256_loadu_pd(acc + j + 4);
    for (int k = 0; k < count; ++k) {
      __m256d l, h;
      widen8(r[k] + j, l, h);
      const __m256d w = _mm256_set1_pd(wk[k]);
      lo = add_product(lo, l, w);
      hi = add_product(hi, h, w);
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
void accumulate(matrix_view<const T> x, index_t first, index_t end, const double* w, double* acc,
                level at = best()) {
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
      add_rows(r, next, wk, count, x.cols, acc, at);
      count = 0;
    }
  }
  add_rows(r, next, wk, count, x.cols, acc, at);
}

/// acc[j] += double(x_{rows[t], j}) * w[rows[t]] for t in [0, count), in list order, eight rows
/// at a time, each requesting the row `ahead` on in the list (the caller requests the first
/// `ahead`).
template <class T>
void sums(matrix_view<const T> x, const index_t* rows, index_t count, const double* w, double* acc,
          level at = best()) {
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
    add_rows<T>(r, next, wk, g, x.cols, acc, at);
  }
}

/// Requests row next[k]'s line at column j for each of K rows, where j starts a line (none where
/// `next` is null).
template <int K, class T>
inline void request_group(const T* const* next, index_t j) {
  if (next == nullptr || j % line<T> != 0) return;
  for (int k = 0; k < K; ++k) detail::request_line(next[k] + j);
}

/// lanes[4k + l] = the sum over the eight-wide steps j < `wide` of row r[k]'s products at columns
/// j + l, then j + 4 + l, in that order (`dense::lane_dot`'s four lanes), for K rows side by side,
/// so the rows' independent sums hide the latency of each one's additions.
template <int K, class T>
__attribute__((target("avx2,f16c"))) void lane_sums(const T* const* r, const T* const* next, index_t wide,
                                                    const double* s, double* lanes) {
  __m256d part[K];
DATAMASK_UNROLL(4)
  for (int k = 0; k < K; ++k) part[k] = _mm256_setzero_pd();
  for (index_t j = 0; j < wide; j += 8) {
    request_group<K>(next, j);
    const __m256d s0 = _mm256_loadu_pd(s + j);
    const __m256d s1 = _mm256_loadu_pd(s + j + 4);
DATAMASK_UNROLL(4)
    for (int k = 0; k < K; ++k) {
      __m256d lo, hi;
      widen8(r[k] + j, lo, hi);
      part[k] = add_product(part[k], lo, s0);
      part[k] = add_product(part[k], hi, s1);
    }
  }
DATAMASK_UNROLL(4)
  for (int k = 0; k < K; ++k) _mm256_storeu_pd(lanes + 4 * k, part[k]);
}

/// `lane_sums` with AVX-512, for an even K: one register holds two rows' four lanes (rows 2p and
/// 2p + 1), so each product and addition serves eight elements in `lane_dot`'s order.
template <int K, class T>
DATAMASK_AVX512 void lane_sums_512(const T* const* r, const T* const* next, index_t wide, const double* s,
                                   double* lanes) {
  static_assert(K % 2 == 0);
  __m512d part[K / 2];
DATAMASK_UNROLL(2)
  for (int p = 0; p < K / 2; ++p) part[p] = _mm512_setzero_pd();
  for (index_t j = 0; j < wide; j += 8) {
    request_group<K>(next, j);
    const __m512d s0 = twice4(s + j);
    const __m512d s1 = twice4(s + j + 4);
DATAMASK_UNROLL(2)
    for (int p = 0; p < K / 2; ++p) {
      const __m256 a = floats8(r[2 * p] + j);
      const __m256 b = floats8(r[2 * p + 1] + j);
      const __m512d lo = doubles8(_mm256_permute2f128_ps(a, b, 0x20));  // a j..j+3, b j..j+3
      const __m512d hi = doubles8(_mm256_permute2f128_ps(a, b, 0x31));  // a j+4..j+7, b j+4..j+7
      part[p] = add_product(part[p], lo, s0);
      part[p] = add_product(part[p], hi, s1);
    }
  }
DATAMASK_UNROLL(2)
  for (int p = 0; p < K / 2; ++p) _mm512_storeu_pd(lanes + 8 * p, part[p]);
}

/// out[k] = `dense::lane_dot`(r[k], s) for K rows of d elements: `lane_sums` over the eight-wide
/// steps, then the rest of the four-wide steps, the remainder into lane 0, the lanes added in the
/// fixed order. `next` (or null): K rows to request meanwhile.
template <int K, class T>
void dot_rows(const T* const* r, const T* const* next, index_t d, const double* s, double* out, level at) {
  const index_t wide = d / 8 * 8;
  double lanes[4 * K];
  if constexpr (K % 2 == 0) {
    if (at == level::avx512) {
      lane_sums_512<K>(r, next, wide, s, lanes);
    } else {
      lane_sums<K>(r, next, wide, s, lanes);
    }
  } else {
    lane_sums<K>(r, next, wide, s, lanes);
  }
  for (int k = 0; k < K; ++k) {
    const T* row = r[k];
    double* lane = lanes + 4 * k;
    index_t j = wide;
    for (; j + 4 <= d; j += 4) {
      for (index_t l = 0; l < 4; ++l) lane[l] += static_cast<double>(static_cast<float>(row[j + l])) * s[j + l];
    }
    for (; j < d; ++j) lane[0] += static_cast<double>(static_cast<float>(row[j])) * s[j];
    out[k] = (lane[0] + lane[1]) + (lane[2] + lane[3]);
  }
}

/// out[t] = `dense::lane_dot`(x_{row(t)}, s) for t in [0, count), four rows at a time, each
/// group requesting the group `ahead` rows on (the caller requests the first `ahead`).
template <class T, class Row>
void dots_by(matrix_view<const T> x, index_t count, Row row, const double* s, double* out, level at) {
  const T* r[4];
  const T* next[4];
  index_t t = 0;
  for (; t + 4 <= count; t += 4) {
    const bool ahead_exists = t + ahead + 4 <= count;
    for (int k = 0; k < 4; ++k) {
      r[k] = x.row(row(t + k));
      if (ahead_exists) next[k] = x.row(row(t + ahead + k));
    }
    dot_rows<4, T>(r, ahead_exists ? next : nullptr, x.cols, s, out + t, at);
  }
  for (; t < count; ++t) {
    r[0] = x.row(row(t));
    dot_rows<1, T>(r, nullptr, x.cols, s, out + t, at);
  }
}

/// out[i] = `dense::lane_dot`(x_i, s) for i in [first, end).
template <class T>
void dots(matrix_view<const T> x, index_t first, index_t end, const double* s, double* out, level at = best()) {
  dots_by(x, end - first, [first](index_t t) { return first + t; }, s, out + first, at);
}

/// out[t] = `dense::lane_dot`(x_{rows[t]}, s) for t in [0, count): rows listed in any order.
template <class T>
void dots(matrix_view<const T> x, const index_t* rows, index_t count, const double* s, double* out,
          level at = best()) {
  dots_by(x, count, [rows](index_t t) { return rows[t]; }, s, out, at);
}

#else

inline level best() { return level::none; }
inline bool available() { return false; }
template <class T>
void accumulate(matrix_view<const T>, index_t, index_t, const double*, double*, level = level::none) {}
template <class T>
void sums(matrix_view<const T>, const index_t*, index_t, const double*, double*, level = level::none) {}
template <class T>
void dots(matrix_view<const T>, index_t, index_t, const double*, double*, level = level::none) {}
template <class T>
void dots(matrix_view<const T>, const index_t*, index_t, const double*, double*, level = level::none) {}

#endif

}  // namespace datamask::detail::simd_rows
