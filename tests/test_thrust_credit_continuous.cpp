// SPDX-License-Identifier: Apache-2.0
// Thrust on OpenMP threads against the CPU backend for the two newer optimisers: the
// policy-gradient learner with per-item credit (credit_mode::item) and the continuous learner.
// Both select the same items on both backends, and the same bits on 1 and 2 threads. The
// continuous learner's code is one definition run on each backend's executor; its parts (the
// relaxations, the projections) are checked on the two executors side by side.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <datamask/learners/continuous.hpp>

#include "centred_mean.hpp"  // examples/
#include "thrust_support.hpp"

using datamask::index_t;

namespace {

datamask::settings credit_options(int threads) {
  datamask::settings o;
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

/// The rows of [0, n) but every fifth (pruned): the candidates of the tests below.
std::vector<index_t> every_fifth_pruned(index_t n) {
  std::vector<index_t> rows;
  for (index_t i = 0; i < n; ++i) {
    if (i % 5 != 0) rows.push_back(i);
  }
  return rows;
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
  // calibration subsets in double, the CPU in float: exec/backend/thrust.hpp), so the logits agree to
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

TEMPLATE_TEST_CASE("a float16 block on Thrust-on-OMP: the CPU backend's selection of its float32 twin",
                   "[continuous][thrust][half]", datamask::pairwise_similarity, datamask::disf) {
  // The block rounded to float16 and the float32 block of the same values: the ascent, its
  // read-outs and the polish read each value as the float it is, so the same run on Thrust; and
  // the CPU backend's f, as for float32 blocks (the test above).
  const dm_test::instance inst(1500, 10, 7);
  std::vector<datamask::float16> low;
  std::vector<float> wide;
  for (float v : inst.x) {
    low.push_back(datamask::float16::from(v));
    wide.push_back(low.back());
  }
  const auto with = [&](const auto& values) {
    const auto p = inst.problem();
    datamask::problem<typename std::decay_t<decltype(values)>::value_type> q;
    q.embeddings = datamask::make_matrix_view(values.data(), inst.n, inst.d);
    q.quality = p.quality;
    q.ids = p.ids;
    return q;
  };
  datamask::continuous_options o;
  o.common.ratio = 0.1;
  o.common.threads = 2;
  o.ascent.iterations = 40;
  const auto thrust_low =
      datamask::basic_continuous_learner<datamask::thrust_backend>(o).select(with(low), TestType{});
  const auto thrust_wide =
      datamask::basic_continuous_learner<datamask::thrust_backend>(o).select(with(wide), TestType{});
  const auto cpu_wide = datamask::basic_continuous_learner<datamask::eigen_backend>(o).select(with(wide), TestType{});
  CHECK(thrust_low.rows == thrust_wide.rows);
  CHECK(thrust_low.objective == thrust_wide.objective);
  CHECK(thrust_low.objective == Approx(cpu_wide.objective).epsilon(1e-6));
}

namespace {

/// p with zeros (non-candidates), ones and fractions.
std::vector<double> random_p(index_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> p(static_cast<std::size_t>(n));
  for (auto& v : p) {
    const double r = u(gen);
    v = r < 0.2 ? 0.0 : (r < 0.3 ? 1.0 : u(gen));
  }
  return p;
}

/// The instance's rows on the Thrust backend, with the host's prepared norms.
auto device_dataset(const datamask::thrust_backend& b, const dm_test::instance& inst,
                    const datamask::detail::prepared& prep) {
  return b.make_dataset(inst.problem().embeddings, std::span<const double>(prep.inv_norms),
                        std::span<const double>(prep.sq_norms), std::span<const datamask::id_t>(prep.ids));
}

}  // namespace

TEMPLATE_TEST_CASE("a relaxation through the Thrust executor is the host executor's, the same bits on 1 and 2 threads",
                   "[continuous][thrust][relax]", datamask::pairwise_similarity, datamask::disf) {
  // Three chunks of the column sums; below float_product_rows, so DiSF's host products are in
  // double too.
  const dm_test::instance inst(3000, 10, 8);
  static_assert(3000 < datamask::float_product_rows);
  const auto prep = datamask::detail::prepare(inst.problem(), false, 1);
  const std::vector<double> p = random_p(inst.n, 3);
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  const datamask::relax_view<float> hv{inst.problem().embeddings, prep.inv_norms.data(), prep.sq_norms.data(), p,
                                       total, 1};
  std::vector<double> host_grad(static_cast<std::size_t>(inst.n));
  const double host_value = datamask::relax_on_host(TestType{}, hv, std::span<double>(host_grad));
  auto device = [&](int threads) {
    return with_threads(threads, [&](int) {
      const datamask::thrust_backend b;
      const auto ds = device_dataset(b, inst, prep);
      auto exec = b.make_executor(ds);
      datamask::relax_view<float> v = b.relaxation_view(ds);
      v.p = std::span<const double>(exec.upload(std::span<const double>(p)), p.size());
      v.total = total;
      double* grad = exec.scratch<double>(inst.n);
      const double value = TestType{}.relax(exec, v, grad);
      std::vector<double> g(static_cast<std::size_t>(inst.n));
      exec.download(static_cast<const double*>(grad), std::span<double>(g));
      return std::make_pair(value, g);
    });
  };
  const auto one = device(1);
  const auto two = device(2);
  CHECK(one.first == two.first);
  CHECK(one.second == two.second);
  CHECK(host_value != 0.0);
  if constexpr (std::is_same_v<TestType, datamask::pairwise_similarity>) {
    // The same passes and sums on both executors (the column sums in the same chunks, the dots
    // in the same lanes): the same bits.
    CHECK(one.first == host_value);
    CHECK(one.second == host_grad);
  } else {
    // DiSF's d x d products: Eigen's blocked kernels on the host, the generic passes here.
    CHECK(one.first == Approx(host_value).epsilon(1e-10));
    double scale = 0.0;
    for (double g : host_grad) scale = std::max(scale, std::abs(g));
    for (index_t i = 0; i < inst.n; ++i) CHECK(one.second[i] == Approx(host_grad[i]).margin(1e-10 * scale));
  }
}

TEST_CASE("the pairwise bound through the Thrust executor is the host executor's, the same bits on 1 and 2 threads",
          "[certify][thrust]") {
  // Frank-Wolfe on the concave relaxation (objectives/detail/pairwise_bound.hpp): the column
  // sums, the row dots, the reduces of its threshold and the functors, one definition.
  const dm_test::instance inst(3000, 10, 8);
  const auto prep = datamask::detail::prepare(inst.problem(), false, 1);
  const std::vector<double> linear = random_p(inst.n, 5);  // any modular part
  std::vector<index_t> selection;
  for (index_t i = 0; i < inst.n; i += 10) selection.push_back(i);
  const auto size = static_cast<index_t>(selection.size());
  const datamask::bound_view<float> hv{inst.problem().embeddings, prep.inv_norms.data(), prep.sq_norms.data(), linear,
                                       2.0, size, selection, 20, 1};
  const datamask::bound_certificate host = datamask::pairwise_similarity{}.bound(hv);
  auto device = [&](int threads) {
    return with_threads(threads, [&](int) {
      const datamask::thrust_backend b;
      const auto ds = device_dataset(b, inst, prep);
      auto exec = b.make_executor(ds);
      const datamask::relax_view<float> rv = b.relaxation_view(ds);
      const datamask::bound_view<float> v{
          rv.embeddings, rv.inv_norms, rv.sq_norms,
          std::span<const double>(exec.upload(std::span<const double>(linear)), linear.size()), 2.0, size,
          std::span<const index_t>(exec.upload(std::span<const index_t>(selection)), selection.size()), 20, threads};
      return datamask::pairwise_similarity{}.bound(exec, v);
    });
  };
  const datamask::bound_certificate one = device(1);
  const datamask::bound_certificate two = device(2);
  CHECK(one.evaluations == host.evaluations);
  CHECK(one.bound == two.bound);
  CHECK(one.certificate == two.certificate);
  CHECK(one.bound == host.bound);
  CHECK(one.certificate == host.certificate);
  CHECK(datamask::pairwise_similarity{}.check_bound(hv, one.certificate) == Approx(one.bound).epsilon(1e-12));
}

TEST_CASE("the projections: the same bits on the host executor and the Thrust executor, any thread count",
          "[continuous][thrust][relax]") {
  const index_t n = 5000;
  std::mt19937 gen(11);
  std::normal_distribution<double> z(0.0, 1.5);
  std::vector<double> y(static_cast<std::size_t>(n));
  for (auto& v : y) v = z(gen);
  const std::vector<index_t> cand = every_fifth_pruned(n);
  const double s = 400.0;
  auto project = [&](auto& exec) {
    const auto m = static_cast<index_t>(cand.size());
    const datamask::candidate_rows c{exec.upload(std::span<const index_t>(cand)), m, exec.template scratch<index_t>(m)};
    double* dy = exec.upload(std::span<const double>(y));
    std::vector<double> zeros(static_cast<std::size_t>(n), 0.0);
    double* dp = exec.upload(std::span<const double>(zeros));
    double* dl = exec.upload(std::span<const double>(zeros));
    (void)datamask::project_capped_simplex(exec, c, dy, s, dp, false);
    const double tau = datamask::sigmoid_shift(exec, c, dy, s, dl);
    std::vector<double> p(zeros);
    std::vector<double> l(zeros);
    exec.download(static_cast<const double*>(dp), std::span<double>(p));
    exec.download(static_cast<const double*>(dl), std::span<double>(l));
    return std::make_tuple(p, l, tau);
  };
  auto on_thrust = [&](int threads) {
    return with_threads(threads, [&](int) {
      datamask::thrust_backend::executor exec;
      return project(exec);
    });
  };
  datamask::host_executor host(2);
  const auto [hp, hl, htau] = project(host);
  const auto [p1, l1, tau1] = on_thrust(1);
  const auto [p2, l2, tau2] = on_thrust(2);
  CHECK(p1 == p2);
  CHECK(l1 == l2);
  CHECK(tau1 == tau2);
  CHECK(p1 == hp);
  CHECK(l1 == hl);
  CHECK(tau1 == htau);
  CHECK(std::accumulate(p1.begin(), p1.end(), 0.0) == Approx(s).epsilon(1e-12));
  index_t ones = 0;
  for (index_t i = 0; i < n; ++i) ones += p1[i] == 1.0 ? 1 : 0;
  CHECK(ones > 0);  // the projection is not trivially interior
}

TEMPLATE_TEST_CASE("the continuous ascent on the Thrust executor: the CPU backend's selection and f, any settings",
                   "[continuous][thrust]", datamask::pairwise_similarity, datamask::disf) {
  const dm_test::instance inst(2000, 16, 9);
  const auto p = inst.problem();
  auto settings = [](int threads, datamask::step_rule rule, datamask::continuous_parameterization par) {
    datamask::continuous_options o;
    o.common.ratio = 0.1;
    o.common.threads = threads;
    o.ascent.iterations = 30;
    o.ascent.rule = rule;
    o.ascent.parameterization = par;
    o.polish.enabled = false;  // shared host code; the swap gains of the user type below are generic
    return o;
  };
  using datamask::continuous_parameterization;
  using datamask::step_rule;
  for (const auto& [rule, par] : {std::pair{step_rule::normalized, continuous_parameterization::projected},
                                  std::pair{step_rule::adam, continuous_parameterization::projected},
                                  std::pair{step_rule::plain, continuous_parameterization::logits}}) {
    const auto [one, cpu] = thrust_and_cpu([&](auto backend, int threads) {
      return datamask::basic_continuous_learner<decltype(backend)>(settings(threads, rule, par))
          .select(p, TestType{});
    });
    CHECK(one.objective == Approx(cpu.objective).epsilon(1e-7));
    // F per iteration: to rounding for pairwise similarity; DiSF's calibrated scale differs in
    // about the eighth digit (the device scores the calibration subsets in double, the CPU in
    // float: exec/backend/thrust.hpp), and F with it.
    const double tol = std::is_same_v<TestType, datamask::disf> ? 1e-7 : 1e-9;
    REQUIRE(one.history.size() == cpu.history.size());
    for (std::size_t t = 0; t < cpu.history.size(); ++t)
      CHECK(one.history[t].reward_mean == Approx(cpu.history[t].reward_mean).epsilon(tol).margin(tol));
  }
}

TEST_CASE("the ascent on the Thrust executor resumed from a snapshot gives the uninterrupted run", "[continuous][thrust]") {
  const dm_test::instance inst(1500, 12, 4);
  const auto p = inst.problem();
  datamask::continuous_options o;
  o.common.ratio = 0.1;
  o.ascent.iterations = 30;
  o.ascent.rule = datamask::step_rule::adam;
  o.ascent.track_every = 7;
  std::optional<datamask::resume_point> saved;
  std::vector<datamask::step_record> history;
  datamask::optimizer_hooks h;
  h.snapshot_every = 10;
  h.on_step = [&](const datamask::step_record& r) { history.push_back(r); };
  h.on_snapshot = [&](index_t iteration, std::span<const double> state, const datamask::best_rollout& b) {
    if (iteration == 20) saved = datamask::resume_point{iteration, {state.begin(), state.end()}, b, history};
  };
  const datamask::basic_continuous_learner<datamask::thrust_backend> learner(o);
  const auto full = learner.select(p, datamask::pairwise_similarity{}, h);
  REQUIRE(saved);
  REQUIRE(saved->history.size() == 20u);
  const auto resumed = learner.select(p, datamask::pairwise_similarity{}, {}, &*saved);
  CHECK(resumed.rows == full.rows);
  CHECK(resumed.objective == full.objective);
  REQUIRE(resumed.history.size() == full.history.size());
  for (std::size_t t = 0; t < full.history.size(); ++t) CHECK(resumed.history[t].reward_mean == full.history[t].reward_mean);
}

namespace {
/// Thrust on OpenMP, declared as a backend that leaves the host free (as under CUDA): the
/// continuous learner's stochastic-greedy start then runs on a thread of its own beside the ascent.
struct thrust_beside : datamask::thrust_backend {
  static constexpr bool frees_host = true;
};
}  // namespace

TEST_CASE("the stochastic-greedy start beside the ascent: stochastic greedy's rows, the selection of the run after "
          "the ascent", "[continuous][thrust][polish]") {
  using TestType = datamask::pairwise_similarity;  // a block on which the start is the best of the three
  static_assert(datamask::backend_frees_host<thrust_beside>);
  static_assert(!datamask::backend_frees_host<datamask::thrust_backend>);  // OpenMP's threads are the host's
  static_assert(!datamask::backend_frees_host<datamask::eigen_backend>);
  const dm_test::instance inst(1500, 10, 8);
  const auto p = inst.problem();
  datamask::continuous_options o;
  o.common.ratio = 0.1;
  o.common.scaling = datamask::term_scaling::raw;  // f's scales are 1: the test's f is the learner's
  o.ascent.iterations = 1;  // a poor read-out: stochastic greedy's start is the best of the three
  o.polish.rounds = 0;      // the starts as they are
  const auto beside = datamask::basic_continuous_learner<thrust_beside>(o).select(p, TestType{});
  const auto after = datamask::basic_continuous_learner<datamask::thrust_backend>(o).select(p, TestType{});
  CHECK(beside.rows == after.rows);
  CHECK(beside.objective == after.objective);
  // The reference: stochastic greedy on f, keyed as the learner keys its start.
  const datamask::objective_function<float, TestType> f(p, TestType{}, o.common.lambda);
  datamask::greedy_options g;
  g.method = datamask::greedy_method::stochastic;
  g.epsilon = o.common.epsilon;
  g.seed = datamask::greedy_seed(o.common);
  std::vector<index_t> want = datamask::greedy_select(f, inst.n / 10, g).rows;
  std::vector<index_t> got = beside.rows;
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  CHECK(got == want);
  // Without the start the run selects something else: the start was used.
  o.polish.stochastic_start = false;
  const auto without = datamask::basic_continuous_learner<thrust_beside>(o).select(p, TestType{});
  CHECK(without.objective < beside.objective);
}

TEST_CASE("a stopped run abandons the start beside the ascent and selects what the run after the ascent selects",
          "[continuous][thrust][polish]") {
  const dm_test::instance inst(1500, 10, 8);
  const auto p = inst.problem();
  datamask::continuous_options o;
  o.common.ratio = 0.1;
  o.common.scaling = datamask::term_scaling::raw;  // f's scales are 1: the test's f is the learner's
  o.ascent.iterations = 50;
  o.polish.rounds = 0;  // the starts as they are: the best of them by f
  auto stopped = [&](auto backend) {
    index_t steps = 0;
    datamask::optimizer_hooks h;
    h.on_step = [&](const datamask::step_record&) { ++steps; };
    h.stop = [&] { return steps >= 1; };
    return datamask::basic_continuous_learner<decltype(backend)>(o).select(p, datamask::pairwise_similarity{}, h);
  };
  const auto beside = stopped(thrust_beside{});
  const auto after = stopped(datamask::thrust_backend{});
  CHECK(beside.stopped_early);
  CHECK(beside.steps_run == 1);
  CHECK(beside.rows == after.rows);
  CHECK(beside.objective == after.objective);
  // Kept, the start would have won (stochastic greedy's set has the larger f): it was dropped.
  const datamask::objective_function<float, datamask::pairwise_similarity> f(p, datamask::pairwise_similarity{},
                                                                             o.common.lambda);
  datamask::greedy_options g;
  g.method = datamask::greedy_method::stochastic;
  g.epsilon = o.common.epsilon;
  g.seed = datamask::greedy_seed(o.common);
  const std::vector<index_t> start = datamask::greedy_select(f, inst.n / 10, g).rows;
  CHECK(beside.objective < f(std::span<const index_t>(start)));
}

TEST_CASE("a user's relaxation written with the executor's passes runs the continuous learner on both backends",
          "[continuous][thrust][relax]") {
  // examples/centred_mean.hpp: host code only (the executor's products, a library functor, a
  // reduce), no device code of its own.
  static_assert(datamask::relaxable_objective<centred_mean, float>);
  const dm_test::instance inst(1500, 12, 3);
  const auto p = inst.problem();
  const auto diversity = datamask::mix(datamask::weighted{centred_mean{}, 1.0},
                                       datamask::weighted{datamask::pairwise_similarity{}, 1.0});
  const auto [one, cpu] = thrust_and_cpu([&](auto backend, int threads) {
    datamask::continuous_options o;
    o.common.ratio = 0.1;
    o.common.threads = threads;
    o.ascent.iterations = 30;
    return datamask::basic_continuous_learner<decltype(backend)>(o).select(p, diversity);
  });
  CHECK(one.objective == cpu.objective);
  REQUIRE(one.history.size() == cpu.history.size());
  for (std::size_t t = 0; t < cpu.history.size(); ++t) CHECK(one.history[t].reward_mean == cpu.history[t].reward_mean);
  // Its gradient is the derivative of its value: central differences on the host executor.
  const auto prep = datamask::detail::prepare(p, false, 1);
  std::vector<double> q = random_p(inst.n, 5);
  const double total = std::accumulate(q.begin(), q.end(), 0.0);
  auto at = [&](const std::vector<double>& pv, std::vector<double>& g) {
    const datamask::relax_view<float> v{p.embeddings, prep.inv_norms.data(), prep.sq_norms.data(), pv, total, 1};
    return datamask::relax_on_host(centred_mean{}, v, std::span<double>(g));
  };
  std::vector<double> grad(static_cast<std::size_t>(inst.n));
  std::vector<double> scratch(grad.size());
  (void)at(q, grad);
  for (index_t i : {index_t{0}, index_t{17}, index_t{901}}) {
    const double h = 1e-4;
    std::vector<double> up(q);
    std::vector<double> down(q);
    up[i] += h;
    down[i] -= h;
    CHECK(grad[i] == Approx((at(up, scratch) - at(down, scratch)) / (2.0 * h)).epsilon(1e-6).margin(1e-10));
  }
}

TEMPLATE_TEST_CASE("the tracked read-outs: the best of every iterate's read-out by f, on both backends",
                   "[continuous][thrust]", datamask::eigen_backend, datamask::thrust_backend) {
  // The reference: each snapshot's p read out (`read_out`: the S largest, ties to the smaller
  // id) and scored by f built in the test; the tracked best must be the first iterate's
  // read-out with the largest f so far. Projected p has exact zeros (the read-out takes the
  // positive rows); sigmoid p has none (it takes every kept row). The second block's S (1,200)
  // is more than a subset sum's chunk (core/detail/chunked_sum.hpp): f of a read-out is then
  // summed in chunks on the backend.
  const auto [n, d] = GENERATE(std::make_pair(index_t{1200}, index_t{12}), std::make_pair(index_t{12000}, index_t{6}));
  const dm_test::instance inst(n, d, 17);
  const auto p = inst.problem();
  for (const auto par : {datamask::continuous_parameterization::projected, datamask::continuous_parameterization::logits}) {
    datamask::continuous_options o;
    o.common.ratio = 0.1;
    o.common.scaling = datamask::term_scaling::raw;  // f's scales are 1: the test's f is the learner's
    o.ascent.iterations = 25;
    o.ascent.parameterization = par;
    o.ascent.rule = par == datamask::continuous_parameterization::logits ? datamask::step_rule::plain
                                                                         : datamask::step_rule::normalized;
    const datamask::objective_function<float, datamask::pairwise_similarity> f(p, datamask::pairwise_similarity{},
                                                                               o.common.lambda);
    std::vector<index_t> all(static_cast<std::size_t>(inst.n));
    std::iota(all.begin(), all.end(), index_t{0});
    const index_t s = inst.n / 10;
    std::vector<index_t> want;
    double want_f = -std::numeric_limits<double>::infinity();
    index_t snapshots = 0;
    datamask::optimizer_hooks h;
    h.snapshot_every = 1;
    h.on_snapshot = [&](index_t, std::span<const double> state, const datamask::best_rollout& best) {
      // The packed iterate begins with p, one value per row (continuous_iterate::pack).
      std::vector<index_t> r = datamask::read_out(state.first(static_cast<std::size_t>(inst.n)), f.ids(), all, s);
      const double fr = f(std::span<const index_t>(r));
      if (fr > want_f) {
        want_f = fr;
        want = r;
      }
      if constexpr (std::is_same_v<TestType, datamask::eigen_backend>) {
        CHECK(best.rows == want);  // f by the same host code as the test's
      } else {
        // The device sums f in another order: two iterates that read out the same set (in
        // different orders) tie to rounding, and either may be kept.
        std::vector<index_t> got = best.rows;
        std::vector<index_t> expected = want;
        std::sort(got.begin(), got.end());
        std::sort(expected.begin(), expected.end());
        CHECK(got == expected);
      }
      CHECK(best.reward == Approx(want_f).epsilon(1e-12));
      CHECK(want.size() == static_cast<std::size_t>(s));
      ++snapshots;
    };
    (void)datamask::basic_continuous_learner<TestType>(o).select(p, datamask::pairwise_similarity{}, h);
    CHECK(snapshots == 25);
  }
}

TEMPLATE_TEST_CASE("the polish's ranking chooses on the backend what the host's order of the keys chooses",
                   "[continuous][thrust][polish]", datamask::eigen_backend, datamask::thrust_backend) {
  // The reference: each side's rows by the key (the relaxation's gradient at the selection, or
  // keys given with ties and signed zeros), ties to the smaller id (`top_by`); candidates skip
  // every fifth row (pruned), and the choices follow the selection through swaps.
  const dm_test::instance inst(900, 8, 3);
  const auto p = inst.problem();
  const datamask::objective_function<float, datamask::pairwise_similarity> f(p, datamask::pairwise_similarity{}, 0.5);
  const std::vector<index_t> candidates = every_fifth_pruned(inst.n);
  std::vector<index_t> selection;
  for (std::size_t c = 0; c < candidates.size(); c += 8) selection.push_back(candidates[c]);
  const auto s = static_cast<index_t>(selection.size());
  const TestType b{};
  const auto ds = b.make_dataset(p.embeddings, f.inv_norms(), f.sq_norms(), f.ids());
  auto exec = b.make_executor(ds);
  const double* quality = exec.upload(f.quality());
  const auto relaxation = datamask::relaxation_of(f, s, b.relaxation_view(ds), quality);
  const auto cand = b.to_device(std::span<const index_t>(candidates));
  datamask::polish_ranking rank(b, ds, exec, relaxation, inst.n, TestType::data(cand),
                                static_cast<index_t>(candidates.size()), quality);
  const auto host_relaxed = datamask::relaxed_objective(f, s, 1);
  auto expect = [&](std::span<const double> key, index_t c) {
    std::vector<index_t> outside;
    for (index_t i : candidates) {
      if (std::find(selection.begin(), selection.end(), i) == selection.end()) outside.push_back(i);
    }
    namespace dc = datamask::detail::continuous;
    CHECK(rank.best_outside(c) == dc::top_by(key, f.ids(), outside, c, true));
    CHECK(rank.worst_inside(c) == dc::top_by(key, f.ids(), selection, c, false));
  };
  auto gradient = [&] {
    std::vector<double> at(static_cast<std::size_t>(inst.n), 0.0);
    for (index_t i : selection) at[i] = 1.0;
    std::vector<double> grad(at.size());
    (void)host_relaxed(std::span<const double>(at), std::span<double>(grad));
    return grad;
  };
  rank.start(selection);
  rank.refresh();
  expect(gradient(), 16);
  expect(gradient(), 1);
  for (const auto& [at, a] : {std::pair{index_t{3}, candidates[5]}, std::pair{index_t{7}, candidates[9]}}) {
    rank.swap(at, a);
    selection[static_cast<std::size_t>(at)] = a;
  }
  rank.refresh();
  expect(gradient(), 16);
  std::vector<double> keys(static_cast<std::size_t>(inst.n));
  for (index_t i = 0; i < inst.n; ++i) keys[i] = i % 4 == 0 ? (i % 8 == 0 ? 0.0 : -0.0) : static_cast<double>(i % 3);
  rank.refresh(std::span<const double>(keys));
  expect(keys, 40);
  expect(keys, static_cast<index_t>(candidates.size()));  // more than either side holds: all of it
  CHECK(rank.worst_inside(s + 5).size() == static_cast<std::size_t>(s));
  CHECK(rank.best_outside(0).empty());
  CHECK_THROWS_AS(rank.swap(s, candidates[2]), datamask::invalid_input);  // not a position of the selection
}

TEMPLATE_TEST_CASE("DiSF's exact keys computed on the backend: each row's change of F, and the ranking's choices by them",
                   "[continuous][thrust][polish]", datamask::eigen_backend, datamask::thrust_backend) {
  // The reference: the swap state's one_sided on the host, a row at a time (its formula is
  // checked against F in double in test_continuous.cpp). A selection of 120 rows takes the
  // executor's products, one of 20 the host's formula; candidates skip every fifth row.
  const dm_test::instance inst(900, 8, 5);
  const auto p = inst.problem();
  const datamask::objective_function<float, datamask::disf> f(p, datamask::disf{}, 0.5);
  const std::vector<index_t> candidates = every_fifth_pruned(inst.n);
  std::vector<index_t> all(static_cast<std::size_t>(inst.n));
  std::iota(all.begin(), all.end(), index_t{0});
  const datamask::subset_view<float> base{f.embeddings(), f.inv_norms().data(), f.sq_norms().data(),
                                          datamask::index_view{}, datamask::index_view(std::span<const index_t>(all))};
  const TestType b{};
  const auto ds = b.make_dataset(p.embeddings, f.inv_norms(), f.sq_norms(), f.ids());
  auto exec = b.make_executor(ds);
  using exec_t = decltype(exec);
  const double* quality = exec.upload(std::span<const double>(f.quality()));
  const auto relaxation = datamask::relaxation_of(f, 1, b.relaxation_view(ds), quality);
  const auto cand = b.to_device(std::span<const index_t>(candidates));
  const auto x = b.relaxation_view(ds).embeddings;
  for (const std::size_t every : {std::size_t{6}, std::size_t{36}}) {
    std::vector<index_t> selection;
    for (std::size_t c = 0; c < candidates.size(); c += every) selection.push_back(candidates[c]);
    CAPTURE(selection.size());
    const auto state = datamask::disf{}.swap_state(base, selection);
    static_assert(datamask::executor_ranked_swap_state<std::remove_cvref_t<decltype(state)>, exec_t, float>);
    // Each side's changes, added with a weight to values already there.
    std::vector<index_t> outside;
    for (index_t i : candidates) {
      if (std::find(selection.begin(), selection.end(), i) == selection.end()) outside.push_back(i);
    }
    for (const bool inside : {false, true}) {
      const std::vector<index_t>& side = inside ? selection : outside;
      const auto count = static_cast<index_t>(side.size());
      const auto rows = b.to_device(std::span<const index_t>(side));
      double* out = exec.template scratch<double>(count);
      exec.for_each(count, datamask::ops::fill{out, 2.0});
      state.add_one_sided(exec, x, TestType::data(rows), count, inside, -3.0, out);
      std::vector<double> got(side.size());
      exec.download(static_cast<const double*>(out), std::span<double>(got));
      for (std::size_t t = 0; t < side.size(); ++t) {
        const double want = 2.0 - 3.0 * state.one_sided(side[t], inside);
        CHECK(got[t] == Approx(want).epsilon(1e-10).margin(1e-12));
      }
    }
    // The ranking's exact keys: qc times the quality, 1.3 times the change (a row's loss
    // inside); its choices are the host's order of the reference keys. With qc = 0 the changes
    // alone order the rows (with quality, its scale dwarfs DiSF's 10^-4).
    datamask::polish_ranking rank(b, ds, exec, relaxation, inst.n, TestType::data(cand),
                                  static_cast<index_t>(candidates.size()), quality);
    rank.start(selection);
    for (const double qc : {0.0, 0.7}) {
      rank.refresh(qc, [&](auto& e, datamask::matrix_view<const float> xs, const index_t* rows, index_t count,
                           bool inside, double* out) {
        state.add_one_sided(e, xs, rows, count, inside, inside ? -1.3 : 1.3, out);
      });
      std::vector<double> keys(static_cast<std::size_t>(inst.n), 0.0);
      for (index_t i : candidates) {
        const bool inside = std::find(selection.begin(), selection.end(), i) != selection.end();
        keys[i] = qc * f.quality()[i] + (inside ? -1.3 : 1.3) * state.one_sided(i, inside);
      }
      namespace dc = datamask::detail::continuous;
      for (const index_t c : {index_t{1}, index_t{16}, static_cast<index_t>(selection.size())}) {
        CHECK(rank.best_outside(c) == dc::top_by(keys, f.ids(), outside, c, true));
        CHECK(rank.worst_inside(c) == dc::top_by(keys, f.ids(), selection, c, false));
      }
    }
  }
}
