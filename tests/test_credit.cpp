// SPDX-License-Identifier: Apache-2.0
// Per-item credit of the policy-gradient learner (credit_mode::item): every objective's
// marginals against brute-force differences f(U) - f(U \ {i}) in double, one step of the learner
// against the estimator written out from brute-force marginals of f, determinism, and the
// errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "helpers.hpp"

using datamask::index_t;

namespace {

/// A block in double with its norms and every row as the reference set.
struct tiny {
  index_t n, d;
  std::vector<double> x;
  std::vector<double> q;
  std::vector<double> inv, sq;
  std::vector<index_t> all;
  tiny(index_t n_, index_t d_, std::uint64_t seed)
      : n(n_), d(d_), x(dmtest::random_embeddings<double>(n_, d_, seed)), q(dmtest::random_quality(n_, seed + 1)),
        all(static_cast<std::size_t>(n_)) {
    dmtest::norms(x, n, d, inv, sq);
    for (index_t i = 0; i < n; ++i) all[i] = i;
  }
  [[nodiscard]] datamask::subset_view<double> view(const std::vector<index_t>& u,
                                                   const std::vector<index_t>& ref) const {
    return {datamask::make_matrix_view(x.data(), n, d), inv.data(), sq.data(), datamask::index_view(std::span(u)),
            datamask::index_view(std::span(ref)), 1};
  }
  [[nodiscard]] datamask::problem<double> problem() const {
    return {datamask::make_matrix_view(x.data(), n, d), {{q, 1.0}}, {}};
  }
};

std::vector<index_t> without(const std::vector<index_t>& u, std::size_t t) {
  std::vector<index_t> r(u);
  r.erase(r.begin() + static_cast<std::ptrdiff_t>(t));
  return r;
}

/// Checks `obj.marginals` on random subsets of several sizes against `ref(u)` in double (`ref`
/// scores the empty set and single items as the objective does).
template <class D, class Ref>
void check_marginals(const D& obj, const tiny& b, const std::vector<index_t>& reference, Ref&& ref) {
  dmtest::rng r(99);
  for (index_t k : {1, 2, 3, 7, 12}) {
    for (int rep = 0; rep < 3; ++rep) {
      const std::vector<index_t> u = r.distinct(b.n, k);
      std::vector<double> out(static_cast<std::size_t>(k), -1.0);
      const double value = obj.marginals(b.view(u, reference), std::span<double>(out));
      const double full = ref(u);
      CHECK(value == Approx(full).epsilon(1e-11).margin(1e-12));
      CHECK(value == Approx(obj(b.view(u, reference))).epsilon(1e-11).margin(1e-12));
      for (std::size_t t = 0; t < u.size(); ++t) {
        INFO("k = " << k << ", item " << t);
        CHECK(out[t] == Approx(full - ref(without(u, t))).epsilon(1e-9).margin(1e-11));
      }
    }
  }
}

}  // namespace

TEST_CASE("marginals equal brute-force differences: pairwise similarity", "[credit][marginals]") {
  const tiny b(30, 5, 1);
  check_marginals(datamask::pairwise_similarity{}, b, b.all,
                  [&](const std::vector<index_t>& u) { return dmtest::ref_pws(b.x, b.d, u); });
  static_assert(datamask::marginal_objective<datamask::pairwise_similarity, double>);
}

TEST_CASE("marginals equal brute-force differences: DiSF", "[credit][marginals]") {
  const tiny b(30, 5, 2);
  check_marginals(datamask::disf{}, b, b.all, [&](const std::vector<index_t>& u) {
    return u.size() < 2 ? 0.0 : dmtest::ref_disf(b.x, b.d, u);
  });
  static_assert(datamask::marginal_objective<datamask::disf, float>);
}

