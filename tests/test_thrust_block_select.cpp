// SPDX-License-Identifier: Apache-2.0
// A block's selection as every front end runs it (run/block_select.hpp) on Thrust-on-OMP against the
// CPU default: the same ids and objective for the continuous learner (facility location on a kNN
// graph included) and the policy-gradient learner, on 1 and 2 threads; evaluate_rows on the same
// backend reproduces the block's objective.
#include <catch2/catch.hpp>

#include <omp.h>

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include <datamask/run/block_select.hpp>

#include "external_replica.hpp"
#include "thrust_support.hpp"

namespace dm = datamask;
using dm::index_t;

namespace {

dm::block_run_settings block_settings(dm::block_optimizer opt, dm::objective_weights w, int threads,
                                      index_t neighbors) {
  dm::block_run_settings s;
  s.neighbors = neighbors;
  s.optimizer = opt;
  s.weights = w;
  s.run.steps = 12;
  s.run.rollouts = 16;
  s.run.min_active = 200;
  s.run.seed = 5;
  s.run.threads = threads;
  s.ascent.iterations = 25;
  return s;
}

/// `select_block<Backend>` with OpenMP's default team (Thrust's OMP system uses it) at `threads`.
template <class Backend>
dm::block_result run_block(const dm::problem<float>& p, dm::block_optimizer opt, dm::objective_weights w,
                           int threads, index_t neighbors) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  dm::block_result r = dm::select_block<Backend>(p, 3, 60, std::nullopt, block_settings(opt, w, threads, neighbors));
  omp_set_num_threads(before);
  return r;
}

std::vector<index_t> rows_of(const dm::block_result& r, const std::vector<dm::id_t>& ids) {
  std::vector<index_t> rows;
  for (dm::id_t id : r.ids) {
    rows.push_back(static_cast<index_t>(std::find(ids.begin(), ids.end(), id) - ids.begin()));
  }
  return rows;
}

}  // namespace

TEST_CASE("select_block on Thrust-on-OMP: the CPU default's ids and objective, on 1 and 2 threads",
          "[block_select][thrust]") {
  const dm_test::instance inst(900, 10, 21);
  const auto p = inst.problem();
  struct run_case {
    const char* name;
    dm::block_optimizer opt;
    dm::objective_weights w;
    index_t neighbors = 0;
  };
  const run_case cases[] = {
      {"continuous, pairwise", dm::block_optimizer::continuous, {1.0, 0.0, 0.0}},
      {"continuous, disf", dm::block_optimizer::continuous, {0.0, 0.0, 1.0}},
      {"pg, pairwise", dm::block_optimizer::pg, {1.0, 0.0, 0.0}},
      {"pg, disf", dm::block_optimizer::pg, {0.0, 0.0, 1.0}},
      {"pg, facility (rollouts)", dm::block_optimizer::pg, {0.0, 1.0, 0.0}},
      {"continuous, facility on a kNN graph", dm::block_optimizer::continuous, {0.0, 1.0, 0.0}, 10},
  };
  for (const run_case& c : cases) {
    INFO(c.name);
    const dm::block_result cpu = run_block<dm::eigen_backend>(p, c.opt, c.w, 2, c.neighbors);
    const dm::block_result one = run_block<dm::thrust_backend>(p, c.opt, c.w, 1, c.neighbors);
    const dm::block_result two = run_block<dm::thrust_backend>(p, c.opt, c.w, 2, c.neighbors);
    REQUIRE(cpu.ids.size() == 60);
    CHECK(one.ids == cpu.ids);
    CHECK(two.ids == one.ids);
    CHECK(two.objective == one.objective);
    // The rows are the same and evaluated on the host, so the raw terms are the same bits; the
    // calibrated scales may differ in the last bits (the device scores the calibration subsets
    // in double, the CPU in float: exec/backend/thrust.hpp; measured here: up to 5e-9 relative in f).
    REQUIRE(one.terms.size() == cpu.terms.size());
    for (std::size_t t = 0; t < cpu.terms.size(); ++t) {
      CHECK(one.terms[t].raw == cpu.terms[t].raw);
      CHECK(one.terms[t].scale == Approx(cpu.terms[t].scale).epsilon(1e-7));
    }
    CHECK(one.objective == Approx(cpu.objective).epsilon(1e-7));
    CHECK(one.history.size() == cpu.history.size());
    // evaluate_rows on the backend that selected gives the block's own terms and objective.
    const dm::block_result e = dm::evaluate_rows<dm::thrust_backend>(p, 3, rows_of(one, inst.ids), std::nullopt,
                                                                      block_settings(c.opt, c.w, 2, c.neighbors));
    CHECK(e.objective == one.objective);
  }
}

TEST_CASE("select_block on Thrust-on-OMP: an objective given as functions, its relaxation copied across the "
          "executor, selects the CPU default's ids", "[block_select][thrust][external]") {
  const dm_test::instance inst(700, 8, 23);
  const auto p = inst.problem();
  for (const auto opt : {dm::block_optimizer::continuous, dm::block_optimizer::pg}) {
    INFO(dm::enum_name(opt));
    dm::block_run_settings s = block_settings(opt, {0.0, 0.0, 0.0}, 2, 0);
    s.run.credit = dm::credit_mode::rollout;
    s.external = {{std::make_shared<const dm::external_objective>(
                       dmtest::pairwise_replica(std::make_shared<std::atomic<int>>(0))),
                   1.0}};
    const dm::block_result cpu = dm::select_block<dm::eigen_backend>(p, 3, 60, std::nullopt, s);
    const dm::block_result gpu_path = dm::select_block<dm::thrust_backend>(p, 3, 60, std::nullopt, s);
    REQUIRE(cpu.ids.size() == 60);
    CHECK(gpu_path.ids == cpu.ids);
    CHECK(gpu_path.objective == Approx(cpu.objective).epsilon(1e-7));
  }
}
