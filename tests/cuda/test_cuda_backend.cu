// SPDX-License-Identifier: Apache-2.0
// The Thrust backend compiled by nvcc for the CUDA device system, against the CPU backend:
// objectives on the same subsets, every step's masks of a PWS run, and a device-callable user
// objective. Kept to one small translation unit: nvcc builds are slow.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <datamask/learners/continuous.hpp>
#include <datamask/objectives/knn/build.hpp>
#include <datamask/objectives/sparse_facility.hpp>

#include "thrust_support.hpp"

static_assert(datamask::thrust_device_is_cuda, "this file must be compiled for the CUDA device system");

int datamask_cuda_device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

using datamask::index_t;

// Outside the unnamed namespace: nvcc reports device_callable, read only through a concept, as an
// unreferenced member of a class with internal linkage (warning 177).
namespace dm_cuda_test {
/// Minus the mean squared distance of the subset's rows to their centroid, negated: a device
/// objective (O(k d), one thread per rollout).
struct spread {
  static constexpr bool device_callable = true;
  template <class T>
  DATAMASK_HOST_DEVICE double operator()(const datamask::subset_view<T>& s) const {
    double total = 0.0;
    for (index_t j = 0; j < s.embeddings.cols; ++j) {
      double mean = 0.0;
      for (index_t r : s.subset) mean += static_cast<double>(s.embeddings(r, j));
      mean /= static_cast<double>(s.subset.size);
      for (index_t r : s.subset) {
        const double c = static_cast<double>(s.embeddings(r, j)) - mean;
        total += c * c;
      }
    }
    return total / static_cast<double>(s.subset.size);
  }
};
}  // namespace dm_cuda_test
using dm_cuda_test::spread;

namespace {
template <class B, class D>
auto run(const dm_test::instance& inst, const D& objective, std::vector<std::vector<index_t>>& masks) {
  dm_test::recording_sampler rec;
  const datamask::learner<B, datamask::softmax_policy, datamask::linear_lr, dm_test::recording_sampler> l(
      dm_test::parity_options(), {}, {}, rec);
  auto res = l.select(inst.problem(), objective);
  masks = *rec.log;
  return res;
}
}  // namespace

TEST_CASE("CUDA: masks, selections and objectives match the CPU backend", "[cuda][parity]") {
  const dm_test::instance inst(2500, 12, 21);
  std::vector<std::vector<index_t>> em;
  std::vector<std::vector<index_t>> tm;
  const auto er = run<datamask::eigen_backend>(inst, datamask::pairwise_similarity{}, em);
  const auto tr = run<datamask::thrust_backend>(inst, datamask::pairwise_similarity{}, tm);
  REQUIRE(tm.size() == em.size());
  std::size_t same_steps = 0;
  for (std::size_t s = 0; s < em.size(); ++s) same_steps += tm[s] == em[s] ? 1u : 0u;
  CHECK(same_steps == em.size());
  CHECK(dm_test::overlap(er.rows, tr.rows) >= 0.99);
  CHECK(tr.objective == Approx(er.objective).epsilon(1e-4));
}

TEST_CASE("CUDA: every objective, built in or user, agrees with the CPU backend", "[cuda][objectives]") {
  const dm_test::instance inst(800, 16, 5);
  const auto prep = datamask::detail::prepare(inst.problem(), false, 1);
  const index_t g_count = 8;
  const index_t k = 30;
  std::vector<index_t> subsets;
  for (index_t g = 0; g < g_count; ++g)
    for (index_t t = 0; t < k; ++t) subsets.push_back((g * 97 + t * 13) % inst.n);
  std::vector<index_t> reference;
  for (index_t i = 0; i < inst.n; i += 4) reference.push_back(i);
  const auto check = [&](const auto& objective, double tol) {
    const datamask::eigen_backend e;
    const datamask::thrust_backend t;
    const auto eds = e.make_dataset(inst.problem().embeddings, std::span<const double>(prep.inv_norms),
                                    std::span<const double>(prep.sq_norms), std::span<const datamask::id_t>(prep.ids));
    const auto tds = t.make_dataset(inst.problem().embeddings, std::span<const double>(prep.inv_norms),
                                    std::span<const double>(prep.sq_norms), std::span<const datamask::id_t>(prep.ids));
    std::vector<double> ev(g_count);
    std::vector<double> tv(g_count);
    e.evaluate(objective, eds, subsets, g_count, k, reference, ev);
    t.evaluate(objective, tds, t.to_device(std::span<const index_t>(subsets)), g_count, k,
               t.to_device(std::span<const index_t>(reference)), tv);
    for (index_t g = 0; g < g_count; ++g) CHECK(tv[g] == Approx(ev[g]).epsilon(tol));
  };
  check(datamask::pairwise_similarity{}, 1e-10);
  check(datamask::facility_location{}, 1e-5);
  check(datamask::disf{}, 1e-4);
  datamask::knn_settings knn;
  knn.neighbors = 16;
  const datamask::sparse_facility_location sparse{
      std::make_shared<const datamask::knn_graph>(datamask::build_knn_graph(inst.problem(), knn))};
  check(sparse, 0.0);  // the same float similarities, summed in the same order: the same bits
  check(spread{}, 1e-10);
}

