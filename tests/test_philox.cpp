// SPDX-License-Identifier: Apache-2.0
// Philox-4x32-10 against the published known-answer vectors, and the uniform and key helpers.
#include <catch2/catch.hpp>

#include <datamask/core/philox.hpp>

using datamask::rng::philox4x32_10;
using datamask::rng::philox_key;
using datamask::rng::u32x4;

namespace {
bool same(const u32x4& a, const u32x4& b) {
  return a.v[0] == b.v[0] && a.v[1] == b.v[1] && a.v[2] == b.v[2] && a.v[3] == b.v[3];
}
}  // namespace

TEST_CASE("philox4x32_10 reproduces the published known-answer vectors", "[rng]") {
  CHECK(same(philox4x32_10(u32x4{{0, 0, 0, 0}}, philox_key{0, 0}),
             u32x4{{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}));
  CHECK(same(philox4x32_10(u32x4{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
                           philox_key{0xffffffffu, 0xffffffffu}),
             u32x4{{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}));
  CHECK(same(philox4x32_10(u32x4{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
                           philox_key{0xa4093822u, 0x299f31d0u}),
             u32x4{{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}));
}

TEST_CASE("philox is usable in constant expressions", "[rng]") {
  constexpr auto out = philox4x32_10(u32x4{{0, 0, 0, 0}}, philox_key{0, 0});
  STATIC_REQUIRE(out.v[0] == 0x6627e8d5u);
}

TEST_CASE("uniform01 stays inside (0, 1) and has the right first two moments", "[rng]") {
  const auto key = datamask::rng::block_key(42, 7);
  double sum = 0.0;
  double sum2 = 0.0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double u = datamask::rng::uniform01(key, static_cast<std::uint64_t>(i), 3u, 5u);
    REQUIRE(u > 0.0);
    REQUIRE(u < 1.0);
    sum += u;
    sum2 += u * u;
  }
  const double mean = sum / n;
  const double var = sum2 / n - mean * mean;
  // Standard errors: mean 1/sqrt(12 n); variance about 1/sqrt(180 n).
  CHECK(std::abs(mean - 0.5) < 4.0 / std::sqrt(12.0 * n));
  CHECK(std::abs(var - 1.0 / 12.0) < 4.0 * std::sqrt(1.0 / (180.0 * n)));
}

TEST_CASE("block keys differ across seeds and blocks", "[rng]") {
  using datamask::rng::block_key;
  CHECK_FALSE(block_key(1, 0) == block_key(2, 0));
  CHECK_FALSE(block_key(1, 0) == block_key(1, 1));
  CHECK(block_key(5, 9) == block_key(5, 9));
}
