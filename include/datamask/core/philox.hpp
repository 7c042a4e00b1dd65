// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Philox-4x32-10, the counter-based generator every random number of a run comes from.
///
/// Written from its published definition (Salmon, Moraes, Dror, Shaw, "Parallel random numbers:
/// as easy as 1, 2, 3", SC 2011): a 128-bit counter and a 64-bit key go through ten rounds of
/// two 32x32->64 multiplications; the key is bumped by the Weyl constants between rounds.
/// Because a draw is a pure function of (key, counter), the same item gets the same number on
/// any backend, thread count or shard layout.

#include <cmath>
#include <cstdint>

#include "datamask/core/config.hpp"

namespace datamask::rng {

/// @brief Four 32-bit words: a counter or a generator output.
struct u32x4 {
  std::uint32_t v[4];
};

/// @brief The 64-bit key as two 32-bit words.
struct philox_key {
  std::uint32_t k0 = 0;
  std::uint32_t k1 = 0;
  friend constexpr bool operator==(const philox_key&, const philox_key&) = default;
};

inline constexpr std::uint32_t philox_m0 = 0xD2511F53u;
inline constexpr std::uint32_t philox_m1 = 0xCD9E8D57u;
inline constexpr std::uint32_t philox_w0 = 0x9E3779B9u;
inline constexpr std::uint32_t philox_w1 = 0xBB67AE85u;

/// @brief Philox-4x32 with ten rounds.
DATAMASK_HOST_DEVICE constexpr u32x4 philox4x32_10(u32x4 ctr, philox_key key) {
  std::uint32_t k0 = key.k0;
  std::uint32_t k1 = key.k1;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += philox_w0;
      k1 += philox_w1;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(philox_m0) * ctr.v[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(philox_m1) * ctr.v[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32);
    const auto lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32);
    const auto lo1 = static_cast<std::uint32_t>(p1);
    ctr = u32x4{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
  }
  return ctr;
}

/// @brief Streams reserved in the fourth counter word. Rollouts use 0 .. 2^32 - 3.
inline constexpr std::uint32_t stream_active_batch = 0xFFFFFFFFu;
inline constexpr std::uint32_t stream_readout = 0xFFFFFFFEu;
inline constexpr std::uint32_t stream_reference = 0xFFFFFFFDu;

/// @brief The key of one block of one run: Philox of (block, "key") under the seed.
DATAMASK_HOST_DEVICE constexpr philox_key block_key(std::uint64_t seed, std::uint64_t block) {
  const u32x4 out = philox4x32_10(
      u32x4{{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
             0x6B657921u, 0u}},
      philox_key{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  return philox_key{out.v[0], out.v[1]};
}

/// @brief A key of its own for a reserved stream whose draws reuse a backend's active-batch
/// draw (`active_batch` under this key: a sampled reference set, `stream_reference`), so they
/// are independent of the active batch's: Philox of ("key", stream) under `key`.
DATAMASK_HOST_DEVICE constexpr philox_key stream_key(philox_key key, std::uint32_t stream) {
  const u32x4 out = philox4x32_10(u32x4{{0x6B657921u, stream, 0u, 0u}}, key);
  return philox_key{out.v[0], out.v[1]};
}

/// @brief A uniform double in the open interval (0, 1) for (item id, step, stream) under a key.
/// Uses 53 bits of the first two output words; never returns 0 or 1.
DATAMASK_HOST_DEVICE constexpr double uniform01(philox_key key, std::uint64_t id,
                                                std::uint32_t step, std::uint32_t stream) {
  const u32x4 out = philox4x32_10(
      u32x4{{static_cast<std::uint32_t>(id), static_cast<std::uint32_t>(id >> 32), step, stream}},
      key);
  const std::uint64_t bits =
      ((static_cast<std::uint64_t>(out.v[0]) << 32) | out.v[1]) >> 11;  // 53 bits
  return (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
}

/// @brief A standard Gumbel variate, -log(-log u), for (item id, step, stream) under a key.
DATAMASK_HOST_DEVICE inline double gumbel(philox_key key, std::uint64_t id, std::uint32_t step,
                                          std::uint32_t stream) {
  return -::log(-::log(uniform01(key, id, step, stream)));
}

}  // namespace datamask::rng
