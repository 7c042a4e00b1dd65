// SPDX-License-Identifier: Apache-2.0
// The learner, one loop templated over the backend: the same behavioural checks run on the CPU
// backend and on the Thrust backend.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "thrust_support.hpp"

using datamask::index_t;

namespace {
datamask::settings small_options() {
  datamask::settings o;
  o.ratio = 0.1;
  o.rollouts = 32;
  o.steps = 40;
  o.active_fraction = 0.25;
  o.min_active = 200;
  o.seed = 3;
  return o;
}
}  // namespace

TEMPLATE_TEST_CASE("quality-only selection is exactly the top S by quality", "[learner][backend]",
                   datamask::eigen_backend, datamask::thrust_backend) {
  const dm_test::instance inst(500, 8, 1);
  auto o = small_options();
  o.lambda = 1.0;
  const auto res = datamask::learner<TestType>(o).select(inst.problem(), datamask::pairwise_similarity{});  // lambda = 1: diversity off
  std::vector<index_t> order(static_cast<std::size_t>(inst.n));
  std::iota(order.begin(), order.end(), index_t{0});
  std::sort(order.begin(), order.end(), [&](index_t a, index_t b) { return inst.q[a] > inst.q[b]; });
  order.resize(50);
  REQUIRE(res.rows.size() == 50);
  CHECK(std::set<index_t>(res.rows.begin(), res.rows.end()) == std::set<index_t>(order.begin(), order.end()));
}

TEMPLATE_TEST_CASE("learning PWS selects a more diverse set than random subsets", "[learner][backend]",
                   datamask::eigen_backend, datamask::thrust_backend) {
  const dm_test::instance inst(1000, 10, 2);
  auto o = small_options();
  o.lambda = 0.0;
  o.steps = 60;
  const auto res = datamask::learner<TestType>(o).select(inst.problem(), datamask::pairwise_similarity{});
  REQUIRE(res.rows.size() == 100);
  REQUIRE(std::set<index_t>(res.rows.begin(), res.rows.end()).size() == 100);
  const datamask::objective_function<float, datamask::pairwise_similarity> f(inst.problem(), {}, 0.0);
  const double learned = f(res.rows);
  std::mt19937_64 gen(9);
  std::vector<index_t> rows(static_cast<std::size_t>(inst.n));
  std::iota(rows.begin(), rows.end(), index_t{0});
  double best_random = -1e300;
  for (int r = 0; r < 20; ++r) {
    std::shuffle(rows.begin(), rows.end(), gen);
    best_random = std::max(best_random, f(std::span<const index_t>(rows.data(), 100)));
  }
  CHECK(learned > best_random);
  CHECK(res.evaluated);
  REQUIRE(res.terms.size() == 1);
  CHECK(res.terms[0].raw == Approx(learned).epsilon(1e-9));  // objective = raw / calibrated scale
}

TEMPLATE_TEST_CASE("a run is a pure function of its seed, in both gradient modes",
                   "[learner][backend]", datamask::eigen_backend, datamask::thrust_backend) {
  const dm_test::instance inst(600, 8, 4);
  auto o = small_options();
  for (auto mode : {datamask::gradient_mode::relaxed, datamask::gradient_mode::plackett_luce}) {
    const datamask::learner<TestType> l(o, datamask::softmax_policy{mode});
    const auto a = l.select(inst.problem(), datamask::pairwise_similarity{});
    const auto b = l.select(inst.problem(), datamask::pairwise_similarity{});
    CHECK(a.ids == b.ids);
    CHECK(a.logits == b.logits);
    CHECK(std::set<index_t>(a.rows.begin(), a.rows.end()).size() == 60);
    CHECK(a.steps_run == o.steps);
  }
}
