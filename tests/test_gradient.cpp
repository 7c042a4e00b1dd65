// SPDX-License-Identifier: Apache-2.0
// The two log-probability gradient modes of docs/method.md section 2.
//  - plackett_luce: the mean of the library's per-draw update with coef_g = f(M_g) / G is an
//    unbiased estimate of grad E[f], where the exact gradient comes from central finite
//    differences of the exactly enumerated expectation (no use of the library's formula).
//  - relaxed: L_j += sum_g coef_g 1[j in M_g] exactly, which equals the relaxed gradient
//    sum_g coef_g (1[j in M_g] - k p_j) when the coefficients sum to zero.
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "helpers.hpp"

using datamask::index_t;

namespace {

/// E[f] under Plackett-Luce draws of k from softmax(l over the active rows).
double expected_f(const dmtest::pl_block& blk, const std::vector<double>& l, index_t k,
                  const std::map<unsigned, double>& f) {
  double e = 0.0;
  dmtest::for_each_ordered_draw(blk.probs(l), k, [&](const std::vector<index_t>& order, double pr) {
    e += pr * f.at(dmtest::set_key(order));
  });
  return e;
}

}  // namespace

TEST_CASE("the plackett_luce update is an unbiased estimate of grad E[f]", "[gradient]") {
  const index_t k = GENERATE(2, 3);
  const std::uint64_t seed = 100 + static_cast<std::uint64_t>(k);
  dmtest::pl_block blk(seed);
  const index_t m = blk.m();

  // A fixed set function: a random value in [0, 3) per unordered subset (not centred, so the
  // -exp(L_j) sum 1/Z_t part of the gradient matters).
  std::map<unsigned, double> f;
  dmtest::rng r(seed + 1);
  for (const auto& s : dmtest::all_subsets(m, k)) f[dmtest::set_key(s)] = 3.0 * r.uniform();

  // Exact gradient: central differences of the enumerated expectation, h = 1e-5 (truncation
  // about h^2 = 1e-10, rounding about 1e-16 / h = 1e-11: far below the statistical error).
  std::vector<double> exact(static_cast<std::size_t>(m));
  const double h = 1e-5;
  for (index_t j = 0; j < m; ++j) {
    auto lp = blk.logits, lm = blk.logits;
    lp[blk.active[j]] += h;
    lm[blk.active[j]] -= h;
    exact[j] = (expected_f(blk, lp, k, f) - expected_f(blk, lm, k, f)) / (2.0 * h);
  }

  // Library estimate: B independent batches of G draws; each batch's logit change is the mean
  // over its draws of f * grad ln P.
  const index_t g_count = 1000;
  const int batches = 200;
  const auto key = datamask::rng::block_key(seed, 0);
  std::vector<double> sum(static_cast<std::size_t>(m), 0.0), sum2(static_cast<std::size_t>(m), 0.0);
  std::vector<index_t> subsets;
  std::vector<double> coef(static_cast<std::size_t>(g_count));
  for (int bt = 0; bt < batches; ++bt) {
    blk.b.gumbel_top_k(blk.logits, blk.ds, blk.active, key, static_cast<std::uint32_t>(bt + 1), 0u,
                       g_count, k, subsets);
    for (index_t g = 0; g < g_count; ++g) {
      std::vector<index_t> slots;
      for (index_t t = 0; t < k; ++t) slots.push_back(blk.slot(subsets[g * k + t]));
      coef[g] = f.at(dmtest::set_key(slots)) / static_cast<double>(g_count);
    }
    auto l = blk.logits;
    datamask::plackett_luce_update(blk.b, l, blk.active, subsets, g_count, k, std::span<const double>(coef));
    for (index_t i = 0; i < blk.rows; ++i) {
      if (blk.slot(i) == m) REQUIRE(l[i] == blk.logits[i]);  // inactive rows untouched
    }
    for (index_t j = 0; j < m; ++j) {
      const double est = l[blk.active[j]] - blk.logits[blk.active[j]];
      sum[j] += est;
      sum2[j] += est * est;
    }
  }
  // Alternative (wrong) gradients the test must be able to tell apart from the exact one: the
  // relaxed estimator E[f (1[j in M] - k p_j)] and the bare E[f 1[j in M]].
  const auto p = blk.probs(blk.logits);
  std::vector<double> relaxed(static_cast<std::size_t>(m), 0.0), bare(static_cast<std::size_t>(m), 0.0);
  dmtest::for_each_ordered_draw(p, k, [&](const std::vector<index_t>& order, double pr) {
    const double fv = f.at(dmtest::set_key(order));
    for (index_t j = 0; j < m; ++j) {
      const double in = std::find(order.begin(), order.end(), j) != order.end() ? 1.0 : 0.0;
      relaxed[j] += pr * fv * (in - static_cast<double>(k) * p[j]);
      bare[j] += pr * fv * in;
    }
  });
  double power_relaxed = 0.0, power_bare = 0.0;
  for (index_t j = 0; j < m; ++j) {
    const double mean = sum[j] / batches;
    const double var = (sum2[j] / batches - mean * mean) * batches / (batches - 1.0);
    const double se = std::sqrt(var / batches);
    INFO("k " << k << " item " << j << ": estimate " << mean << " +- " << se << ", exact " << exact[j]);
    CHECK(se > 0.0);
    CHECK(std::abs(mean - exact[j]) <= 4.0 * se);
    power_relaxed = std::max(power_relaxed, std::abs(relaxed[j] - exact[j]) / se);
    power_bare = std::max(power_bare, std::abs(bare[j] - exact[j]) / se);
  }
  INFO("largest gap to the relaxed gradient: " << power_relaxed << " standard errors; to the bare one: "
                                               << power_bare);
  CHECK(power_relaxed > 8.0);
  CHECK(power_bare > 8.0);
}

