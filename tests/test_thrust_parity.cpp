// SPDX-License-Identifier: Apache-2.0
// Parity of the Thrust backend with the CPU backend: each primitive on the same inputs, every
// step's masks of whole runs, and the final selections and objective values of three instances.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <type_traits>
#include <vector>

#include "thrust_support.hpp"

using datamask::eigen_backend;
using datamask::index_t;
using datamask::thrust_backend;

namespace {

template <class B>
struct primitives {
  B b{};
  const dm_test::instance& inst;
  datamask::detail::prepared prep;
  typename B::template dataset<float> ds;

  explicit primitives(const dm_test::instance& i)
      : inst(i),
        prep(datamask::detail::prepare(i.problem(), false, 1)),
        ds(b.make_dataset(i.problem().embeddings, std::span<const double>(prep.inv_norms),
                          std::span<const double>(prep.sq_norms),
                          std::span<const datamask::id_t>(prep.ids))) {}

  template <class T>
  auto dev(const std::vector<T>& v) const {
    return b.to_device(std::span<const T>(v));
  }
};

}  // namespace

TEST_CASE("each primitive gives the CPU backend's result on the same inputs", "[parity]") {
  const dm_test::instance inst(2000, 8, 7);
  primitives<eigen_backend> e(inst);
  primitives<thrust_backend> t(inst);
  const auto key = datamask::rng::block_key(42, 3);
  std::vector<index_t> candidates;
  for (index_t i = 0; i < inst.n; i += 3) candidates.push_back(i);  // a pruned-looking subset

  // Active batches: small m (thresholded path) and large m (full sort path).
  for (index_t m : {index_t{50}, index_t{600}, index_t{666}}) {
    std::vector<index_t> ea;
    typename thrust_backend::vector<index_t> ta;
    e.b.active_batch(e.ds, candidates, key, 5u, m, ea);
    t.b.active_batch(t.ds, t.dev(candidates), key, 5u, m, ta);
    CHECK(t.b.to_host(ta) == ea);
  }

  std::vector<index_t> active;
  e.b.active_batch(e.ds, candidates, key, 9u, 400, active);
  std::mt19937_64 gen(1);
  std::normal_distribution<double> normal;
  std::vector<double> logits(static_cast<std::size_t>(inst.n));
  for (double& l : logits) l = normal(gen);
  // Ties in the logits: equal logits and equal noise never happen, so ties are tested in top_rows.
  const index_t g_count = 12;
  const index_t k = 40;
  std::vector<index_t> es;
  typename thrust_backend::vector<index_t> ts;
  e.b.gumbel_top_k(logits, e.ds, active, key, 9u, 3u, g_count, k, es);
  t.b.gumbel_top_k(t.dev(logits), t.ds, t.dev(active), key, 9u, 3u, g_count, k, ts);
  REQUIRE(t.b.to_host(ts) == es);  // same rows, same draw order

  std::vector<double> coef(static_cast<std::size_t>(g_count));
  for (double& c : coef) c = 0.37 * normal(gen);
  SECTION("relaxed update: bit-identical logits") {
    std::vector<double> el = logits;
    std::vector<double> scratch;
    auto tl = t.dev(logits);
    typename thrust_backend::vector<double> tscratch;
    datamask::relaxed_update(e.b, el, active, es, g_count, k, coef);
    datamask::relaxed_update(t.b, tl, t.dev(active), ts, g_count, k, coef);
    CHECK(t.b.to_host(tl) == el);
  }
  SECTION("Plackett-Luce update: bit-identical logits on the OMP device system") {
    std::vector<double> el = logits;
    std::vector<double> scratch;
    auto tl = t.dev(logits);
    typename thrust_backend::vector<double> tscratch;
    datamask::plackett_luce_update(e.b, el, active, es, g_count, k, coef);
    datamask::plackett_luce_update(t.b, tl, t.dev(active), ts, g_count, k, coef);
    const auto got = t.b.to_host(tl);
    for (std::size_t i = 0; i < el.size(); ++i) REQUIRE(got[i] == el[i]);
  }
  SECTION("readout: ties in the logits go to the smaller id") {
    std::vector<double> tied(static_cast<std::size_t>(inst.n));
    for (index_t i = 0; i < inst.n; ++i) tied[i] = static_cast<double>(i % 5);
    const auto er = e.b.top_rows(tied, e.ds, candidates, 100);
    const auto tr = t.b.top_rows(t.dev(tied), t.ds, t.dev(candidates), 100);
    CHECK(tr == er);
  }
  SECTION("a read-out's long subset: its rows, its gathered sum bit for bit, f to rounding") {
    // Keys with ties (i % 7) and with +0 and -0 (rows a projection zeroed), which are one key:
    // the S largest by key, ties to the smaller id, against a sort of (key, id) here. S is more
    // than a subset sum's chunk (core/detail/chunked_sum.hpp), so the sums run in chunks.
    std::vector<double> readout_key(static_cast<std::size_t>(inst.n));
    for (index_t i = 0; i < inst.n; ++i) readout_key[i] = i % 3 == 0 ? (i % 2 == 0 ? 0.0 : -0.0) : static_cast<double>(i % 7);
    std::vector<index_t> all(static_cast<std::size_t>(inst.n));
    std::iota(all.begin(), all.end(), index_t{0});
    const index_t s = 1500;
    REQUIRE(s > datamask::detail::subset_chunk);
    std::vector<index_t> want = all;
    std::sort(want.begin(), want.end(), [&](index_t a, index_t b) {
      return readout_key[a] != readout_key[b] ? readout_key[a] > readout_key[b] : inst.ids[a] < inst.ids[b];
    });
    want.resize(static_cast<std::size_t>(s));
    const auto er = e.b.largest(readout_key.data(), e.ds, all.data(), inst.n, s);
    const auto tkey = t.dev(readout_key);
    const auto tall = t.dev(all);
    const auto trows = t.b.largest(thrust_backend::data(tkey), t.ds, thrust_backend::data(tall), inst.n, s);
    CHECK(er == want);
    CHECK(t.b.to_host(trows) == want);
    // S at least the candidates: all of them, in order; S = 0: none.
    std::vector<index_t> every = all;
    std::sort(every.begin(), every.end(), [&](index_t a, index_t b) {
      return readout_key[a] != readout_key[b] ? readout_key[a] > readout_key[b] : inst.ids[a] < inst.ids[b];
    });
    CHECK(e.b.largest(readout_key.data(), e.ds, all.data(), inst.n, inst.n + 3) == every);
    CHECK(t.b.to_host(t.b.largest(thrust_backend::data(tkey), t.ds, thrust_backend::data(tall), inst.n, inst.n + 3)) ==
          every);
    CHECK(e.b.largest(readout_key.data(), e.ds, all.data(), inst.n, 0).empty());
    CHECK(t.b.largest(thrust_backend::data(tkey), t.ds, thrust_backend::data(tall), inst.n, 0).empty());

    std::vector<double> eq(1);
    std::vector<double> tq(1);
    e.b.gather_sum(inst.q, er, 1, s, eq);
    t.b.gather_sum(t.dev(inst.q), trows, 1, s, tq);
    CHECK(std::bit_cast<std::uint64_t>(tq[0]) == std::bit_cast<std::uint64_t>(eq[0]));
    long double sum = 0.0L;
    for (index_t r : want) sum += inst.q[r];
    CHECK(eq[0] == Approx(static_cast<double>(sum)).epsilon(1e-13));

    // Pairwise similarity by brute force in double: minus the mean cosine over ordered pairs.
    std::vector<double> unit(static_cast<std::size_t>(s * inst.d));
    for (index_t a = 0; a < s; ++a) {
      double norm = 0.0;
      for (index_t j = 0; j < inst.d; ++j) norm += static_cast<double>(inst.x[want[a] * inst.d + j]) * inst.x[want[a] * inst.d + j];
      for (index_t j = 0; j < inst.d; ++j) unit[a * inst.d + j] = inst.x[want[a] * inst.d + j] / std::sqrt(norm);
    }
    double pairs = 0.0;
    for (index_t a = 0; a < s; ++a) {
      for (index_t b = 0; b < s; ++b) {
        if (a == b) continue;
        for (index_t j = 0; j < inst.d; ++j) pairs += unit[a * inst.d + j] * unit[b * inst.d + j];
      }
    }
    const double brute = -pairs / (static_cast<double>(s) * static_cast<double>(s - 1));
    std::vector<double> ev(1);
    std::vector<double> tv(1);
    e.b.evaluate(datamask::pairwise_similarity{}, e.ds, er, 1, s, all, ev);
    t.b.evaluate(datamask::pairwise_similarity{}, t.ds, trows, 1, s, tall, tv);
    CHECK(ev[0] == Approx(brute).epsilon(1e-10));
    CHECK(tv[0] == Approx(ev[0]).epsilon(1e-12));
  }
  SECTION("objectives agree to rounding") {
    std::vector<double> ev(static_cast<std::size_t>(g_count));
    std::vector<double> tv(static_cast<std::size_t>(g_count));
    e.b.evaluate(datamask::pairwise_similarity{}, e.ds, es, g_count, k, active, ev);
    t.b.evaluate(datamask::pairwise_similarity{}, t.ds, ts, g_count, k, t.dev(active), tv);
    for (index_t g = 0; g < g_count; ++g) CHECK(tv[g] == Approx(ev[g]).epsilon(1e-12));
  }
}

