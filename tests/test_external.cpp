// SPDX-License-Identifier: Apache-2.0
// external_objective (objectives/external.hpp), an objective given as functions (a Python
// metric's route), through select_block on the standard mix: a replica of pairwise similarity
// written from its definition in double gives the built-in's selection and f with every
// optimizer; the greedy baselines score a round's candidates in one batched call; a missing
// relaxation is refused where the continuous learner would need it.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <memory>
#include <vector>

#include <datamask/run/block_select.hpp>

#include "external_replica.hpp"
#include "helpers.hpp"

namespace dm = datamask;
using dm::index_t;

namespace {

dm::block_run_settings settings_for(dm::block_optimizer opt) {
  dm::block_run_settings s;
  s.optimizer = opt;
  s.run.seed = 3;
  s.run.steps = 15;
  s.run.rollouts = 16;
  s.run.lambda = 0.4;
  s.run.credit = dm::credit_mode::rollout;  // the paper's estimator: a replica has no marginals
  s.ascent.iterations = 30;
  return s;
}

}  // namespace

TEST_CASE("an objective given as functions selects what the built-in objective with its maths selects",
          "[external]") {
  const index_t n = 240, d = 6, count = 24;
  const auto x = dmtest::random_embeddings<float>(n, d, 41);
  const auto q = dmtest::random_quality(n, 42);
  dm::problem<float> p;
  p.embeddings = dm::make_matrix_view(x.data(), n, d);
  p.quality.push_back({std::span<const double>(q), 1.0});
  for (const auto opt : {dm::block_optimizer::continuous, dm::block_optimizer::pg, dm::block_optimizer::greedy,
                         dm::block_optimizer::lazy, dm::block_optimizer::stochastic}) {
    INFO(dm::enum_name(opt));
    const dm::block_run_settings builtin = settings_for(opt);
    dm::block_run_settings given = settings_for(opt);
    const auto calls = std::make_shared<std::atomic<int>>(0);
    given.external = {{std::make_shared<const dm::external_objective>(dmtest::pairwise_replica(calls)), 1.0}};
    given.weights = {0.0, 0.0, 0.0};
    const dm::block_result a = dm::select_block(p, 0, count, std::nullopt, builtin);
    const dm::block_result b = dm::select_block(p, 0, count, std::nullopt, given);
    CHECK(b.ids == a.ids);
    CHECK(b.objective == Approx(a.objective).epsilon(1e-9));
    REQUIRE(b.terms.size() == 2);
    CHECK(b.terms[1].name == "replica");
    CHECK(b.terms[1].raw == Approx(a.terms[1].raw).epsilon(1e-9));
    if (opt == dm::block_optimizer::greedy) {
      // Two calls per round (the candidates' sets S + i together, then S + the pick), plus the
      // calibration and the evaluation: never one call per candidate.
      CHECK(calls->load() <= 2 * count + 4);
    }
  }
}

TEST_CASE("an objective given without a relaxation: the continuous learner refuses it, auto does not run it",
          "[external]") {
  const auto calls = std::make_shared<std::atomic<int>>(0);
  dm::block_run_settings s = settings_for(dm::block_optimizer::continuous);
  s.external = {{std::make_shared<const dm::external_objective>(dmtest::pairwise_replica(calls, false)), 0.5}};
  s.weights = {1.0, 0.0, 0.0};
  CHECK_THROWS_WITH(dm::resolve_optimizer(s), Catch::Contains("no relaxation"));
  s.optimizer = dm::block_optimizer::automatic;
  CHECK(dm::resolve_optimizer(s) == dm::block_optimizer::stochastic);
  CHECK(dm::resolve_optimizer(s, {1000, 8, 10}) == dm::block_optimizer::stochastic);  // no cost model: no greedy
  s.run.lambda = 1.0;  // quality alone: the objective does not count
  CHECK(dm::resolve_optimizer(s) == dm::block_optimizer::continuous);
  // Every term without a relaxation is named, and what each needs.
  dm::block_run_settings two = settings_for(dm::block_optimizer::continuous);
  dm::external_objective a = dmtest::pairwise_replica(calls, false);
  a.label = "a";
  dm::external_objective b = a;
  b.label = "b";
  two.external = {{std::make_shared<const dm::external_objective>(a), 1.0},
                  {std::make_shared<const dm::external_objective>(b), 1.0}};
  two.weights = {0.0, 1.0, 0.0};  // dense facility location beside them
  CHECK_THROWS_WITH(dm::resolve_optimizer(two),
                    Catch::Contains("continuous: dense facility location, a and b have no relaxation; give facility "
                                    "location a kNN graph and the others a relaxation"));
  two.weights = {1.0, 0.0, 0.0};
  CHECK_THROWS_WITH(dm::resolve_optimizer(two), Catch::Contains("continuous: a and b have no relaxation; give them one"));
}
