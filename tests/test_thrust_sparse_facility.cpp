// SPDX-License-Identifier: Apache-2.0
// Sparse facility location on the Thrust backend (OpenMP device system): its device evaluation
// against the host call operator (the same bits) and the definition, on 1 and 2 threads; the
// backend's resident copies of host arrays; the policy-gradient learner's masks and selection
// against the CPU backend.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include <datamask/objectives/knn/build.hpp>
#include <datamask/objectives/sparse_facility.hpp>

#include "thrust_support.hpp"

using datamask::index_t;

namespace {

static_assert(datamask::device_evaluable<datamask::sparse_facility_location, float>);
static_assert(datamask::device_evaluable<datamask::sparse_facility_location, double>);

/// Runs `f()` with OpenMP's default team (Thrust's OMP system uses it) set to `threads`.
template <class F>
auto with_threads(int threads, F&& f) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  auto r = f();
  omp_set_num_threads(before);
  return r;
}

/// A graph of n items with K distinct random neighbours per row, similarities in [-0.5, 1)
/// sorted descending (some negative, some tied), as the builders store rows.
std::shared_ptr<const datamask::knn_graph> random_graph(index_t n, index_t k, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> sim(-0.5f, 1.0f);
  datamask::knn_graph g;
  g.n = n;
  g.k = k;
  std::vector<index_t> rows(static_cast<std::size_t>(n));
  std::iota(rows.begin(), rows.end(), index_t{0});
  for (index_t v = 0; v < n; ++v) {
    std::shuffle(rows.begin(), rows.end(), gen);
    std::vector<float> s(static_cast<std::size_t>(k));
    for (float& x : s) x = sim(gen);
    if (k > 2) s[1] = s[2];  // a tie
    std::sort(s.begin(), s.end(), std::greater<>());
    g.ids.insert(g.ids.end(), rows.begin(), rows.begin() + k);
    g.sims.insert(g.sims.end(), s.begin(), s.end());
  }
  return std::make_shared<const datamask::knn_graph>(std::move(g));
}

/// The definition: per reference item, the best clamped similarity among its neighbours in u.
double definition(const datamask::knn_graph& g, const index_t* u, index_t k, const std::vector<index_t>& ref) {
  std::vector<char> in(static_cast<std::size_t>(g.n), 0);
  for (index_t t = 0; t < k; ++t) in[static_cast<std::size_t>(u[t])] = 1;
  double total = 0.0;
  for (index_t v : ref) {
    double best = 0.0;
    for (index_t r = 0; r < g.k; ++r) {
      if (in[static_cast<std::size_t>(g.neighbor(v, r))]) best = std::max(best, static_cast<double>(g.similarity(v, r)));
    }
    total += best;
  }
  return ref.empty() ? 0.0 : total / static_cast<double>(ref.size());
}

}  // namespace

TEST_CASE("sparse facility location: device evaluation equals the host's, bit for bit", "[thrust][sparse_facility]") {
  const dm_test::instance inst(300, 6, 3);
  const auto prep = datamask::detail::prepare(inst.problem(), false, 1);
  const datamask::thrust_backend t;
  const auto ds = t.make_dataset(inst.problem().embeddings, std::span<const double>(prep.inv_norms),
                                 std::span<const double>(prep.sq_norms), std::span<const datamask::id_t>(prep.ids));
  std::mt19937_64 gen(9);
  std::vector<index_t> rows(static_cast<std::size_t>(inst.n));
  std::iota(rows.begin(), rows.end(), index_t{0});
  std::vector<index_t> every(rows);
  std::shuffle(rows.begin(), rows.end(), gen);
  std::vector<index_t> part(rows.begin(), rows.begin() + 77);
  std::sort(part.begin(), part.end());  // an active batch: increasing rows
  std::vector<index_t> unsorted(rows.begin() + 100, rows.begin() + 160);

  datamask::knn_settings cosine;
  cosine.neighbors = 12;
  const auto built = std::make_shared<const datamask::knn_graph>(datamask::build_knn_graph(inst.problem(), cosine));
  for (const auto& graph : {random_graph(inst.n, 1, 1), random_graph(inst.n, 9, 2), random_graph(inst.n, inst.n, 3), built}) {
    const datamask::sparse_facility_location objective{graph};
    for (const auto* ref : {&every, &part, &unsorted}) {
      for (index_t k : {index_t{0}, index_t{1}, index_t{7}, index_t{64}, inst.n}) {
        const index_t g_count = 5;
        std::vector<index_t> subsets;
        for (index_t g = 0; g < g_count; ++g) {
          std::shuffle(rows.begin(), rows.end(), gen);
          subsets.insert(subsets.end(), rows.begin(), rows.begin() + k);
        }
        INFO("K " << graph->k << ", |V| " << ref->size() << ", k " << k);
        const auto dev_subsets = t.to_device(std::span<const index_t>(subsets));
        const auto dev_ref = t.to_device(std::span<const index_t>(*ref));
        const auto device = [&](int threads) {
          return with_threads(threads, [&] {
            std::vector<double> out(static_cast<std::size_t>(g_count), -1.0);
            t.evaluate(objective, ds, dev_subsets, g_count, k, dev_ref, out);
            return out;
          });
        };
        const auto one = device(1);
        const auto two = device(2);
        for (index_t g = 0; g < g_count; ++g) {
          const index_t* u = subsets.data() + g * k;
          const datamask::subset_view<float> s{inst.problem().embeddings, prep.inv_norms.data(), prep.sq_norms.data(),
                                               datamask::index_view(u, k), datamask::index_view(*ref)};
          const double host = objective(s);
          CHECK(one[g] == host);
          CHECK(two[g] == host);
          CHECK(host == Approx(definition(*graph, u, k, *ref)).epsilon(1e-12).margin(1e-15));
        }
      }
    }
  }
  // An empty reference set scores 0; a graph of another block is refused.
  const std::vector<index_t> thirty(rows.begin(), rows.begin() + 30);
  std::vector<double> out(3, -1.0);
  t.evaluate(datamask::sparse_facility_location{random_graph(inst.n, 4, 5)}, ds,
             t.to_device(std::span<const index_t>(thirty)), 3, 10, t.to_device(std::span<const index_t>()), out);
  CHECK(out == std::vector<double>(3, 0.0));
  CHECK_THROWS_WITH(t.evaluate(datamask::sparse_facility_location{random_graph(inst.n - 1, 4, 5)}, ds,
                               t.to_device(std::span<const index_t>(thirty)), 3, 10,
                               t.to_device(std::span<const index_t>(every)), out),
                    Catch::Contains("graph") && Catch::Contains("299 rows"));
}