namespace {

template <class B, class D>
auto run(const dm_test::instance& inst, const D& objective, datamask::settings o,
         datamask::gradient_mode mode, std::vector<std::vector<index_t>>* masks = nullptr) {
  dm_test::recording_sampler rec;
  const datamask::learner<B, datamask::softmax_policy, datamask::linear_lr, dm_test::recording_sampler> l(
      o, datamask::softmax_policy{mode}, {}, rec);
  auto res = l.select(inst.problem(), objective);
  if (masks != nullptr) *masks = *rec.log;
  return res;
}

}  // namespace

TEST_CASE("every step's masks are identical across backends", "[parity]") {
  const dm_test::instance inst(2500, 12, 21);
  for (auto mode : {datamask::gradient_mode::relaxed, datamask::gradient_mode::plackett_luce}) {
    std::vector<std::vector<index_t>> em;
    std::vector<std::vector<index_t>> tm;
    const auto er = run<eigen_backend>(inst, datamask::pairwise_similarity{}, dm_test::parity_options(), mode, &em);
    const auto tr = run<thrust_backend>(inst, datamask::pairwise_similarity{}, dm_test::parity_options(), mode, &tm);
    REQUIRE(em.size() == 30);
    REQUIRE(tm.size() == em.size());
    for (std::size_t s = 0; s < em.size(); ++s) {
      INFO("step " << s + 1);
      REQUIRE(tm[s] == em[s]);
    }
    CHECK(tr.ids == er.ids);
  }
}