TEMPLATE_TEST_CASE("CUDA: the continuous learner's ascent on the device selects as the CPU backend", "[cuda][continuous]",
                   datamask::pairwise_similarity, datamask::disf) {
  const dm_test::instance inst(3000, 16, 9);
  datamask::continuous_options o;
  o.common.ratio = 0.1;
  o.ascent.iterations = 40;
  const auto er = datamask::basic_continuous_learner<datamask::eigen_backend>(o).select(inst.problem(), TestType{});
  const auto tr = datamask::basic_continuous_learner<datamask::thrust_backend>(o).select(inst.problem(), TestType{});
  // CUDA's FMA contraction and summation order change the last bits of F, the projection's tau
  // and so p (DiSF's calibrated scale also differs in about the eighth digit: exec/backend/thrust.hpp):
  // the same items unless two fall within rounding of each other at the S-th place.
  CHECK(dm_test::overlap(er.rows, tr.rows) >= 0.99);
  CHECK(tr.objective == Approx(er.objective).epsilon(1e-6));
  REQUIRE(tr.history.size() == er.history.size());
  for (std::size_t t = 0; t < er.history.size(); ++t)
    CHECK(tr.history[t].reward_mean == Approx(er.history[t].reward_mean).epsilon(1e-6).margin(1e-6));
}

TEST_CASE("CUDA: column_sums' kernel gives the generic pass's bits", "[cuda][dense]") {
  // Shapes around the kernel's edges: one row; one value per load (d = 1, 5, 130: not a multiple
  // of 4) with columns over two blocks of 128; 16-byte loads (d = 40, 260) with columns over two
  // blocks of 256, the second partial; chunks longer than the weight slice (more than 64 x 1024
  // rows); remainders of fewer than 32 rows; weights with zeros (skipped rows) and of mixed sign.
  for (const auto& [n, d] :
       std::vector<std::pair<index_t, index_t>>{{1, 1}, {37, 5}, {3001, 130}, {2999, 260}, {70001, 40}}) {
    const dm_test::instance inst(n, d, 3, 1);
    std::vector<double> w(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) w[i] = i % 3 == 1 ? 0.0 : (i % 2 == 0 ? 1.0 : -0.5) / static_cast<double>(i + 1);
    datamask::thrust_backend::executor exec;
    const float* xs = exec.upload(std::span<const float>(inst.x));
    const datamask::matrix_view<const float> x(xs, n, d);
    const double* wd = exec.upload(std::span<const double>(w));
    double* kernel = exec.scratch<double>(d);
    double* generic = exec.scratch<double>(d);
    exec.column_sums(x, wd, kernel);
    datamask::dense::column_sums(exec, x, wd, generic);
    std::vector<double> a(static_cast<std::size_t>(d));
    std::vector<double> b(static_cast<std::size_t>(d));
    exec.download(static_cast<const double*>(kernel), std::span<double>(a));
    exec.download(static_cast<const double*>(generic), std::span<double>(b));
    INFO("n = " << n << ", d = " << d);
    CHECK(a == b);
    std::vector<double> ref(static_cast<std::size_t>(d), 0.0);  // in double on the host
    for (index_t i = 0; i < n; ++i)
      for (index_t j = 0; j < d; ++j) ref[j] += w[i] * static_cast<double>(inst.x[i * d + j]);
    for (index_t j = 0; j < d; ++j) CHECK(a[j] == Approx(ref[j]).epsilon(1e-12).margin(1e-12));
  }
}

TEST_CASE("CUDA: the passes over a float16 block give the float32 block's bits", "[cuda][dense][half]") {
  // The kernels (column_sums with 16-byte loads of 8 halves where d allows them, d = 40; one value
  // per load, d = 5, 130; row_dots' tiles) and the generic scatter, on the device, against the
  // same passes over the float32 block holding the same values.
  for (const auto& [n, d] : std::vector<std::pair<index_t, index_t>>{{37, 5}, {3001, 130}, {70001, 40}}) {
    const dm_test::instance inst(n, d, 4, 1);
    std::vector<datamask::float16> h;
    std::vector<float> f;
    for (float v : inst.x) {
      h.push_back(datamask::float16::from(v));
      f.push_back(h.back());
    }
    std::vector<double> w(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) w[i] = i % 3 == 1 ? 0.0 : 1.0 / static_cast<double>(i + 1);
    std::vector<double> s(static_cast<std::size_t>(d));
    for (index_t j = 0; j < d; ++j) s[j] = 0.5 - static_cast<double>(j % 7) / 7.0;
    datamask::thrust_backend::executor exec;
    const datamask::matrix_view<const datamask::float16> xh(exec.upload(std::span<const datamask::float16>(h)), n, d);
    const datamask::matrix_view<const float> xf(exec.upload(std::span<const float>(f)), n, d);
    const double* wd = exec.upload(std::span<const double>(w));
    const double* sd = exec.upload(std::span<const double>(s));
    const auto pass = [&](index_t size, auto run) {
      double* out = exec.scratch<double>(size);
      run(out);
      std::vector<double> host(static_cast<std::size_t>(size));
      exec.download(static_cast<const double*>(out), std::span<double>(host));
      return host;
    };
    INFO("n = " << n << ", d = " << d);
    CHECK(pass(d, [&](double* o) { exec.column_sums(xh, wd, o); }) == pass(d, [&](double* o) { exec.column_sums(xf, wd, o); }));
    CHECK(pass(n, [&](double* o) { exec.row_dots(xh, sd, o); }) == pass(n, [&](double* o) { exec.row_dots(xf, sd, o); }));
    CHECK(pass(d * d, [&](double* o) { exec.scatter(xh, sd, wd, o); }) ==
          pass(d * d, [&](double* o) { exec.scatter(xf, sd, wd, o); }));
  }
}
