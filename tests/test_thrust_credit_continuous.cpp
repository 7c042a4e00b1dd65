// SPDX-License-Identifier: Apache-2.0
// Thrust on OpenMP threads against the CPU backend for the two newer optimisers: the
// policy-gradient learner with per-item credit (credit_mode::item) and the continuous learner.
// Both select the same items on both backends, and the same bits on 1 and 2 threads.
#include <catch2/catch.hpp>

#include <omp.h>

#include <utility>
#include <vector>

#include <datamask/continuous.hpp>

#include "thrust_support.hpp"

using datamask::index_t;

namespace {

datamask::options credit_options(int threads) {
  datamask::options o;
  o.ratio = 0.1;
  o.rollouts = 16;
  o.steps = 25;
  o.min_active = 300;
  o.seed = 4;
  o.threads = threads;
  o.credit = datamask::credit_mode::item;
  return o;
}

/// Runs `f(threads)` with OpenMP's default team (Thrust's OMP system uses it) set to `threads`.
template <class F>
auto with_threads(int threads, F&& f) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  auto r = f(threads);
  omp_set_num_threads(before);
  return r;
}

/// Runs `run(backend, threads)` on the CPU backend (2 threads) and on Thrust (1 and 2 threads):
/// Thrust's two runs are the same bits and select the CPU's rows. Returns (Thrust, CPU).
template <class Run>
auto thrust_and_cpu(Run&& run) {
  const auto cpu = with_threads(2, [&](int t) { return run(datamask::eigen_backend{}, t); });
  const auto one = with_threads(1, [&](int t) { return run(datamask::thrust_backend{}, t); });
  const auto two = with_threads(2, [&](int t) { return run(datamask::thrust_backend{}, t); });
  CHECK(one.rows == two.rows);
  CHECK(one.logits == two.logits);
  CHECK(one.rows == cpu.rows);
  return std::make_pair(one, cpu);
}

}  // namespace

TEMPLATE_TEST_CASE("per-item credit: Thrust-on-OMP gives the CPU backend's selection and logits", "[credit][thrust]",
                   datamask::pairwise_similarity, datamask::disf, datamask::facility_location) {
  const dm_test::instance inst(1200, 12, 5);
  const auto p = inst.problem();
  const auto [one, cpu] = thrust_and_cpu([&](auto backend, int threads) {
    return datamask::learner<decltype(backend)>(credit_options(threads)).select(p, TestType{});
  });
  // The marginals and the update are the same host code in the same order; only the calibrated
  // scales of DiSF and facility location differ in the last bits (the device scores the
  // calibration subsets in double, the CPU in float: backend/thrust.hpp), so the logits agree to
  // rounding: 1e-7 against contributions of about lr / G = 0.6 (pairwise similarity: bit for bit).
  REQUIRE(one.logits.size() == cpu.logits.size());
  for (std::size_t i = 0; i < cpu.logits.size(); ++i) CHECK(one.logits[i] == Approx(cpu.logits[i]).margin(1e-7));
}

TEMPLATE_TEST_CASE("the continuous learner on Thrust-on-OMP: the CPU backend's selection, any thread count",
                   "[continuous][thrust]", datamask::pairwise_similarity, datamask::disf) {
  const dm_test::instance inst(1500, 10, 6);
  const auto p = inst.problem();
  const auto [one, cpu] = thrust_and_cpu([&](auto backend, int threads) {
    datamask::continuous_options o;
    o.common.ratio = 0.1;
    o.common.threads = threads;
    o.ascent.iterations = 40;
    return datamask::basic_continuous_learner<decltype(backend)>(o).select(p, TestType{});
  });
  CHECK(one.objective == Approx(cpu.objective).epsilon(1e-6));
}
