// SPDX-License-Identifier: Apache-2.0
// The diversity objectives and the quality gather, evaluated through each backend's `evaluate` and
// `gather_sum` on G random subsets, against brute-force definitions in double precision
// (docs/method.md section 1.3), written here independently of the library's formulas.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <memory>
#include <random>
#include <type_traits>
#include <span>
#include <vector>

#include "thrust_support.hpp"

using datamask::index_t;

namespace {

struct fixture {
  dm_test::instance inst{300, 12, 11};
  datamask::detail::prepared prep = datamask::detail::prepare(inst.problem(), false, 1);
  index_t g_count = 6;
  index_t k = 17;
  std::vector<index_t> subsets;    // G x k distinct rows each
  std::vector<index_t> reference;  // 120 rows

  fixture() {
    std::mt19937_64 gen(5);
    std::vector<index_t> rows(static_cast<std::size_t>(inst.n));
    std::iota(rows.begin(), rows.end(), index_t{0});
    for (index_t g = 0; g < g_count; ++g) {
      std::shuffle(rows.begin(), rows.end(), gen);
      subsets.insert(subsets.end(), rows.begin(), rows.begin() + k);
    }
    std::shuffle(rows.begin(), rows.end(), gen);
    reference.assign(rows.begin(), rows.begin() + 120);
  }
  [[nodiscard]] double e(index_t i, index_t j) const { return inst.x[i * inst.d + j]; }
  [[nodiscard]] double dot(index_t a, index_t b) const {
    double s = 0.0;
    for (index_t j = 0; j < inst.d; ++j) s += e(a, j) * e(b, j);
    return s;
  }
  [[nodiscard]] double cosine(index_t a, index_t b) const {
    return dot(a, b) / std::sqrt(dot(a, a) * dot(b, b));
  }
  [[nodiscard]] const index_t* rollout(index_t g) const { return subsets.data() + g * k; }

