// SPDX-License-Identifier: Apache-2.0
// The benchmark suite behind benchmarks/RESULTS.md: solution quality, black-box and structured
// speed of the learner against the greedy baselines, kernel throughput against the machine's
// GEMM rate, and peak memory. Every benchmark runs once (selection runs are minutes, not
// microseconds) and reports what it measured as counters; scripts/bench runs each benchmark in
// its own process so that the peak-RSS counter belongs to that run alone.
//
// Extra flag (after Google Benchmark's): --dm_mode=quick|full (default quick) picks the sizes.

#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <Eigen/Core>

#include <datamask/learners/continuous.hpp>
#include <datamask/datamask.hpp>
#include <datamask/core/wait_policy.hpp>
#include <datamask/learners/greedy/greedy.hpp>

#include "synthetic.hpp"

namespace dm = datamask;
using dm::index_t;

namespace {

using dm_bench::block;
using dm_bench::data;

bool full_mode = false;

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: KiB
}

enum class obj { pws, fl, disf };
const char* name(obj o) { return o == obj::pws ? "pws" : o == obj::fl ? "fl" : "disf"; }

template <class F>
auto with_objective(obj o, F&& f) {
  switch (o) {
    case obj::pws: return f(dm::pairwise_similarity{});
    case obj::fl: return f(dm::facility_location{});
    case obj::disf: return f(dm::disf{});
  }
  return f(dm::pairwise_similarity{});
}

dm::settings learner_options(index_t steps) {
  dm::settings o;
  o.ratio = 0.1;
  o.lambda = 0.5;
  o.steps = steps;
  o.evaluate_selection = false;  // every method is evaluated alike, below
  return o;
}

/// The small-batch learner: an active batch of 256 items whatever n (beta = 256 / n) and the
/// quality initialisation; everything else is the default (G = 128, linear lr 10 -> 1, relaxed
/// gradient, credit auto). Per unit of work it beats the default batch with rollout credit
/// (DiSF's under auto), not with per-item credit (pairwise similarity's and facility location's):
/// RESULTS.md section 1, docs/tuning.md, "Choosing the active batch".
dm::settings small_batch_options(index_t steps, index_t n) {
  dm::settings o = learner_options(steps);
  o.min_active = 256;
  o.active_fraction = std::min(1.0, 256.0 / static_cast<double>(n));
  o.init = dm::init_mode::quality;
  return o;
}

/// f with the scales the learner calibrates on this block.
template <class D>
dm::objective_function<float, D> make_f(const block& b, const D& div) {
  const auto p = b.problem();
  dm::objective_function<float, D> f(p, div, 0.5);
  const auto terms = dm::learner<>(learner_options(1)).calibrate(p, div);
  std::vector<double> scales;
  for (const auto& t : terms) scales.push_back(t.scale);
  f.set_scales(scales);
  return f;
}

using clk = std::chrono::steady_clock;
double since(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }

void finish(benchmark::State& st, double seconds) {
  st.SetIterationTime(seconds);
  st.counters["seconds"] = seconds;
  st.counters["peak_rss_mib"] = peak_rss_mib();
}

// ---- selection runs ------------------------------------------------------------------------------