TEST_CASE("plackett_luce_update equals the formula of docs/method.md on each draw", "[gradient]") {
  // One draw at a time: d ln P / d L_j = 1[j in M] - exp(L_j) sum_{t <= min(k, pos_j)} 1 / Z_t,
  // checked against central differences of ln P(order) computed directly.
  dmtest::pl_block blk(42, 2.0);
  const auto key = datamask::rng::block_key(42, 0);
  for (index_t k : {1, 2, 4, 5}) {
    std::vector<index_t> subsets;
    blk.b.gumbel_top_k(blk.logits, blk.ds, blk.active, key, 9u, 0u, 6, k, subsets);
    for (index_t g = 0; g < 6; ++g) {
      std::vector<index_t> one(subsets.begin() + g * k, subsets.begin() + (g + 1) * k);
      auto l = blk.logits;
      const double c = 0.37;
      datamask::plackett_luce_update(blk.b, l, blk.active, one, 1, k, std::span<const double>(&c, 1));
      auto log_p = [&](const std::vector<double>& lg) {
        const auto p = blk.probs(lg);
        double lp = 0.0, rest = 1.0;
        for (index_t row : one) {
          const double pi = p[blk.slot(row)];
          lp += std::log(pi / rest);
          rest -= pi;
        }
        return lp;
      };
      for (index_t j = 0; j < blk.m(); ++j) {
        auto lp = blk.logits, lm = blk.logits;
        lp[blk.active[j]] += 1e-6;
        lm[blk.active[j]] -= 1e-6;
        const double want = c * (log_p(lp) - log_p(lm)) / 2e-6;
        INFO("k " << k << " rollout " << g << " item " << j);
        CHECK(l[blk.active[j]] - blk.logits[blk.active[j]] == Approx(want).margin(1e-7));
      }
    }
  }
}

TEST_CASE("the relaxed update adds sum_g coef_g 1[j in M_g] to the active logits", "[gradient]") {
  dmtest::pl_block blk(5);
  const index_t k = 2, g_count = 64;
  const auto key = datamask::rng::block_key(5, 1);
  std::vector<index_t> subsets;
  blk.b.gumbel_top_k(blk.logits, blk.ds, blk.active, key, 1u, 0u, g_count, k, subsets);
  dmtest::rng r(6);
  std::vector<double> rewards(static_cast<std::size_t>(g_count));
  for (double& v : rewards) v = r.normal();
  // Group-normalised advantages, coef_g = eta A_g / G, as the learner forms them.
  double mean = 0.0, var = 0.0;
  for (double v : rewards) mean += v;
  mean /= g_count;
  for (double v : rewards) var += (v - mean) * (v - mean);
  const double sd = std::sqrt(var / g_count);
  const double eta = 3.0;
  std::vector<double> coef(static_cast<std::size_t>(g_count));
  for (index_t g = 0; g < g_count; ++g) coef[g] = eta * (rewards[g] - mean) / (sd + 1e-8) / g_count;

  auto l = blk.logits;
  datamask::relaxed_update(blk.b, l, blk.active, subsets, g_count, k, std::span<const double>(coef));
  const auto p = blk.probs(blk.logits);
  for (index_t i = 0; i < blk.rows; ++i) {
    const index_t j = blk.slot(i);
    if (j == blk.m()) {
      CHECK(l[i] == blk.logits[i]);
      continue;
    }
    double want = 0.0, full = 0.0;
    for (index_t g = 0; g < g_count; ++g) {
      bool in = false;
      for (index_t t = 0; t < k; ++t) in = in || subsets[g * k + t] == i;
      want += in ? coef[g] : 0.0;
      full += coef[g] * ((in ? 1.0 : 0.0) - static_cast<double>(k) * p[j]);
    }
    CHECK(l[i] - blk.logits[i] == Approx(want).margin(1e-12));
    // The -k p_j part cancels because the advantages sum to zero.
    CHECK(l[i] - blk.logits[i] == Approx(full).margin(1e-12));
  }
  CHECK(l != blk.logits);

  // softmax_policy dispatches: relaxed -> relaxed_update, plackett_luce -> plackett_luce_update.
  auto l_relaxed = blk.logits, l_pl = blk.logits, l_pl_ref = blk.logits;
  datamask::softmax_policy{datamask::gradient_mode::relaxed}.update(
      blk.b, l_relaxed, blk.active, subsets, g_count, k, std::span<const double>(coef));
  CHECK(l_relaxed == l);
  datamask::softmax_policy{datamask::gradient_mode::plackett_luce}.update(
      blk.b, l_pl, blk.active, subsets, g_count, k, std::span<const double>(coef));
  datamask::plackett_luce_update(blk.b, l_pl_ref, blk.active, subsets, g_count, k, std::span<const double>(coef));
  CHECK(l_pl == l_pl_ref);
  CHECK(l_pl != l_relaxed);
}