TEST_CASE("marginals equal brute-force differences: facility location, every kernel", "[credit][marginals]") {
  const tiny b(30, 5, 3);
  std::vector<index_t> part;  // a reference set that is not the whole block
  for (index_t i = 0; i < b.n; i += 3) part.push_back(i);
  for (const auto kernel : {datamask::similarity_kernel::cosine, datamask::similarity_kernel::cosine2,
                            datamask::similarity_kernel::dot, datamask::similarity_kernel::rbf}) {
    datamask::facility_location fl;
    fl.kernel = kernel;
    fl.gamma = 0.1;
    fl.tile = 4;  // several tiles
    for (const std::vector<index_t>* ref : {&b.all, static_cast<const std::vector<index_t>*>(&part)}) {
      INFO("kernel " << datamask::enum_name(kernel) << ", |V| = " << ref->size());
      check_marginals(fl, b, *ref, [&](const std::vector<index_t>& u) {
        return u.empty() ? 0.0 : dmtest::ref_fl(b.x, b.d, u, *ref, kernel, fl.gamma);
      });
    }
  }
  // Two copies of one row: removing either loses nothing.
  tiny twin(6, 3, 4);
  for (index_t j = 0; j < 3; ++j) twin.x[5 * 3 + j] = twin.x[0 * 3 + j];
  dmtest::norms(twin.x, twin.n, twin.d, twin.inv, twin.sq);
  const std::vector<index_t> u{0, 5, 2};
  std::vector<double> out(3);
  (void)datamask::facility_location{}.marginals(twin.view(u, std::vector<index_t>{0, 5}), std::span<double>(out));
  CHECK(out[0] == 0.0);
  CHECK(out[1] == 0.0);
}

namespace {

/// One learner step with per-item credit against the estimator written out here: the marginals
/// of f by brute force (f on U and on U \ {i}), the leave-one-out baseline over the rollouts,
/// the normalisation, L_j = lr / G * sum of the advantages of j's draws. The rollouts are the
/// backend's draws for step 1 (the sampler is tested elsewhere).
template <class D>
void check_one_step(const D& objective, datamask::advantage_mode mode) {
  const tiny b(40, 4, 11);
  datamask::settings o;
  o.count = 8;
  o.rollouts = 6;
  o.steps = 1;
  o.min_active = 1000;  // all 40 items active: k = S = 8
  o.credit = datamask::credit_mode::item;
  o.advantage = mode;
  o.seed = 5;
  const datamask::learner<> learner(o);
  const auto prob = b.problem();
  const auto res = learner.select(prob, objective);
  REQUIRE(res.steps_run == 1);
  REQUIRE(res.zero_variance_steps == 0);

  std::vector<double> scales;
  for (const auto& t : learner.calibrate(prob, objective)) scales.push_back(t.scale);
  datamask::objective_function<double, D> f(prob, objective, o.lambda);
  f.set_scales(scales);

  const datamask::eigen_backend be{};
  const auto ds = be.make_dataset(datamask::make_matrix_view(b.x.data(), b.n, b.d), std::span<const double>(b.inv),
                                  std::span<const double>(b.sq), std::span<const datamask::id_t>(f.ids()));
  const std::vector<double> zeros(static_cast<std::size_t>(b.n), 0.0);
  std::vector<index_t> subsets;
  be.gumbel_top_k(zeros, ds, b.all, datamask::rng::block_key(o.seed, o.block), 1u, 0u, o.rollouts, 8, subsets);

  const auto g_count = static_cast<std::size_t>(o.rollouts);
  const std::size_t k = 8;
  std::vector<double> adv(g_count * k);
  std::vector<double> mean(g_count, 0.0);
  for (std::size_t g = 0; g < g_count; ++g) {
    const std::vector<index_t> u(subsets.begin() + static_cast<std::ptrdiff_t>(g * k),
                                 subsets.begin() + static_cast<std::ptrdiff_t>((g + 1) * k));
    const double fu = f(std::span<const index_t>(u));
    for (std::size_t t = 0; t < k; ++t) {
      const std::vector<index_t> rest = without(u, t);
      adv[g * k + t] = fu - f(std::span<const index_t>(rest));
      mean[g] += adv[g * k + t] / static_cast<double>(k);
    }
  }
  double total = 0.0;
  for (double m : mean) total += m;
  for (std::size_t e = 0; e < adv.size(); ++e) {
    adv[e] -= (total - mean[e / k]) / static_cast<double>(g_count - 1);
  }
  double sd = 0.0;
  if (mode == datamask::advantage_mode::group_normalized) {
    double m = 0.0;
    for (double a : adv) m += a / static_cast<double>(adv.size());
    for (double a : adv) sd += (a - m) * (a - m) / static_cast<double>(adv.size());
    sd = std::sqrt(sd);
  }
  const double lr = datamask::linear_lr{}(1, 1);
  std::vector<double> expect(static_cast<std::size_t>(b.n), 0.0);
  for (std::size_t e = 0; e < adv.size(); ++e) {
    const double a = mode == datamask::advantage_mode::group_normalized ? adv[e] / (sd + 1e-8) : adv[e];
    expect[static_cast<std::size_t>(subsets[e])] += lr * a / static_cast<double>(g_count);
  }
  double scale = 0.0;
  for (double v : expect) scale = std::max(scale, std::abs(v));
  REQUIRE(scale > 0.0);
  for (index_t i = 0; i < b.n; ++i) {
    INFO("row " << i);
    CHECK(res.logits[i] == Approx(expect[i]).margin(1e-9 * scale));
  }
}

}  // namespace