/// One selection: method "learner" (steps E, default options), "learner_small" (steps E,
/// `small_batch_options`), "continuous" (the continuous learner, `steps` iterations, its
/// defaults otherwise), "naive"/"lazy"/"stochastic" (structured greedy), "random" (mean f over
/// 64 uniform subsets). Counters: objective, seconds, evaluations.
void run_select(benchmark::State& st, obj o, index_t n, index_t d, std::string method,
                index_t steps, double eps) {
  for (auto _ : st) {
    const block& b = data(n, d);
    with_objective(o, [&](const auto& div) {
      auto f = make_f(b, div);
      const index_t s = std::llround(0.1 * static_cast<double>(n));
      std::vector<index_t> rows;
      double seconds = 0.0;
      double fval = 0.0;
      if (method == "random") {
        std::mt19937_64 g(7);
        std::vector<index_t> all(static_cast<std::size_t>(n));
        for (index_t i = 0; i < n; ++i) all[i] = i;
        const auto t0 = clk::now();
        for (int r = 0; r < 64; ++r) {
          for (index_t i = 0; i < s; ++i) {
            std::swap(all[i], all[i + static_cast<index_t>(g() % static_cast<std::uint64_t>(n - i))]);
          }
          fval += f(std::span<const index_t>(all.data(), static_cast<std::size_t>(s))) / 64.0;
        }
        seconds = since(t0);
      } else if (method == "learner" || method == "learner_small") {
        const auto p = b.problem();
        const auto opt = method == "learner" ? learner_options(steps) : small_batch_options(steps, n);
        const auto t0 = clk::now();
        const auto res = dm::learner<>(opt).select(p, div);
        seconds = since(t0);
        rows = res.rows;
        st.counters["steps"] = static_cast<double>(steps);
      } else if (method == "continuous") {
        if constexpr (dm::relaxable_objective<std::remove_cvref_t<decltype(div)>, float>) {
          dm::continuous_options co;
          co.common = learner_options(steps);
          co.ascent.iterations = steps;
          const auto t0 = clk::now();
          const auto res = dm::continuous_learner(co).select(b.problem(), div);
          seconds = since(t0);
          rows = res.rows;
          st.counters["steps"] = static_cast<double>(steps);
        } else {
          st.SkipWithError("the continuous learner needs a relaxable objective");
          return 0;
        }
      } else {
        dm::greedy_options go;
        go.method = method == "naive" ? dm::greedy_method::naive
                    : method == "lazy" ? dm::greedy_method::lazy
                                       : dm::greedy_method::stochastic;
        go.epsilon = eps;
        const auto t0 = clk::now();
        const auto res = dm::greedy_select(f, s, go);
        seconds = since(t0);
        rows = res.rows;
        st.counters["evaluations"] = static_cast<double>(res.evaluations);
        st.counters["greedy_objective"] = res.objective;
        if (method == "stochastic") st.counters["epsilon"] = eps;
      }
      if (method != "random") fval = f(rows);  // the same evaluation for every method
      st.counters["objective"] = fval;
      st.counters["n"] = static_cast<double>(n);
      finish(st, seconds);
      return 0;
    });
  }
}

/// Black-box naive greedy's cost: f evaluated on sets of size s costs c(s); a naive greedy
/// picking S items from n scores n - t candidates on sets of size t + 1, so its time is
/// sum_t (n - t) c(t + 1). c(s) is timed at a few sizes on a prefix of the structured greedy
/// (the same picks) and interpolated linearly (every built-in term costs a + b s).
void run_blackbox_cost(benchmark::State& st, obj o, index_t n, index_t d) {
  for (auto _ : st) {
    const block& b = data(n, d);
    with_objective(o, [&](const auto& div) {
      auto f = make_f(b, div);
      const index_t s = std::llround(0.1 * static_cast<double>(n));
      // The cost of evaluating f does not depend on which rows are in the set: time it on
      // uniform random rows.
      std::mt19937_64 g(3);
      std::vector<index_t> pool(static_cast<std::size_t>(n));
      for (index_t i = 0; i < n; ++i) pool[i] = i;
      for (index_t i = 0; i < s + 16; ++i) {
        std::swap(pool[i], pool[i + static_cast<index_t>(g() % static_cast<std::uint64_t>(n - i))]);
      }
      struct {
        std::vector<index_t> rows;
      } pre{pool};
      std::vector<double> sizes{std::max<double>(2, static_cast<double>(s) / 8), static_cast<double>(s) / 2,
                                static_cast<double>(s)};
      std::vector<double> cost;
      for (double sz : sizes) {
        const auto k = static_cast<index_t>(sz);
        std::vector<index_t> rows(pre.rows.begin(), pre.rows.begin() + (k - 1));
        rows.push_back(0);
        const int reps = o == obj::fl ? 1 : 16;
        double best = 1e300;
        for (int r = 0; r < (o == obj::fl ? 1 : 3); ++r) {
          const auto t0 = clk::now();
          double sink = 0;
          for (int e = 0; e < reps; ++e) {
            rows.back() = pre.rows[static_cast<std::size_t>(k - 1 + e) % pre.rows.size()];
            sink += f(rows);
          }
          benchmark::DoNotOptimize(sink);
          best = std::min(best, since(t0) / reps);
        }
        cost.push_back(best);
      }
      // Least-squares line through (size, cost).
      double mx = 0, my = 0;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        mx += sizes[i] / 3;
        my += cost[i] / 3;
      }
      double sxy = 0, sxx = 0;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        sxy += (sizes[i] - mx) * (cost[i] - my);
        sxx += (sizes[i] - mx) * (sizes[i] - mx);
      }
      const double slope = sxy / sxx;
      const double icpt = my - slope * mx;
      double total = 0;
      for (index_t t = 0; t < s; ++t) {
        total += static_cast<double>(n - t) * std::max(0.0, icpt + slope * static_cast<double>(t + 1));
      }
      st.counters["eval_s_small"] = cost[0];
      st.counters["eval_s_half"] = cost[1];
      st.counters["eval_s_full"] = cost[2];
      st.counters["naive_blackbox_seconds_est"] = total;
      st.counters["evaluations_est"] = static_cast<double>(n) * static_cast<double>(s) -
                                       static_cast<double>(s) * static_cast<double>(s - 1) / 2;
      st.counters["n"] = static_cast<double>(n);
      finish(st, total);
      return 0;
    });
  }
}

