// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief 16-bit embedding elements: IEEE binary16 (`float16`) and bfloat16, as pipelines store
/// embeddings. A block of them is read as it is stored (half the bytes of float32 per pass over
/// the block); every value widens to float exactly, so a pass over a 16-bit block sums the same
/// terms as a pass over the float32 block holding the same values (docs/method.md, "Precision").

#include <algorithm>
#include <array>
#include <bit>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "datamask/core/config.hpp"
#include "datamask/core/types.hpp"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDACC__) && !defined(__HIPCC__)
#include <cpuid.h>
#include <immintrin.h>
/// 1 where the host widens float16 with the F16C instruction, chosen at run time: the library is
/// compiled for baseline x86-64, which has no F16C. Not under nvcc, whose host pass meets
/// <immintrin.h> badly on some toolchains (GCC's avx512fp16 header against cuda_fp16.h): a CUDA
/// translation unit widens with the portable code instead, to the same bits, so the two
/// definitions of `widen` and of the host executor's 16-bit passes a program may link agree.
#define DATAMASK_X86_F16C 1
#else
#define DATAMASK_X86_F16C 0
#endif

namespace datamask {

namespace detail {
DATAMASK_HOST_DEVICE inline float float_of_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace detail

/// @brief IEEE binary16 to binary32, exactly (subnormals, infinities and NaNs included).
[[nodiscard]] DATAMASK_HOST_DEVICE inline float half_to_float(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t mant = h & 0x3FFu;
  if (exp == 0) {  // zero or subnormal: mant 2^-24, exact in float (a normal float: no subnormal arithmetic)
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign != 0 ? -v : v;
  }
  const std::uint32_t e = exp == 0x1F ? 0xFFu : exp + (127 - 15);  // infinity and NaN keep their mantissa
  return detail::float_of_bits(sign | (e << 23) | (mant << 13));
#endif
}

/// @brief binary32 to binary16, rounding to nearest even (overflow to infinity, NaN stays NaN).
[[nodiscard]] inline std::uint16_t float_to_half(float f) {
  const auto x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t exp = (x >> 23) & 0xFFu;
  std::uint32_t mant = x & 0x7FFFFFu;
  if (exp == 0xFF) return static_cast<std::uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0u));
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 0x1F) return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000u;
    const int shift = 14 - e;
    std::uint32_t half = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = (static_cast<std::uint32_t>(e) << 10) | (mant >> 13);
  const std::uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<std::uint16_t>(sign | half);
}

/// @brief bfloat16 to binary32, exactly: the high half of a float's bits.
[[nodiscard]] DATAMASK_HOST_DEVICE inline float bfloat16_to_float(std::uint16_t h) {
  return detail::float_of_bits(static_cast<std::uint32_t>(h) << 16);
}

