// SPDX-License-Identifier: Apache-2.0
// The built-in objectives against brute-force double-precision references written directly
// from docs/method.md (helpers.hpp), through all three entry points: the single-subset call
// obj(subset_view), the backend's batched eigen_backend::evaluate, and objective_function::raw.
//
// Tolerances. Double embeddings: 1e-10 relative. Float embeddings: the references read the
// same float values (exactly representable in double), so the only difference is the library's
// float arithmetic: facility location forms its dot products in T and DiSF its correlation
// matrix in T, whose rounding error is about d * 2^-24 ~ 2e-6 relative for d <= 24; 1e-5
// leaves a factor of 5 and still catches any formula error (those are O(1e-2) or larger).
// "Relative" is measured against the natural magnitude of the summands (at least 1 for
// cosine-based values, which would otherwise be relative to a value near 0).
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "helpers.hpp"

using datamask::index_t;
using datamask::similarity_kernel;

namespace {

template <class T>
constexpr double tolerance() {
  return std::is_same_v<T, double> ? 1e-10 : 1e-5;
}

void check_close(double got, double want, double magnitude, double tol) {
  INFO("got " << got << " want " << want << " magnitude " << magnitude);
  CHECK(std::isfinite(got));
  CHECK(std::abs(got - want) <= tol * std::max(std::abs(want), magnitude));
}

struct shape {
  index_t n, k, d;
};
// k < d, k > d, k = 2 (smallest PWS/DiSF subset), k = d, a reference larger than a tile, and
// 4 k <= d (DiSF's k x k Gram path).
const std::vector<shape> shapes = {{40, 5, 12}, {40, 15, 4}, {30, 2, 3}, {64, 24, 24}, {300, 7, 6}, {60, 4, 20}};

const char* kernel_name(similarity_kernel k) {
  switch (k) {
    case similarity_kernel::cosine: return "cosine";
    case similarity_kernel::cosine2: return "cosine2";
    case similarity_kernel::dot: return "dot";
    case similarity_kernel::rbf: return "rbf";
  }
  return "?";
}

/// Scores `subsets` (G rows of k) three ways and compares each with `ref(u, reference)`.
template <class T, class D, class Ref>
void check_objective(const D& objective, const shape& sh, std::uint64_t seed, double magnitude,
                     const std::vector<index_t>& reference_or_empty, Ref ref) {
  const index_t n = sh.n, k = sh.k, d = sh.d;
  const auto x = dmtest::random_embeddings<T>(n, d, seed);
  std::vector<double> inv, sq;
  dmtest::norms(x, n, d, inv, sq);
  const auto xv = datamask::make_matrix_view(x.data(), n, d);
  std::vector<index_t> reference = reference_or_empty;
  if (reference.empty()) {
    reference.resize(static_cast<std::size_t>(n));
    std::iota(reference.begin(), reference.end(), index_t{0});
  }
  const double tol = tolerance<T>();

  dmtest::rng r(seed + 1000);
  const index_t g_count = 6;
  std::vector<index_t> subsets;
  std::vector<std::vector<index_t>> us;
  for (index_t g = 0; g < g_count; ++g) {
    us.push_back(r.distinct(n, k));
    subsets.insert(subsets.end(), us.back().begin(), us.back().end());
  }
  std::vector<double> want(static_cast<std::size_t>(g_count));
  for (index_t g = 0; g < g_count; ++g) want[g] = ref(x, d, us[g], reference);

  // 1. The single-subset call.
  for (index_t g = 0; g < g_count; ++g) {
    const datamask::subset_view<T> s{xv, inv.data(), sq.data(),
                                     datamask::index_view(us[g].data(), k),
                                     datamask::index_view(reference.data(),
                                                          static_cast<index_t>(reference.size()))};
    INFO("single-subset call, subset " << g);
    check_close(objective(s), want[g], magnitude, tol);
  }

  // 2. The backend's batched path, G subsets at once, on 1 and 2 threads.
  for (int threads : {1, 2}) {
    datamask::eigen_backend b;
    b.threads = threads;
    std::vector<datamask::id_t> ids(static_cast<std::size_t>(n));
    std::iota(ids.begin(), ids.end(), datamask::id_t{0});
    const auto ds = b.make_dataset(xv, std::span<const double>(inv), std::span<const double>(sq),
                                   std::span<const datamask::id_t>(ids));
    std::vector<double> out(static_cast<std::size_t>(g_count), -12345.0);
    b.evaluate(objective, ds, subsets, g_count, k, reference, std::span<double>(out));
    for (index_t g = 0; g < g_count; ++g) {
      INFO("eigen_backend::evaluate, threads " << threads << ", subset " << g);
      check_close(out[g], want[g], magnitude, tol);
    }
  }

  // 3. objective_function::raw (lambda = 0: the diversity term alone), which computes the norms
  //    itself; the reference set is the whole block unless given.
  const datamask::problem<T> p{xv, {}, {}};
  const datamask::objective_function<T, D> f(p, objective, 0.0);
  REQUIRE(f.terms().size() == 1);
  for (index_t g = 0; g < g_count; ++g) {
    INFO("objective_function::raw, subset " << g);
    const auto raw = reference_or_empty.empty()
                         ? f.raw(std::span<const index_t>(us[g]))
                         : f.raw(std::span<const index_t>(us[g]), std::span<const index_t>(reference));
    REQUIRE(raw.size() == 1);
    check_close(raw[0], want[g], magnitude, tol);
    if (reference_or_empty.empty()) {
      // f with unit scale and weight 1 - lambda = 1 is the raw value.
      check_close(f(std::span<const index_t>(us[g])), want[g], magnitude, tol);
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("pairwise similarity matches the explicit loop over ordered pairs",
                   "[objectives][pairwise]", float, double) {
  for (const auto& sh : shapes) {
    DYNAMIC_SECTION("n " << sh.n << " k " << sh.k << " d " << sh.d) {
      check_objective<TestType>(datamask::pairwise_similarity{}, sh, 11 + sh.n * sh.k, 1.0, {},
                                [](const auto& x, index_t d, const auto& u, const auto&) {
                                  return dmtest::ref_pws(x, d, u);
                                });
    }
  }
}

TEMPLATE_TEST_CASE("facility location matches brute force for every kernel",
                   "[objectives][facility]", float, double) {
  for (similarity_kernel kernel : {similarity_kernel::cosine, similarity_kernel::cosine2,
                                   similarity_kernel::dot, similarity_kernel::rbf}) {
    for (const auto& sh : shapes) {
      for (bool given_reference : {false, true}) {
        DYNAMIC_SECTION(kernel_name(kernel) << " n " << sh.n << " k " << sh.k << " d " << sh.d
                                            << (given_reference ? " reference given" : " whole block")) {
          datamask::facility_location fl;
          fl.kernel = kernel;
          fl.gamma = 0.5 / static_cast<double>(sh.d);
          fl.tile = 16;  // several tiles, and a partial last one
          std::vector<index_t> reference;
          if (given_reference) {
            // Reference = the given rows only: a random half of the block, in random order.
            dmtest::rng r(77 + sh.n);
            reference = r.distinct(sh.n, sh.n / 2 + 1);
          }
          // dot values scale with ||e||^2 ~ d (1 + 0.49): that is their magnitude.
          const double magnitude =
              kernel == similarity_kernel::dot ? 1.5 * static_cast<double>(sh.d) : 1.0;
          check_objective<TestType>(
              fl, sh, 23 + sh.n * sh.d, magnitude, reference,
              [&](const auto& x, index_t d, const auto& u, const auto& v) {
                return dmtest::ref_fl(x, d, u, v, kernel, fl.gamma);
              });
        }
      }
    }
  }
}

TEST_CASE("facility location uses exactly the given reference rows", "[objectives][facility]") {
  // V = {3}: F_fl = max_j cos(e_3, e_j); V = the subset itself: every row covers itself, F = 1.
  const index_t n = 10, d = 5;
  const auto x = dmtest::random_embeddings<double>(n, d, 5);
  const datamask::problem<double> p{datamask::make_matrix_view(x.data(), n, d), {}, {}};
  const datamask::objective_function<double, datamask::facility_location> f(
      p, datamask::facility_location{}, 0.0);
  const std::vector<index_t> u = {1, 4, 7};
  const std::vector<index_t> v3 = {3};
  const double want3 = std::max({dmtest::cosine(x, d, 3, 1), dmtest::cosine(x, d, 3, 4),
                                 dmtest::cosine(x, d, 3, 7)});
  CHECK(f.raw(std::span<const index_t>(u), std::span<const index_t>(v3))[0] ==
        Approx(want3).epsilon(1e-12));
  CHECK(f.raw(std::span<const index_t>(u), std::span<const index_t>(u))[0] == Approx(1.0).epsilon(1e-12));
  // The whole block differs from both.
  const double whole = f.raw(std::span<const index_t>(u))[0];
  std::vector<index_t> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), index_t{0});
  CHECK(whole == Approx(dmtest::ref_fl(x, d, u, all, similarity_kernel::cosine, 1.0)).epsilon(1e-12));
  CHECK(whole < 1.0 - 1e-6);
}

TEMPLATE_TEST_CASE("DiSF matches explicit standardisation and the explicit d x d correlation",
                   "[objectives][disf]", float, double) {
  for (const auto& sh : shapes) {
    DYNAMIC_SECTION("n " << sh.n << " k " << sh.k << " d " << sh.d) {
      // DiSF is a sum of squares, never near 0 for d >= 2: plain relative error.
      check_objective<TestType>(datamask::disf{}, sh, 31 + sh.k * sh.d, 0.0, {},
                                [](const auto& x, index_t d, const auto& u, const auto&) {
                                  return dmtest::ref_disf(x, d, u);
                                });
    }
  }
}

TEMPLATE_TEST_CASE("the quality term is the mean (or sum) of the weighted score columns",
                   "[objectives][quality]", float, double) {
  const index_t n = 50, d = 6;
  const auto x = dmtest::random_embeddings<TestType>(n, d, 3);
  const auto q1 = dmtest::random_quality(n, 4);
  const auto q2 = dmtest::random_quality(n, 5);
  const double w1 = 0.7, w2 = 1.9;
  std::vector<double> q(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) q[i] = w1 * q1[i] + w2 * q2[i];
  const datamask::problem<TestType> p{datamask::make_matrix_view(x.data(), n, d),
                                      {{q1, w1}, {q2, w2}},
                                      {}};
  const double lambda = 0.3;
  const datamask::objective_function<TestType, datamask::pairwise_similarity> f(
      p, datamask::pairwise_similarity{}, lambda);
  const datamask::objective_function<TestType, datamask::pairwise_similarity> fsum(
      p, datamask::pairwise_similarity{}, lambda, datamask::quality_aggregate::sum);
  REQUIRE(f.terms().size() == 2);
  CHECK(f.terms()[0].name == "quality");
  CHECK(f.terms()[0].weight == lambda);
  CHECK(f.terms()[1].weight == Approx(1.0 - lambda).epsilon(1e-15));
  dmtest::rng r(9);
  for (index_t k : {1, 3, 17, 50}) {
    const auto u = r.distinct(n, k);
    const auto raw = f.raw(std::span<const index_t>(u));
    const double qm = dmtest::ref_quality_mean(q, u);
    CHECK(raw[0] == Approx(qm).epsilon(1e-12).margin(1e-12));
    CHECK(fsum.raw(std::span<const index_t>(u))[0] ==
          Approx(qm * static_cast<double>(k)).epsilon(1e-12).margin(1e-12));
    const double pws = dmtest::ref_pws(x, d, u);
    CHECK(raw[1] == Approx(pws).margin(tolerance<TestType>()));
    // f = lambda * F_q / s_q + (1 - lambda) * F_d / s_d with the scales set.
    auto g = f;
    const std::vector<double> scales = {2.5, 0.25};
    g.set_scales(scales);
    CHECK(g(std::span<const index_t>(u)) ==
          Approx(lambda * qm / 2.5 + (1 - lambda) * pws / 0.25).margin(10 * tolerance<TestType>()));
  }
}

TEST_CASE("objectives do not depend on the order of the subset", "[objectives]") {
  const index_t n = 40, d = 7;
  const auto x = dmtest::random_embeddings<double>(n, d, 8);
  const datamask::problem<double> p{datamask::make_matrix_view(x.data(), n, d), {}, {}};
  const auto fx = datamask::mix(datamask::weighted{datamask::pairwise_similarity{}, 1.0},
                                datamask::weighted{datamask::facility_location{}, 1.0},
                                datamask::weighted{datamask::disf{}, 1.0});
  const datamask::objective_function<double, decltype(fx)> f(p, fx, 0.0);
  REQUIRE(f.terms().size() == 3);
  std::vector<index_t> u = {3, 17, 5, 29, 11, 0, 38};
  const auto a = f.raw(std::span<const index_t>(u));
  std::reverse(u.begin(), u.end());
  const auto b = f.raw(std::span<const index_t>(u));
  for (std::size_t t = 0; t < 3; ++t) CHECK(a[t] == Approx(b[t]).epsilon(1e-12).margin(1e-14));
  CHECK(a[0] == Approx(dmtest::ref_pws(x, d, u)).epsilon(1e-10));
  CHECK(a[2] == Approx(dmtest::ref_disf(x, d, u)).epsilon(1e-10));
}

TEST_CASE("facility location's tiles give the same value on the caller's thread count", "[objectives][facility]") {
  // Single-subset evaluation runs its tiles on `subset_view::threads` threads (0: all); the tile
  // sums are added in tile order, so every thread count gives the same bits.
  const index_t n = 300, d = 6;
  const auto x = dmtest::random_embeddings<double>(n, d, 8);
  std::vector<double> inv(static_cast<std::size_t>(n)), sq(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) {
    double s = 0.0;
    for (index_t j = 0; j < d; ++j) s += x[static_cast<std::size_t>(i * d + j)] * x[static_cast<std::size_t>(i * d + j)];
    sq[static_cast<std::size_t>(i)] = s;
    inv[static_cast<std::size_t>(i)] = 1.0 / std::sqrt(s);
  }
  std::vector<index_t> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), index_t{0});
  const std::vector<index_t> u = {2, 40, 77, 150, 299};
  datamask::facility_location fl;
  fl.tile = 16;  // 19 tiles
  datamask::subset_view<double> s{datamask::make_matrix_view(x.data(), n, d), inv.data(), sq.data(),
                                  datamask::index_view(u), datamask::index_view(all)};
  s.threads = 1;
  const double one = fl(s);
  CHECK(one == Approx(dmtest::ref_fl(x, d, u, all, similarity_kernel::cosine, 1.0)).epsilon(1e-12));
  for (int t : {2, 3, 0}) {
    s.threads = t;
    CHECK(fl(s) == one);
  }
}