// ---- kernels ---------------------------------------------------------------------------------------

/// Reward evaluation of G = 128 rollouts of k items from an active batch of m (the learner's
/// step), in GFLOP/s of the work the kernel does: PWS 2kd, DiSF k d^2 (the rank-k update of a
/// symmetric d x d) + 3kd per rollout; FL 2 m u d per step, u the distinct rows of the G
/// rollouts (facility location scores every rollout from one product of the batch with them).
void run_kernel(benchmark::State& st, obj o, index_t m, index_t d) {
  const block& b = data(m, d);
  const index_t k = m / 10;
  const index_t g = 128;
  const auto p = b.problem();
  const dm::detail::prepared prep = dm::detail::prepare(p, false, 0);
  dm::eigen_backend be;
  const auto ds = be.make_dataset(p.embeddings, std::span<const double>(prep.inv_norms),
                                  std::span<const double>(prep.sq_norms),
                                  std::span<const dm::id_t>(prep.ids));
  std::vector<index_t> active(static_cast<std::size_t>(m));
  for (index_t i = 0; i < m; ++i) active[i] = i;
  std::vector<double> zeros(static_cast<std::size_t>(m), 0.0);
  std::vector<index_t> subsets;
  be.gumbel_top_k(zeros, ds, active, dm::rng::block_key(1, 0), 1u, 0u, g, k, subsets);
  std::vector<double> out(static_cast<std::size_t>(g));
  double flops = 0;
  const double kd = static_cast<double>(k) * static_cast<double>(d);
  if (o == obj::pws) flops = 2 * kd;
  if (o == obj::disf) flops = kd * static_cast<double>(d) + 3 * kd;
  flops *= static_cast<double>(g);
  if (o == obj::fl) {
    std::vector<index_t> distinct(subsets);
    std::sort(distinct.begin(), distinct.end());
    const auto u = std::unique(distinct.begin(), distinct.end()) - distinct.begin();
    flops = 2 * static_cast<double>(m) * static_cast<double>(u) * static_cast<double>(d);
    st.counters["distinct_rows"] = static_cast<double>(u);
  }
  double total = 0;
  for (auto _ : st) {
    const auto t0 = clk::now();
    with_objective(o, [&](const auto& div) {
      be.evaluate(div, ds, subsets, g, k, active, out);
      return 0;
    });
    const double sec = since(t0);
    total += sec;
    st.SetIterationTime(sec);
  }
  st.counters["gflops"] = benchmark::Counter(flops * static_cast<double>(st.iterations()) / 1e9 / total);
  st.counters["rollouts_per_s"] = static_cast<double>(g * st.iterations()) / total;
  st.counters["m"] = static_cast<double>(m);
  st.counters["peak_rss_mib"] = peak_rss_mib();
}