/// @brief binary32 to bfloat16, rounding to nearest even (NaN stays NaN).
[[nodiscard]] inline std::uint16_t float_to_bfloat16(float f) {
  const auto x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  const std::uint32_t rounded = x + 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

/// @brief An IEEE binary16 embedding element (numpy's float16, `<f2`): its bits, read as a float.
struct float16 {
  std::uint16_t bits;  // no initialiser: a trivial type, as CUDA's shared memory needs
  /// @brief The nearest binary16 to `f` (ties to even).
  [[nodiscard]] static float16 from(float f) { return float16{float_to_half(f)}; }
  DATAMASK_HOST_DEVICE operator float() const { return half_to_float(bits); }  // NOLINT(implicit): exact
};

/// @brief A bfloat16 embedding element (the high 16 bits of a float; ml_dtypes' bfloat16, `<V2`
/// in a .npy file): its bits, read as a float.
struct bfloat16 {
  std::uint16_t bits;  // no initialiser: a trivial type, as CUDA's shared memory needs
  /// @brief The nearest bfloat16 to `f` (ties to even).
  [[nodiscard]] static bfloat16 from(float f) { return bfloat16{float_to_bfloat16(f)}; }
  DATAMASK_HOST_DEVICE operator float() const { return bfloat16_to_float(bits); }  // NOLINT(implicit): exact
};

static_assert(sizeof(float16) == 2 && std::is_trivially_copyable_v<float16>);
static_assert(sizeof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16>);

/// @brief How an array of embeddings is stored, as the front ends read files and arrays.
enum class element_kind { float32, float16, bfloat16 };

/// @brief Bytes per value of `k`.
[[nodiscard]] constexpr std::size_t element_bytes(element_kind k) { return k == element_kind::float32 ? 4 : 2; }

/// @brief The 16-bit element types.
template <class T>
concept half_precision = std::same_as<std::remove_cv_t<T>, float16> || std::same_as<std::remove_cv_t<T>, bfloat16>;

/// @brief The element types a block of embeddings may hold: float, double, float16, bfloat16.
template <class T>
concept embedding_element = std::same_as<std::remove_cv_t<T>, float> || std::same_as<std::remove_cv_t<T>, double> ||
                            half_precision<T>;

/// @brief The kind of a stored element type: float16, bfloat16, or float32 for float.
template <class T>
  requires std::same_as<T, float> || half_precision<T>
inline constexpr element_kind element_kind_of = std::same_as<T, float16>    ? element_kind::float16
                                                : std::same_as<T, bfloat16> ? element_kind::bfloat16
                                                                            : element_kind::float32;

/// @brief The type an element is computed in: float for the 16-bit types, the type itself
/// otherwise.
template <class T>
using widened_t = std::conditional_t<half_precision<T>, float, std::remove_cv_t<T>>;

namespace detail {

#if DATAMASK_X86_F16C
__attribute__((target("avx,f16c"))) inline void widen_f16c(const float16* in, index_t n, float* out) {
  index_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = half_to_float(in[i].bits);
}

/// What this CPU offers the 16-bit kernels, asked once (CPUID and XGETBV: older compilers'
/// `__builtin_cpu_supports` does not know "f16c").
struct x86_features {
  bool f16c = false;  ///< F16C, with AVX and the YMM state saved by the OS
  bool avx2 = false;
  bool avx512 = false;  ///< AVX-512 F and VL, with the ZMM state saved by the OS
};
inline x86_features cpu_features() {
  static const x86_features found = [] {
    x86_features f;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0) return f;
    const bool osxsave = (c & (1u << 27)) != 0;
    const bool avx = (c & (1u << 28)) != 0;
    if (!osxsave || !avx) return f;
    unsigned xcr0 = 0, high = 0;
    __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(high) : "c"(0));
    if ((xcr0 & 6u) != 6u) return f;  // the OS does not save both the XMM and YMM registers
    f.f16c = (c & (1u << 29)) != 0;
    if (__get_cpuid_max(0, nullptr) >= 7) {
      __cpuid_count(7, 0, a, b, c, d);
      f.avx2 = (b & (1u << 5)) != 0;
      const bool zmm_saved = (xcr0 & 0xe0u) == 0xe0u;  // the opmask and both halves of the ZMM state
      f.avx512 = zmm_saved && (b & (1u << 16)) != 0 && (b & (1u << 31)) != 0;
    }
    return f;
  }();
  return found;
}

/// Whether this CPU has F16C (and the AVX state it needs).
inline bool cpu_has_f16c() { return cpu_features().f16c; }
#endif

}  // namespace detail

/// @brief out[i] = in[i] as float, i < n, exactly (with F16C where this CPU has it; a NaN may come
/// back quiet).
inline void widen(const float16* in, index_t n, float* out) {
#if DATAMASK_X86_F16C
  if (detail::cpu_has_f16c()) {
    detail::widen_f16c(in, n, out);
    return;
  }
#endif
  for (index_t i = 0; i < n; ++i) out[i] = half_to_float(in[i].bits);
}

/// @brief out[i] = in[i] as float, i < n, exactly.
inline void widen(const bfloat16* in, index_t n, float* out) {
  for (index_t i = 0; i < n; ++i) out[i] = bfloat16_to_float(in[i].bits);
}

/// @brief out[i] = value i of the `n` values of kind `k` stored at `bytes`, as float, exactly.
/// The bytes need not be aligned for the element type (a mapped file's rows, a shard's).
inline void widen(const unsigned char* bytes, element_kind k, std::size_t n, float* out) {
  if (n == 0) return;
  if (k == element_kind::float32) {
    std::memcpy(out, bytes, n * sizeof(float));
    return;
  }
  // Copied out in chunks first: float16 and bfloat16 are 2-byte structs.
  auto widen_as = [&](auto tag) {
    constexpr std::size_t chunk = 512;
    std::array<decltype(tag), chunk> h;
    for (std::size_t i = 0; i < n; i += chunk) {
      const std::size_t m = std::min(chunk, n - i);
      std::memcpy(h.data(), bytes + 2 * i, 2 * m);
      widen(h.data(), static_cast<index_t>(m), out + i);
    }
  };
  if (k == element_kind::float16) {
    widen_as(float16{});
  } else {
    widen_as(bfloat16{});
  }
}

}  // namespace datamask