namespace {

/// A small run under per-item credit: 10%, G = 16, `steps` steps, active batches of `min_active`.
datamask::settings item_credit_options(index_t steps, index_t min_active) {
  datamask::settings o;
  o.ratio = 0.1;
  o.rollouts = 16;
  o.steps = steps;
  o.min_active = min_active;
  o.credit = datamask::credit_mode::item;
  return o;
}

/// Facility location with only the per-subset marginals (no `marginals_batch`).
struct facility_marginals_one_at_a_time {
  datamask::facility_location fl;
  static constexpr std::string_view name = "facility";
  static constexpr bool cheap_marginals = true;
  template <class T>
  double operator()(const datamask::subset_view<T>& s) const {
    return fl(s);
  }
  template <class T>
  double marginals(const datamask::subset_view<T>& s, std::span<double> out) const {
    return fl.marginals(s, out);
  }
};

}  // namespace

TEST_CASE("per-item credit on facility location: batched marginals, the same selection as one rollout at a time",
          "[credit][marginals]") {
  static_assert(!datamask::batched_marginal_objective<facility_marginals_one_at_a_time, float>);
  // The learner under per-item credit: the same selection and logits either way (the marginals
  // themselves, batched and one at a time, against a fixed-order reference: test_objectives.cpp).
  const tiny b(400, 8, 23);
  datamask::settings o = item_credit_options(8, 150);
  for (const int threads : {1, 2}) {
    o.threads = threads;
    datamask::facility_location fl;
    fl.tile = 32;
    const auto batched = datamask::learner<>(o).select(b.problem(), fl);
    const auto single = datamask::learner<>(o).select(b.problem(), facility_marginals_one_at_a_time{fl});
    CHECK(batched.rows == single.rows);
    CHECK(batched.logits == single.logits);
  }
}

TEST_CASE("one step of per-item credit is the estimator on brute-force marginals of f", "[credit][learner]") {
  SECTION("pairwise, group-normalised") {
    check_one_step(datamask::pairwise_similarity{}, datamask::advantage_mode::group_normalized);
  }
  SECTION("pairwise, leave-one-out (no normalisation)") {
    check_one_step(datamask::pairwise_similarity{}, datamask::advantage_mode::leave_one_out);
  }
  SECTION("facility location") {
    check_one_step(datamask::facility_location{}, datamask::advantage_mode::group_normalized);
  }
  SECTION("DiSF") { check_one_step(datamask::disf{}, datamask::advantage_mode::group_normalized); }
  SECTION("a mix") {
    check_one_step(datamask::mix(datamask::weighted{datamask::pairwise_similarity{}, 1.0},
                                 datamask::weighted{datamask::disf{}, 0.5}),
                   datamask::advantage_mode::group_normalized);
  }
}

TEST_CASE("per-item credit: same selection and logits on 1 and 2 threads, not the rollout estimator",
          "[credit][determinism]") {
  const tiny b(1500, 16, 21);
  datamask::settings o = item_credit_options(6, 600);
  o.seed = 9;
  const auto prob = b.problem();
  auto run = [&](const auto& obj, int threads, datamask::credit_mode credit) {
    datamask::settings oo = o;
    oo.threads = threads;
    oo.credit = credit;
    return datamask::learner<>(oo).select(prob, obj);
  };
  auto same = [&](const auto& obj) {
    const auto one = run(obj, 1, datamask::credit_mode::item);
    const auto two = run(obj, 2, datamask::credit_mode::item);
    CHECK(one.rows == two.rows);
    CHECK(one.logits == two.logits);
    CHECK(one.objective == two.objective);
    CHECK(run(obj, 1, datamask::credit_mode::rollout).logits != one.logits);
  };
  datamask::facility_location fl;
  fl.tile = 64;
  same(fl);
  same(datamask::pairwise_similarity{});
  same(datamask::disf{});
}