/// The machine's matrix-product rate with Eigen in this binary: C (m x m) = A (m x d) B^T.
void run_gemm(benchmark::State& st, index_t m, index_t d) {
  using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const mat a = mat::Random(m, d);
  const mat bm = mat::Random(m, d);
  mat c(m, m);
  double total = 0;
  for (auto _ : st) {
    const auto t0 = clk::now();
    c.noalias() = a * bm.transpose();
    benchmark::DoNotOptimize(c.data());
    const double sec = since(t0);
    total += sec;
    st.SetIterationTime(sec);
  }
  st.counters["gflops"] = 2.0 * static_cast<double>(m) * static_cast<double>(m) *
                          static_cast<double>(d) * static_cast<double>(st.iterations()) / 1e9 / total;
  st.counters["peak_rss_mib"] = peak_rss_mib();
}

void reg(const std::string& nm, auto fn) {
  benchmark::RegisterBenchmark(nm.c_str(), fn)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);
}

constexpr index_t bench_dims = 256;

// 1. Quality at n = 20,000 (quick: 2,000): random, greedy, learner over a sweep of steps.
void register_quality() {
  const index_t d = bench_dims;
  const index_t nq = full_mode ? 20000 : 2000;
  const std::vector<index_t> sweep = full_mode ? std::vector<index_t>{100, 300, 1000, 3000}
                                               : std::vector<index_t>{30, 100};
  for (obj o : {obj::pws, obj::fl, obj::disf}) {
    const std::string pre = std::string("quality/") + name(o) + "/";
    reg(pre + "random", [=](benchmark::State& s) { run_select(s, o, nq, d, "random", 0, 0); });
    // Skipped in the full run: FL naive (2 n^2 d per pick; lazy gives its exact order). DiSF
    // naive costs 4 n S d^2 = 10^13 flops at n = 20,000: minutes, but it is the reference. Lazy
    // greedy on pairwise similarity and DiSF (not submodular) re-scores every candidate each
    // round: naive greedy's picks at naive greedy's cost, so the full run times it on PWS only.
    if (o == obj::pws || o == obj::disf)
      reg(pre + "naive", [=](benchmark::State& s) { run_select(s, o, nq, d, "naive", 0, 0); });
    if (!(full_mode && o == obj::disf))
      reg(pre + "lazy", [=](benchmark::State& s) { run_select(s, o, nq, d, "lazy", 0, 0); });
    for (double eps : {0.1, 0.01}) {
      reg(pre + "stochastic/eps:" + (eps == 0.1 ? "0.1" : "0.01"),
          [=](benchmark::State& s) { run_select(s, o, nq, d, "stochastic", 0, eps); });
    }
    for (index_t e : sweep) {
      if (o != obj::pws && e > 1000) continue;  // FL and DiSF steps cost far more than PWS's
      reg(pre + "learner/steps:" + std::to_string(e),
          [=](benchmark::State& s) { run_select(s, o, nq, d, "learner", e, 0); });
    }
    // The continuous learner: pairwise similarity and DiSF (dense facility location has no
    // relaxation; its sparse form is benchmarked in facility_knn.cpp).
    if (o != obj::fl) {
      for (index_t e : full_mode ? std::vector<index_t>{30, 100, 300, 1000} : std::vector<index_t>{30, 100}) {
        reg(pre + "continuous/steps:" + std::to_string(e),
            [=](benchmark::State& s) { run_select(s, o, nq, d, "continuous", e, 0); });
      }
    }
    const std::vector<index_t> small_sweep =
        full_mode ? (o == obj::pws    ? std::vector<index_t>{1000, 4000, 16000, 64000, 128000}
                     : o == obj::disf ? std::vector<index_t>{1000, 4000, 16000, 64000}
                                      : std::vector<index_t>{1000, 4000, 16000})
                  : std::vector<index_t>{100, 400};
    for (index_t e : small_sweep) {
      reg(pre + "learner_small/steps:" + std::to_string(e),
          [=](benchmark::State& s) { run_select(s, o, nq, d, "learner_small", e, 0); });
    }
  }
}

