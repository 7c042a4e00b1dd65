// SPDX-License-Identifier: Apache-2.0
//
// One learner step (active batch, G Gumbel-top-k rollouts, quality gather, one diversity
// objective, relaxed update) on each backend this binary was built with, against n.
// Settings of the issue: d = 768, G = 128, beta = 0.05 (m = max(beta n, 1024)), rho = 0.1.
//
//   build/benchmarks/datamask_bench_step --benchmark_filter=pairwise
//
// Exact facility location costs 2 m k d per rollout and DiSF k d^2 per rollout, so on a CPU they
// are registered only up to n = 10^4 unless DATAMASK_BENCH_ALL=1 is set.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <datamask/datamask.hpp>
#include <datamask/core/wait_policy.hpp>
#if defined(DATAMASK_BENCH_THRUST)
#include <datamask/exec/backend/thrust.hpp>
#endif

namespace {

using datamask::index_t;
constexpr index_t d = 768;
constexpr index_t g_count = 128;

/// The block of n items: embeddings from Philox (fast to make), unit-normalised metadata.
struct block {
  index_t n;
  std::vector<float> x;
  datamask::detail::prepared prep;
  std::vector<double> q;
  explicit block(index_t rows) : n(rows), x(static_cast<std::size_t>(rows * d)) {
    const auto key = datamask::rng::block_key(1, 2);
    for (index_t i = 0; i < n * d; ++i) {
      x[i] = static_cast<float>(datamask::rng::uniform01(key, static_cast<std::uint64_t>(i), 0, 0) - 0.5);
    }
    datamask::problem<float> p;
    p.embeddings = datamask::make_matrix_view(x.data(), n, d);
    prep = datamask::detail::prepare(p, false, 0);
    q.resize(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) q[i] = datamask::rng::uniform01(key, static_cast<std::uint64_t>(i), 1, 0);
  }
};

const block& get_block(index_t n) {
  // The benchmark binary's own cache (one block per size, built on first use); not library code.
  static std::map<index_t, std::unique_ptr<block>> cache;
  auto& b = cache[n];
  if (!b) {
    cache.clear();  // keep one block alive at a time: 10^6 x 768 floats is 3 GB
    auto fresh = std::make_unique<block>(n);
    return *(cache[n] = std::move(fresh));
  }
  return *b;
}

template <class B, class D>
void step(benchmark::State& state, D objective) {
  const index_t n = state.range(0);
  const block& blk = get_block(n);
  const B b{};
  const auto ds = b.make_dataset(datamask::make_matrix_view(blk.x.data(), n, d),
                                 std::span<const double>(blk.prep.inv_norms),
                                 std::span<const double>(blk.prep.sq_norms),
                                 std::span<const datamask::id_t>(blk.prep.ids));
  std::vector<index_t> all(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) all[i] = i;
  const auto candidates = b.to_device(std::span<const index_t>(all));
  const auto quality = b.to_device(std::span<const double>(blk.q));
  std::vector<double> zeros(static_cast<std::size_t>(n), 0.0);
  auto logits = b.to_device(std::span<const double>(zeros));
  const index_t m = std::min(n, std::max<index_t>(std::llround(0.05 * static_cast<double>(n)), 1024));
  const index_t k = std::max<index_t>(1, std::llround(0.1 * static_cast<double>(m)));
  typename B::template vector<index_t> active;
  typename B::template vector<index_t> subsets;
  typename B::template vector<double> scratch;
  std::vector<double> qv(g_count);
  std::vector<double> dv(g_count);
  std::vector<double> coef(g_count);
  const auto key = datamask::rng::block_key(7, 0);
  std::uint32_t t = 0;
  for (auto _ : state) {
    ++t;
    b.active_batch(ds, candidates, key, t, m, active);
    b.gumbel_top_k(logits, ds, active, key, t, 0u, g_count, k, subsets);
    b.gather_sum(quality, subsets, g_count, k, qv);
    b.evaluate(objective, ds, subsets, g_count, k, active, dv);
    for (index_t g = 0; g < g_count; ++g) coef[g] = 1e-3 * (qv[g] + dv[g]);
    datamask::relaxed_update(b, logits, active, subsets, g_count, k, coef);
    benchmark::DoNotOptimize(dv.data());
  }
  state.counters["m"] = static_cast<double>(m);
  state.counters["k"] = static_cast<double>(k);
  state.counters["items/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["rollout_rows/s"] =
      benchmark::Counter(static_cast<double>(g_count * k), benchmark::Counter::kIsIterationInvariantRate);
}

template <class B>
void register_backend(const std::string& name, index_t n) {
  const bool all = std::getenv("DATAMASK_BENCH_ALL") != nullptr;
  {
    benchmark::RegisterBenchmark((name + "/pairwise").c_str(), [](benchmark::State& s) {
      step<B>(s, datamask::pairwise_similarity{});
    })->Arg(n)->Unit(benchmark::kMillisecond)->UseRealTime();
    if (all || n <= 10000) {
      benchmark::RegisterBenchmark((name + "/facility").c_str(), [](benchmark::State& s) {
        step<B>(s, datamask::facility_location{});
      })->Arg(n)->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark((name + "/disf").c_str(), [](benchmark::State& s) {
        step<B>(s, datamask::disf{});
      })->Arg(n)->Unit(benchmark::kMillisecond)->UseRealTime();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  datamask::passive_wait_unless_set(argv);  // first: see datamask/core/wait_policy.hpp
  // Sizes outermost, so each block is generated once for all backends.
  for (index_t n : {index_t{10000}, index_t{100000}, index_t{1000000}}) {
    register_backend<datamask::eigen_backend>("eigen", n);
#if defined(DATAMASK_BENCH_THRUST)
    register_backend<datamask::thrust_backend>(std::string(datamask::thrust_backend::name), n);
#endif
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