  [[nodiscard]] double pws(index_t g) const {
    double s = 0.0;
    for (index_t a = 0; a < k; ++a)
      for (index_t b = 0; b < k; ++b)
        if (a != b) s += cosine(rollout(g)[a], rollout(g)[b]);
    return -s / static_cast<double>(k * (k - 1));
  }
  [[nodiscard]] double fl(index_t g, datamask::similarity_kernel kern, double gamma) const {
    double total = 0.0;
    for (index_t v : reference) {
      double best = -1e300;
      for (index_t t = 0; t < k; ++t) {
        const index_t j = rollout(g)[t];
        double sim = 0.0;
        switch (kern) {
          case datamask::similarity_kernel::cosine: sim = cosine(v, j); break;
          case datamask::similarity_kernel::cosine2: sim = cosine(v, j) * cosine(v, j); break;
          case datamask::similarity_kernel::dot: sim = dot(v, j); break;
          case datamask::similarity_kernel::rbf:
            sim = std::exp(-gamma * (dot(v, v) + dot(j, j) - 2.0 * dot(v, j)));
            break;
        }
        best = std::max(best, sim);
      }
      total += best;
    }
    return total / static_cast<double>(reference.size());
  }
  [[nodiscard]] double disf(index_t g) const {
    const index_t d = inst.d;
    std::vector<double> z(static_cast<std::size_t>(k * d));
    for (index_t j = 0; j < d; ++j) {
      double mean = 0.0;
      for (index_t t = 0; t < k; ++t) mean += e(rollout(g)[t], j);
      mean /= static_cast<double>(k);
      double var = 0.0;
      for (index_t t = 0; t < k; ++t) var += std::pow(e(rollout(g)[t], j) - mean, 2);
      var /= static_cast<double>(k - 1);
      for (index_t t = 0; t < k; ++t) z[t * d + j] = (e(rollout(g)[t], j) - mean) / std::sqrt(var + 1e-8);
    }
    double off = 0.0;
    for (index_t a = 0; a < d; ++a)
      for (index_t b = 0; b < d; ++b) {
        if (a == b) continue;
        double c = 0.0;
        for (index_t t = 0; t < k; ++t) c += z[t * d + a] * z[t * d + b];
        c /= static_cast<double>(k - 1);
        off += c * c;
      }
    return -off / 1e4;
  }
};

template <class B, class D>
std::vector<double> evaluate(const fixture& f, const D& objective) {
  const B b{};
  const auto ds = b.make_dataset(f.inst.problem().embeddings, std::span<const double>(f.prep.inv_norms),
                                 std::span<const double>(f.prep.sq_norms),
                                 std::span<const datamask::id_t>(f.prep.ids));
  const auto sub = b.to_device(std::span<const index_t>(f.subsets));
  const auto ref = b.to_device(std::span<const index_t>(f.reference));
  std::vector<double> out(static_cast<std::size_t>(f.g_count));
  b.evaluate(objective, ds, sub, f.g_count, f.k, ref, out);
  return out;
}

/// A user objective that runs on the device: minus the largest squared dot product of two
/// distinct unit rows of the subset.
struct worst_pair {
  static constexpr bool device_callable = true;
  template <class T>
  DATAMASK_HOST_DEVICE double operator()(const datamask::subset_view<T>& s) const {
    double worst = 0.0;
    for (index_t a = 0; a < s.subset.size; ++a) {
      for (index_t b = a + 1; b < s.subset.size; ++b) {
        double c = 0.0;
        for (index_t j = 0; j < s.embeddings.cols; ++j)
          c += static_cast<double>(s.embeddings(s.subset[a], j)) * static_cast<double>(s.embeddings(s.subset[b], j));
        c *= s.inv_norms[s.subset[a]] * s.inv_norms[s.subset[b]];
        worst = c * c > worst ? c * c : worst;
      }
    }
    return -worst;
  }
};
static_assert(datamask::device_objective<worst_pair, float>);

/// A host-only objective (not device callable): the Thrust backend scores it on the host.
struct host_only_sum {
  std::vector<int> unused_host_state{1};
  double operator()(const datamask::subset_view<float>& s) const {
    double t = 0.0;
    for (index_t r : s.subset) t += s.sq_norms[r];
    return t;
  }
};
static_assert(!datamask::device_objective<host_only_sum, float>);


/// A user objective with every evaluation capability a backend can use, each counting its
/// calls: the sum over the subset of squared norms times the row's position weight 1 / (1 + r
/// mod 3). `evaluate_device` (device_evaluable) goes through the executor with a scratch
/// buffer; `evaluate_batch` (batched_diversity_objective) scores on the host. The plain call
/// is the reference.
struct counted_norms {
  struct calls {
    int device = 0;
    int batch = 0;
  };
  std::shared_ptr<calls> seen = std::make_shared<calls>();

  template <class T>
  DATAMASK_HOST_DEVICE static double term(const datamask::subset_view<T>& s, index_t r) {
    return s.sq_norms[r] / static_cast<double>(1 + r % 3);
  }
  double operator()(const datamask::subset_view<float>& s) const {
    double t = 0.0;
    for (index_t r : s.subset) t += term(s, r);
    return t;
  }
  void evaluate_batch(const datamask::batch_view<float>& b, std::span<double> out) const {
    ++seen->batch;
    for (index_t g = 0; g < b.subsets.rows; ++g) out[static_cast<std::size_t>(g)] = (*this)(b[g]);
  }
  /// Device pass 1: one term per (subset, position); pass 2: the sum in draw order.
  struct terms {
    datamask::batch_view<float> b;
    double* t;
    DATAMASK_HOST_DEVICE void operator()(index_t i) const {
      const index_t g = i / b.subsets.cols;
      t[i] = term(b[g], b[g].subset[i - g * b.subsets.cols]);
    }
  };
  struct sum {
    const double* t;
    index_t k;
    double* out;
    DATAMASK_HOST_DEVICE void operator()(index_t g) const {
      double acc = 0.0;
      for (index_t i = 0; i < k; ++i) acc += t[g * k + i];
      out[g] = acc;
    }
  };
  template <class Exec>
  void evaluate_device(Exec& exec, const datamask::batch_view<float>& b, double* out) const {
    ++seen->device;
    const index_t total = b.subsets.rows * b.subsets.cols;
    double* t = exec.template scratch<double>(total);
    exec.for_each(total, terms{b, t});
    exec.for_each(b.subsets.rows, sum{t, b.subsets.cols, out});
  }
};
static_assert(datamask::device_evaluable<counted_norms, float>);
static_assert(datamask::batched_diversity_objective<counted_norms, float>);
static_assert(!datamask::device_objective<counted_norms, float>);
static_assert(datamask::device_evaluable<datamask::pairwise_similarity, float>);
static_assert(datamask::device_evaluable<datamask::facility_location, float>);
static_assert(datamask::device_evaluable<datamask::disf, float>);

}  // namespace