// 2. Black-box cost of naive greedy at n = 100,000 (quick: 5,000).
void register_blackbox() {
  const index_t d = bench_dims;
  const index_t nb = full_mode ? 100000 : 5000;
  for (obj o : {obj::pws, obj::fl, obj::disf}) {
    reg(std::string("blackbox/") + name(o) + "/naive_cost/n:" + std::to_string(nb),
        [=](benchmark::State& s) { run_blackbox_cost(s, o, nb, d); });
  }
}

// 3. Time against n: learner (fixed steps) and the structured greedies that fit.
void register_scale() {
  const index_t d = bench_dims;
  const std::vector<index_t> ns = full_mode ? std::vector<index_t>{10000, 100000, 1000000}
                                            : std::vector<index_t>{1000, 4000};
  for (index_t n : ns) {
    for (obj o : {obj::pws, obj::fl, obj::disf}) {
      const std::string pre = std::string("scale/") + name(o) + "/";
      const std::string sn = "/n:" + std::to_string(n);
      // What fits the full run's budget on 2 cores (RESULTS.md lists what was skipped and why):
      // FL beyond 10^4 (each round of any greedy or learner step costs O(n d) per candidate or
      // 2 m k d G), DiSF's learner at 10^6 (about 2 s per step).
      const bool big = full_mode && n >= 100000;
      if (o == obj::fl && big) continue;
      reg(pre + "stochastic" + sn, [=](benchmark::State& s) {
        run_select(s, o, n, d, "stochastic", 0, dm::greedy_options{}.epsilon);
      });
      // Lazy greedy where it saves work: on FL; on PWS and DiSF it costs naive greedy's n S
      // gains (hours for DiSF at 10^5), so only at the smallest n.
      if (o == obj::fl || n == ns.front()) {
        reg(pre + "lazy" + sn, [=](benchmark::State& s) { run_select(s, o, n, d, "lazy", 0, 0); });
      }
      const index_t e = full_mode ? 300 : 30;
      if (!(full_mode && n >= 1000000 && o == obj::disf)) {
        reg(pre + "learner/steps:" + std::to_string(e) + sn,
            [=](benchmark::State& s) { run_select(s, o, n, d, "learner", e, 0); });
      }
      // The continuous learner at its default iteration count (DiSF at 10^6, like its policy
      // gradient, is left to the fronts section of RESULTS.md: n d^2 per iteration).
      const index_t iters = dm::continuous_settings{}.iterations;
      if (o != obj::fl && !(full_mode && n >= 1000000 && o == obj::disf)) {
        reg(pre + "continuous/steps:" + std::to_string(iters) + sn,
            [=](benchmark::State& s) { run_select(s, o, n, d, "continuous", iters, 0); });
      }
    }
  }
}

// 4. Kernels: one learner step's rewards against the Eigen GEMM rate.
void register_kernels() {
  const index_t d = bench_dims;
  const index_t mk = full_mode ? 5000 : 1024;
  for (obj o : {obj::pws, obj::fl, obj::disf}) {
    benchmark::RegisterBenchmark((std::string("kernel/") + name(o) + "/m:" + std::to_string(mk)).c_str(),
                                 [=](benchmark::State& s) { run_kernel(s, o, mk, d); })
        ->UseManualTime()
        ->MinTime(full_mode ? 2.0 : 0.2)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("kernel/gemm_eigen_float/m:2048",
                               [=](benchmark::State& s) { run_gemm(s, 2048, d); })
      ->UseManualTime()
      ->MinTime(full_mode ? 2.0 : 0.2)
      ->Unit(benchmark::kMillisecond);
}

void register_all() {
  register_quality();
  register_blackbox();
  register_scale();
  register_kernels();
}

}  // namespace

int main(int argc, char** argv) {
  datamask::passive_wait_unless_set(argv);  // first: see datamask/core/wait_policy.hpp
  benchmark::Initialize(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--dm_mode=full") == 0) full_mode = true;
  }
  register_all();
  benchmark::AddCustomContext("dm_mode", full_mode ? "full" : "quick");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