TEST_CASE("credit auto: the learner's choice is the rule's (item for pairwise and facility location, "
          "rollout for DiSF and Plackett-Luce)", "[credit]") {
  const tiny b(300, 8, 41);
  datamask::settings o;
  o.count = 20;
  o.rollouts = 8;
  o.steps = 4;
  const auto prob = b.problem();
  auto logits = [&](const auto& obj, datamask::credit_mode credit, datamask::gradient_mode g) {
    datamask::settings oo = o;
    oo.credit = credit;
    return datamask::basic_learner<datamask::eigen_backend>(oo, datamask::softmax_policy{g}).select(prob, obj).logits;
  };
  auto check = [&](const auto& obj, datamask::credit_mode expected, datamask::gradient_mode g) {
    const auto automatic = logits(obj, datamask::credit_mode::automatic, g);
    CHECK(automatic == logits(obj, expected, g));
    if (expected == datamask::credit_mode::item) CHECK(automatic != logits(obj, datamask::credit_mode::rollout, g));
  };
  using datamask::credit_mode;
  const auto relaxed = datamask::gradient_mode::relaxed;
  CHECK(datamask::settings{}.credit == credit_mode::automatic);
  check(datamask::pairwise_similarity{}, credit_mode::item, relaxed);
  check(datamask::facility_location{}, credit_mode::item, relaxed);
  check(datamask::disf{}, credit_mode::rollout, relaxed);
  check(datamask::mix(datamask::weighted{datamask::pairwise_similarity{}, 1.0}, datamask::weighted{datamask::disf{}, 0.5}),
        credit_mode::rollout, relaxed);
  // DiSF at weight 0 does not count in f
  check(datamask::mix(datamask::weighted{datamask::pairwise_similarity{}, 1.0}, datamask::weighted{datamask::disf{}, 0.0}),
        credit_mode::item, relaxed);
  check(datamask::pairwise_similarity{}, credit_mode::rollout, datamask::gradient_mode::plackett_luce);
  CHECK(datamask::parse_enum<credit_mode>("auto", "credit") == credit_mode::automatic);
}

namespace {
/// A diversity objective without marginals.
struct plain_spread {
  template <class T>
  double operator()(const datamask::subset_view<T>& s) const {
    return static_cast<double>(s.subset.size);
  }
};
}  // namespace

TEST_CASE("per-item credit refuses objectives without marginals and the Plackett-Luce form", "[credit][errors]") {
  const tiny b(60, 4, 31);
  datamask::settings o;
  o.count = 6;
  o.rollouts = 4;
  o.steps = 2;
  o.credit = datamask::credit_mode::item;
  const auto prob = b.problem();
  CHECK_THROWS_WITH(datamask::learner<>(o).select(prob, plain_spread{}),
                    Catch::Contains("credit") && Catch::Contains("marginal_objective"));
  datamask::settings automatic = o;  // auto: the paper's estimator for an objective without marginals
  automatic.credit = datamask::credit_mode::automatic;
  CHECK_NOTHROW(datamask::learner<>(automatic).select(prob, plain_spread{}));
  // Weight 0: the term is off, so it needs no marginals.
  CHECK_NOTHROW(datamask::learner<>(o).select(
      prob, datamask::mix(datamask::weighted{datamask::pairwise_similarity{}, 1.0}, datamask::weighted{plain_spread{}, 0.0})));
  const datamask::basic_learner<datamask::eigen_backend> pl(o, datamask::softmax_policy{datamask::gradient_mode::plackett_luce});
  CHECK_THROWS_WITH(pl.select(prob, datamask::pairwise_similarity{}),
                    Catch::Contains("credit") && Catch::Contains("plackett-luce"));
  CHECK(datamask::parse_enum<datamask::credit_mode>("item", "credit") == datamask::credit_mode::item);
}