TEMPLATE_TEST_CASE("objectives match their brute-force definitions on every backend", "[objectives][backend]",
                   datamask::eigen_backend, datamask::thrust_backend) {
  const fixture f;
  SECTION("pairwise similarity") {
    const auto v = evaluate<TestType>(f, datamask::pairwise_similarity{});
    for (index_t g = 0; g < f.g_count; ++g) CHECK(v[g] == Approx(f.pws(g)).epsilon(1e-10).margin(1e-12));
  }
  SECTION("facility location, all four kernels") {
    using K = datamask::similarity_kernel;
    for (K kern : {K::cosine, K::cosine2, K::dot, K::rbf}) {
      datamask::facility_location fl;
      fl.kernel = kern;
      fl.gamma = 0.01;
      const auto v = evaluate<TestType>(f, fl);
      for (index_t g = 0; g < f.g_count; ++g) CHECK(v[g] == Approx(f.fl(g, kern, 0.01)).epsilon(1e-5).margin(1e-6));
    }
  }
  SECTION("DiSF") {
    const auto v = evaluate<TestType>(f, datamask::disf{});
    for (index_t g = 0; g < f.g_count; ++g) CHECK(v[g] == Approx(f.disf(g)).epsilon(1e-4));
  }
  SECTION("a device-callable user objective") {
    const auto v = evaluate<TestType>(f, worst_pair{});
    for (index_t g = 0; g < f.g_count; ++g) {
      double worst = 0.0;
      for (index_t a = 0; a < f.k; ++a)
        for (index_t b = a + 1; b < f.k; ++b) worst = std::max(worst, std::pow(f.cosine(f.rollout(g)[a], f.rollout(g)[b]), 2));
      CHECK(v[g] == Approx(-worst).epsilon(1e-10));
    }
  }
  SECTION("a host-only user objective") {
    const auto v = evaluate<TestType>(f, host_only_sum{});
    for (index_t g = 0; g < f.g_count; ++g) {
      double t = 0.0;
      for (index_t a = 0; a < f.k; ++a) t += f.dot(f.rollout(g)[a], f.rollout(g)[a]);
      CHECK(v[g] == Approx(t).epsilon(1e-10));
    }
  }
  SECTION("quality as a gather-sum, in draw order") {
    const TestType b{};
    const auto q = b.to_device(std::span<const double>(f.inst.q));
    const auto sub = b.to_device(std::span<const index_t>(f.subsets));
    std::vector<double> out(static_cast<std::size_t>(f.g_count));
    b.gather_sum(q, sub, f.g_count, f.k, out);
    for (index_t g = 0; g < f.g_count; ++g) {
      double s = 0.0;
      for (index_t t = 0; t < f.k; ++t) s += f.inst.q[f.rollout(g)[t]];
      CHECK(out[g] == s);  // same order of additions: exactly equal
    }
  }
}

TEMPLATE_TEST_CASE("a user objective's capabilities give it the backend's fast path", "[objectives][backend]",
                   datamask::eigen_backend, datamask::thrust_backend) {
  const fixture f;
  const counted_norms objective;
  const auto v = evaluate<TestType>(f, objective);
  std::vector<double> plain(static_cast<std::size_t>(f.g_count));
  for (index_t g = 0; g < f.g_count; ++g) {
    datamask::subset_view<float> s{f.inst.problem().embeddings, f.prep.inv_norms.data(), f.prep.sq_norms.data(),
                                   datamask::index_view(f.rollout(g), f.k), datamask::index_view(f.reference)};
    plain[static_cast<std::size_t>(g)] = objective(s);
  }
  CHECK(v == plain);  // same terms, same order of additions
  if constexpr (std::is_same_v<TestType, datamask::thrust_backend>) {
    CHECK(objective.seen->device == 1);  // the device evaluator, through the backend's executor
    CHECK(objective.seen->batch == 0);
  } else {
    CHECK(objective.seen->batch == 1);  // the batched host evaluation
    CHECK(objective.seen->device == 0);
  }
}