namespace {

/// The kernel's dot product of rows v and r as facility location forms it: unit rows (cosine
/// kernels) rounded to T, the product summed in T over the d columns in order.
template <class T>
double fixed_order_dot(const std::vector<T>& x, index_t d, const std::vector<double>& inv, similarity_kernel kernel,
                       index_t v, index_t r) {
  const bool unit = kernel == similarity_kernel::cosine || kernel == similarity_kernel::cosine2;
  auto e = [&](index_t row, index_t j) {
    const T val = x[static_cast<std::size_t>(row * d + j)];
    return unit ? static_cast<T>(static_cast<double>(val) * inv[row]) : val;
  };
  T acc = T(0);
  for (index_t c = 0; c < d; ++c) acc += e(v, c) * e(r, c);
  return static_cast<double>(acc);
}

/// Facility location of one subset, bit for bit as documented: each dot product as
/// `fixed_order_dot`, per reference row the best over the subset (in subset order), summed per
/// tile of `tile` reference rows, the tiles' sums in order, / |V|.
template <class T>
double fixed_order_fl(const std::vector<T>& x, index_t d, const std::vector<double>& inv, const std::vector<double>& sq,
                      const index_t* u, index_t k, const std::vector<index_t>& ref, similarity_kernel kernel,
                      double gamma, index_t tile) {
  double total = 0.0;
  const auto nv = static_cast<index_t>(ref.size());
  for (index_t v0 = 0; v0 < nv; v0 += tile) {
    double part = 0.0;
    for (index_t a = v0; a < std::min(nv, v0 + tile); ++a) {
      const index_t v = ref[a];
      double m = kernel == similarity_kernel::cosine2 ? 0.0
                 : kernel == similarity_kernel::rbf   ? std::numeric_limits<double>::infinity()
                                                      : -std::numeric_limits<double>::infinity();
      for (index_t j = 0; j < k; ++j) {
        const double dot = fixed_order_dot(x, d, inv, kernel, v, u[j]);
        if (kernel == similarity_kernel::cosine2) m = std::max(m, dot * dot);
        else if (kernel == similarity_kernel::rbf) m = std::min(m, sq[u[j]] - 2.0 * dot);
        else m = std::max(m, dot);
      }
      part += kernel == similarity_kernel::rbf ? std::exp(-gamma * std::max(0.0, sq[v] + m)) : m;
    }
    total += part;
  }
  return total / static_cast<double>(nv);
}

/// Facility location's marginals of one subset, bit for bit as documented: per reference row
/// the first item reaching the best (compared as the value is: rbf by ||j||^2 - 2 v.j) and the
/// best without it; best minus second best (the best itself for a single item) added to that
/// item's sum of the tile, rows in order; the tiles' sums in order, / |V|.
template <class T>
std::vector<double> fixed_order_marginals(const std::vector<T>& x, index_t d, const std::vector<double>& inv,
                                          const std::vector<double>& sq, const index_t* u, index_t k,
                                          const std::vector<index_t>& ref, similarity_kernel kernel, double gamma,
                                          index_t tile) {
  std::vector<double> out(static_cast<std::size_t>(k), 0.0);
  const auto nv = static_cast<index_t>(ref.size());
  for (index_t v0 = 0; v0 < nv; v0 += tile) {
    std::vector<double> lost(static_cast<std::size_t>(k), 0.0);
    for (index_t a = v0; a < std::min(nv, v0 + tile); ++a) {
      const index_t v = ref[a];
      double k1 = -std::numeric_limits<double>::infinity();
      double k2 = k1;
      index_t at = 0;
      for (index_t j = 0; j < k; ++j) {
        const double dot = fixed_order_dot(x, d, inv, kernel, v, u[j]);
        const double key = kernel == similarity_kernel::cosine2 ? dot * dot
                           : kernel == similarity_kernel::rbf   ? -(sq[u[j]] - 2.0 * dot)
                                                                : dot;
        if (key > k1) {
          k2 = k1;
          k1 = key;
          at = j;
        } else if (key > k2) {
          k2 = key;
        }
      }
      auto value = [&](double key) {
        return kernel == similarity_kernel::rbf ? std::exp(-gamma * std::max(0.0, sq[v] - key)) : key;
      };
      lost[at] += k == 1 ? value(k1) : value(k1) - value(k2);
    }
    for (index_t j = 0; j < k; ++j) out[j] += lost[j];
  }
  for (double& o : out) o /= static_cast<double>(nv);
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("facility location's batched rollouts and marginals equal one subset at a time, bit for bit",
                   "[objectives][facility][batch][credit]", float, double) {
  // A learner step: G rollouts of k rows drawn from an active batch of m rows, the batch as
  // reference set. The batch shares one product of the reference rows with the rollouts' rows;
  // each value must be the per-subset value and the fixed-order sum's, and each rollout's
  // marginals (per-item credit) the per-subset ones and the fixed-order sums', whatever G, the
  // tile groups held at once, or the thread count.
  const index_t n = 90, d = 37;
  const auto x = dmtest::random_embeddings<TestType>(n, d, 41);
  std::vector<double> inv, sq;
  dmtest::norms(x, n, d, inv, sq);
  for (similarity_kernel kernel : {similarity_kernel::cosine, similarity_kernel::cosine2, similarity_kernel::dot,
                                   similarity_kernel::rbf}) {
    for (const auto& [m, k, g_count] : {std::tuple<index_t, index_t, index_t>{70, 9, 12}, {40, 1, 5}, {33, 33, 3},
                                       {64, 40, 7}}) {
      INFO(kernel_name(kernel) << " m " << m << " k " << k << " G " << g_count);
      dmtest::rng r(static_cast<std::uint64_t>(m * 31 + k));
      const std::vector<index_t> active = r.distinct(n, m);
      std::vector<index_t> subsets;
      for (index_t g = 0; g < g_count; ++g) {
        const std::vector<index_t> pick = r.distinct(m, k);
        for (index_t t : pick) subsets.push_back(active[t]);
      }
      datamask::facility_location fl;
      fl.kernel = kernel;
      fl.gamma = 0.5 / static_cast<double>(d);
      fl.tile = 16;  // several tiles, a partial last one
      const datamask::batch_view<TestType> b{datamask::make_matrix_view(x.data(), n, d), inv.data(), sq.data(),
                                             datamask::matrix_view<const index_t>(subsets.data(), g_count, k),
                                             datamask::index_view(active)};
      std::vector<double> want(static_cast<std::size_t>(g_count));
      std::vector<double> want_marg;  // G x k
      for (index_t g = 0; g < g_count; ++g) {
        want[g] = fixed_order_fl(x, d, inv, sq, subsets.data() + g * k, k, active, kernel, fl.gamma, fl.tile);
        const std::vector<double> mg =
            fixed_order_marginals(x, d, inv, sq, subsets.data() + g * k, k, active, kernel, fl.gamma, fl.tile);
        want_marg.insert(want_marg.end(), mg.begin(), mg.end());
        datamask::subset_view<TestType> s = b[g];
        s.threads = 1;
        CHECK(fl(s) == want[g]);
        std::vector<double> one(static_cast<std::size_t>(k), -1.0);
        CHECK(fl.marginals(s, std::span<double>(one)) == want[g]);
        CHECK(one == mg);
        const std::vector<index_t> u(subsets.begin() + g * k, subsets.begin() + (g + 1) * k);
        check_close(want[g], dmtest::ref_fl(x, d, u, active, kernel, fl.gamma),
                    kernel == similarity_kernel::dot ? 1.5 * d : 1.0, tolerance<TestType>());
      }
      for (std::size_t group : {std::size_t{1}, std::size_t{64} << 20}) {  // one tile at a time, or all
        for (int threads : {1, 2}) {
          fl.group_bytes = group;
          datamask::batch_view<TestType> bt = b;
          bt.threads = threads;
          std::vector<double> got(static_cast<std::size_t>(g_count), -1.0);
          fl.evaluate_batch(bt, std::span<double>(got));
          CHECK(got == want);
          std::vector<double> values(static_cast<std::size_t>(g_count), -1.0);
          std::vector<double> marg(static_cast<std::size_t>(g_count * k), -1.0);
          fl.marginals_batch(bt, std::span<double>(values), std::span<double>(marg));
          CHECK(values == want);
          CHECK(marg == want_marg);
        }
      }
    }
  }
  static_assert(datamask::batched_marginal_objective<datamask::facility_location, float>);
  static_assert(!datamask::batched_marginal_objective<datamask::pairwise_similarity, float>);
}
