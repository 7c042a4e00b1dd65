// SPDX-License-Identifier: Apache-2.0
// eigen_backend::gumbel_top_k draws the Plackett-Luce distribution: the empirical frequencies of
// 200,000 draws (every (step, stream) pair is an independent draw) match the exactly enumerated
// probabilities of every unordered subset and every ordered pair within 4 standard errors.
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "helpers.hpp"

using datamask::index_t;

TEST_CASE("gumbel_top_k draws k = 2 of n = 5 with the Plackett-Luce probabilities", "[sampler]") {
  const std::uint64_t seed = GENERATE(1u, 2u);
  dmtest::pl_block blk(seed);
  const index_t k = 2;
  const index_t g_count = 2000;
  const std::uint32_t steps = 100;
  const auto key = datamask::rng::block_key(seed, 3);
  const auto p = blk.probs(blk.logits);

  std::map<std::pair<index_t, index_t>, long> ordered;  // slots in draw order
  std::map<unsigned, long> unordered;
  std::vector<index_t> out;
  long total = 0;
  for (std::uint32_t step = 1; step <= steps; ++step) {
    blk.b.gumbel_top_k(blk.logits, blk.ds, blk.active, key, step, 0u, g_count, k, out);
    REQUIRE(static_cast<index_t>(out.size()) == g_count * k);
    for (index_t g = 0; g < g_count; ++g) {
      const index_t a = blk.slot(out[g * k]);
      const index_t b = blk.slot(out[g * k + 1]);
      REQUIRE(a < blk.m());  // only active rows are drawn
      REQUIRE(b < blk.m());
      REQUIRE(a != b);       // without replacement
      ++ordered[{a, b}];
      ++unordered[dmtest::set_key({a, b})];
      ++total;
    }
  }
  REQUIRE(total == 200000);
  const double n = static_cast<double>(total);

  // Exact: P(a then b) = p_a p_b / (1 - p_a); P({a, b}) = P(a then b) + P(b then a).
  std::map<unsigned, double> exact_set;
  int checked = 0;
  for (index_t a = 0; a < blk.m(); ++a) {
    for (index_t b = 0; b < blk.m(); ++b) {
      if (a == b) continue;
      const double pab = p[a] * p[b] / (1.0 - p[a]);
      exact_set[dmtest::set_key({a, b})] += pab;
      const double freq = static_cast<double>(ordered[{a, b}]) / n;
      const double se = std::sqrt(pab * (1.0 - pab) / n);
      INFO("ordered pair (" << a << ", " << b << "): frequency " << freq << ", exact " << pab);
      CHECK(std::abs(freq - pab) <= 4.0 * se);
      ++checked;
    }
  }
  CHECK(checked == 20);
  double sum = 0.0;
  for (const auto& [s, prob] : exact_set) {
    const double freq = static_cast<double>(unordered[s]) / n;
    const double se = std::sqrt(prob * (1.0 - prob) / n);
    INFO("subset mask " << s << ": frequency " << freq << ", exact " << prob);
    CHECK(std::abs(freq - prob) <= 4.0 * se);
    sum += prob;
  }
  CHECK(exact_set.size() == 10);
  CHECK(sum == Approx(1.0).epsilon(1e-12));

  // Power: the test separates PL from a plausible wrong sampler. Independent draws with
  // replacement, conditioned on a != b, give P(a then b) = p_a p_b / (1 - sum p^2), which differs.
  double sum_sq = 0.0;
  for (double v : p) sum_sq += v * v;
  double worst = 0.0;
  for (index_t a = 0; a < blk.m(); ++a) {
    for (index_t b = 0; b < blk.m(); ++b) {
      if (a == b) continue;
      const double pab = p[a] * p[b] / (1.0 - p[a]);
      const double alt = p[a] * p[b] / (1.0 - sum_sq);
      worst = std::max(worst, std::abs(pab - alt) / std::sqrt(pab * (1.0 - pab) / n));
    }
  }
  CHECK(worst > 8.0);
}

TEST_CASE("gumbel_top_k: rows in draw order, streams independent, a pure function of its key",
          "[sampler]") {
  dmtest::pl_block blk(7);
  const auto key = datamask::rng::block_key(7, 0);
  std::vector<index_t> a, b, c;
  blk.b.gumbel_top_k(blk.logits, blk.ds, blk.active, key, 5u, 0u, 64, 3, a);
  // The same (step, stream) with another thread count and as a later stream range: same rows.
  datamask::eigen_backend one;
  one.threads = 2;
  one.gumbel_top_k(blk.logits, blk.ds, blk.active, key, 5u, 0u, 64, 3, b);
  CHECK(a == b);
  blk.b.gumbel_top_k(blk.logits, blk.ds, blk.active, key, 5u, 10u, 20, 3, c);
  for (index_t g = 0; g < 20; ++g) {
    for (index_t t = 0; t < 3; ++t) CHECK(c[g * 3 + t] == a[(g + 10) * 3 + t]);
  }
  // Draw order: key_i = L_i + gumbel(id_i) decreasing along each row.
  for (index_t g = 0; g < 64; ++g) {
    double prev = std::numeric_limits<double>::infinity();
    for (index_t t = 0; t < 3; ++t) {
      const index_t r = a[g * 3 + t];
      const double kv = blk.logits[r] + datamask::rng::gumbel(key, blk.ids[r], 5u, static_cast<std::uint32_t>(g));
      CHECK(kv <= prev);
      prev = kv;
    }
  }
  // k = m: every active row exactly once.
  blk.b.gumbel_top_k(blk.logits, blk.ds, blk.active, key, 1u, 0u, 8, blk.m(), c);
  for (index_t g = 0; g < 8; ++g) {
    std::vector<index_t> row(c.begin() + g * blk.m(), c.begin() + (g + 1) * blk.m());
    std::sort(row.begin(), row.end());
    CHECK(row == blk.active);
  }
}