TEST_CASE("final selections and objectives agree on three instances", "[parity]") {
  const auto check = [](const dm_test::instance& inst, const auto& objective, datamask::settings o) {
    const auto er = run<eigen_backend>(inst, objective, o, datamask::gradient_mode::relaxed);
    const auto tr = run<thrust_backend>(inst, objective, o, datamask::gradient_mode::relaxed);
    const double shared = dm_test::overlap(er.rows, tr.rows);
    INFO("shared " << shared << ", objectives " << er.objective << " vs " << tr.objective);
    CHECK(shared >= 0.99);
    CHECK(std::abs(tr.objective - er.objective) <= 1e-4 * std::abs(er.objective));
    return shared;
  };
  SECTION("PWS + quality") { check(dm_test::instance(3000, 16, 31), datamask::pairwise_similarity{}, dm_test::parity_options()); }
  SECTION("facility location (cosine) + quality") {
    auto o = dm_test::parity_options();
    o.steps = 20;
    check(dm_test::instance(1500, 8, 32), datamask::facility_location{}, o);
  }
  SECTION("DiSF + quality") { check(dm_test::instance(2000, 12, 33), datamask::disf{}, dm_test::parity_options()); }
}

TEST_CASE("the executor's passes over a 16-bit block give the float32 block's bits", "[parity][half]") {
  // The same values in float16 (or bfloat16) and in float32: each generic pass widens an element
  // where it reads it, so it adds the float32 block's terms in its order; X^T w and X s also give
  // the host executor's bits (its AVX2 kernels for the 16-bit block).
  const auto bits_equal = [](const std::vector<double>& a, const std::vector<double>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](double u, double v) {
             return std::bit_cast<std::uint64_t>(u) == std::bit_cast<std::uint64_t>(v);
           });
  };
  const auto check = [&](auto low) {
    using T = decltype(low);
    for (index_t d : {index_t{7}, index_t{44}}) {
      const index_t n = 3001;
      CAPTURE(d);
      std::mt19937_64 gen(static_cast<std::uint64_t>(d));
      std::vector<T> xl;
      std::vector<float> xw;
      std::vector<double> w(static_cast<std::size_t>(n));
      std::vector<double> s(static_cast<std::size_t>(d));
      std::vector<double> mu(static_cast<std::size_t>(d));
      std::vector<double> g(static_cast<std::size_t>(d * d));
      const auto unit = [&] { return static_cast<double>(gen() >> 11) * 0x1.0p-53; };
      for (index_t k = 0; k < n * d; ++k) {
        xl.push_back(T::from(static_cast<float>(2.0 * unit() - 1.0)));
        xw.push_back(xl.back());
      }
      for (auto& v : w) v = unit() < 0.3 ? 0.0 : unit();
      for (auto& v : s) v = unit() - 0.5;
      for (auto& v : mu) v = 0.1 * (unit() - 0.5);
      for (auto& v : g) v = unit() - 0.5;
      auto exec = thrust_backend{}.make_executor();
      const auto view = [&](const auto& host) {
        using U = typename std::decay_t<decltype(host)>::value_type;
        return datamask::make_matrix_view(exec.upload(std::span<const U>(host)), n, d);
      };
      const auto xl_dev = view(xl);
      const auto xw_dev = view(xw);
      const double* w_dev = exec.upload(std::span<const double>(w));
      const double* s_dev = exec.upload(std::span<const double>(s));
      const double* mu_dev = exec.upload(std::span<const double>(mu));
      const double* g_dev = exec.upload(std::span<const double>(g));
      const auto pass = [&](index_t size, auto f) {
        double* out = exec.template scratch<double>(size);
        f(out);
        std::vector<double> host(static_cast<std::size_t>(size));
        exec.download(static_cast<const double*>(out), std::span<double>(host));
        return host;
      };
      const auto sums = pass(d, [&](double* o) { exec.column_sums(xl_dev, w_dev, o); });
      CHECK(bits_equal(sums, pass(d, [&](double* o) { exec.column_sums(xw_dev, w_dev, o); })));
      const auto dots = pass(n, [&](double* o) { exec.row_dots(xl_dev, s_dev, o); });
      CHECK(bits_equal(dots, pass(n, [&](double* o) { exec.row_dots(xw_dev, s_dev, o); })));
      CHECK(bits_equal(pass(d * d, [&](double* o) { exec.scatter(xl_dev, mu_dev, w_dev, o); }),
                       pass(d * d, [&](double* o) { exec.scatter(xw_dev, mu_dev, w_dev, o); })));
      CHECK(bits_equal(pass(n, [&](double* o) { exec.quadratic_forms(xl_dev, mu_dev, g_dev, o); }),
                       pass(n, [&](double* o) { exec.quadratic_forms(xw_dev, mu_dev, g_dev, o); })));
      datamask::host_executor host(2);
      std::vector<double> host_sums(static_cast<std::size_t>(d));
      std::vector<double> host_dots(static_cast<std::size_t>(n));
      host.column_sums(datamask::make_matrix_view(xl.data(), n, d), w.data(), host_sums.data());
      host.row_dots(datamask::make_matrix_view(xl.data(), n, d), s.data(), host_dots.data());
      CHECK(bits_equal(sums, host_sums));
      CHECK(bits_equal(dots, host_dots));
    }
  };
  check(datamask::float16{});
  check(datamask::bfloat16{});
}