TEST_CASE("the Thrust backend copies a resident host array once and never hands out a stale copy",
          "[thrust][sparse_facility]") {
  datamask::thrust_backend::resident_store store;
  // The array lives in `values`; its owner says while it is the array the store was given (an
  // owner that frees nothing: when it goes, the address may hold another array).
  std::vector<float> values{1.0f, 2.0f, 3.0f};
  std::shared_ptr<const void> owner(values.data(), [](const void*) {});
  const float* first = store.get(std::span<const float>(values), owner);
  CHECK(std::vector<float>(first, first + 3) == values);
  CHECK(store.get(std::span<const float>(values), owner) == first);  // the same copy
  CHECK(store.size() == 1);
  // Another size or another type at the same address is another array.
  CHECK(store.get(std::span<const float>(values.data(), 2), owner) != first);
  const std::span<const std::uint32_t> bits(reinterpret_cast<const std::uint32_t*>(values.data()), 3);
  CHECK(static_cast<const void*>(store.get(bits, owner)) != static_cast<const void*>(first));
  CHECK(store.size() == 3);
  // The owner goes away and another array takes the same address: a fresh copy.
  owner.reset();
  const float* address = values.data();
  values = {4.0f, 5.0f, 6.0f};
  REQUIRE(values.data() == address);
  const std::shared_ptr<const void> next_owner(values.data(), [](const void*) {});
  const float* second = store.get(std::span<const float>(values), next_owner);
  CHECK(std::vector<float>(second, second + 3) == values);
  CHECK(store.size() == 1);  // the three copies of the old owner were dropped
}

TEST_CASE("the learner on sparse facility location draws the same masks on Thrust and on the CPU",
          "[thrust][sparse_facility][parity]") {
  const dm_test::instance inst(1500, 8, 32);
  datamask::knn_settings s;
  s.neighbors = 16;
  const datamask::sparse_facility_location objective{
      std::make_shared<const datamask::knn_graph>(datamask::build_knn_graph(inst.problem(), s))};
  auto o = dm_test::parity_options();
  o.steps = 15;
  const auto run = [&](auto backend, int threads, std::vector<std::vector<index_t>>& masks) {
    using B = decltype(backend);
    return with_threads(threads, [&] {
      dm_test::recording_sampler rec;
      const datamask::learner<B, datamask::softmax_policy, datamask::linear_lr, dm_test::recording_sampler> l(
          o, datamask::softmax_policy{}, {}, rec);
      auto res = l.select(inst.problem(), objective);
      masks = *rec.log;
      return res;
    });
  };
  std::vector<std::vector<index_t>> em;
  std::vector<std::vector<index_t>> t1;
  std::vector<std::vector<index_t>> t2;
  const auto er = run(datamask::eigen_backend{}, 2, em);
  const auto tr1 = run(datamask::thrust_backend{}, 1, t1);
  const auto tr2 = run(datamask::thrust_backend{}, 2, t2);
  REQUIRE(em.size() == 15);
  CHECK(t1 == em);
  CHECK(t2 == em);
  CHECK(tr1.ids == er.ids);
  CHECK(tr2.ids == er.ids);
  CHECK(tr1.objective == er.objective);
}
