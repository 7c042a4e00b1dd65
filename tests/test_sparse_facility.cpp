// SPDX-License-Identifier: Apache-2.0
// Sparse facility location (objectives/sparse_facility.hpp): equal to dense facility location
// when the graph holds every item; its evaluation against its definition in double; naive, lazy
// and stochastic greedy through its greedy state against a brute-force greedy; its relaxation
// against enumeration of all subsets and its gradient against central finite differences.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <vector>

#include <datamask/datamask.hpp>
#include <datamask/learners/greedy/greedy.hpp>
#include <datamask/objectives/knn/build.hpp>
#include <datamask/objectives/sparse_facility.hpp>

#include "helpers.hpp"

namespace dm = datamask;
using dm::index_t;

static_assert(dm::incremental_objective<dm::sparse_facility_location, float>);
static_assert(dm::relaxable_objective<dm::sparse_facility_location, double>);

namespace {

struct block {
  index_t n = 0;
  index_t d = 0;
  std::vector<double> x;
  std::vector<double> q;
  std::vector<double> inv;
  std::vector<double> sq;
  std::vector<index_t> all;

  block(index_t n_, index_t d_, std::uint64_t seed, bool nonnegative) : n(n_), d(d_) {
    x = dmtest::random_embeddings<double>(n, d, seed);
    if (nonnegative) {
      for (double& v : x) v = std::abs(v);
    }
    q = dmtest::random_quality(n, seed + 1);
    for (index_t i = 0; i < n; ++i) {
      double s = 0.0;
      for (index_t j = 0; j < d; ++j) s += x[i * d + j] * x[i * d + j];
      sq.push_back(s);
      inv.push_back(1.0 / std::sqrt(s));
      all.push_back(i);
    }
  }
  dm::problem<double> problem() const {
    dm::problem<double> p;
    p.embeddings = dm::make_matrix_view(x.data(), n, d);
    p.quality.push_back({std::span<const double>(q), 1.0});
    return p;
  }
  dm::subset_view<double> view(const std::vector<index_t>& u, const std::vector<index_t>& ref) const {
    return {dm::make_matrix_view(x.data(), n, d), inv.data(), sq.data(), dm::index_view(std::span<const index_t>(u)),
            dm::index_view(std::span<const index_t>(ref))};
  }
  dm::sparse_facility_location sparse(index_t k, dm::similarity_kernel kern, double gamma) const {
    dm::knn_settings s;
    s.neighbors = k;
    s.kernel = kern;
    s.gamma = gamma;
    s.tile = 13;
    return {std::make_shared<const dm::knn_graph>(dm::build_knn_graph(problem(), s))};
  }
};

/// The definition: per reference item, the best clamped similarity among its neighbours in U.
double brute_sparse(const dm::knn_graph& g, const std::vector<index_t>& u, const std::vector<index_t>& ref) {
  double total = 0.0;
  for (index_t v : ref) {
    double best = 0.0;
    for (index_t r = 0; r < g.k; ++r) {
      if (std::find(u.begin(), u.end(), g.neighbor(v, r)) != u.end()) {
        best = std::max(best, static_cast<double>(g.similarity(v, r)));
      }
    }
    total += best;
  }
  return ref.empty() ? 0.0 : total / static_cast<double>(ref.size());
}

/// Greedy from the definition: each round the candidate with the largest f(S + i), ties to the
/// smaller row.
std::vector<index_t> brute_greedy(const std::function<double(const std::vector<index_t>&)>& f, index_t n,
                                  index_t count) {
  std::vector<index_t> s;
  std::vector<char> in(static_cast<std::size_t>(n), 0);
  for (index_t t = 0; t < count; ++t) {
    index_t arg = -1;
    double best = -1e300;
    for (index_t i = 0; i < n; ++i) {
      if (in[i]) continue;
      s.push_back(i);
      const double v = f(s);
      s.pop_back();
      if (v > best + 1e-12) {
        best = v;
        arg = i;
      }
    }
    s.push_back(arg);
    in[arg] = 1;
  }
  return s;
}

}  // namespace

TEST_CASE("sparse facility location with every item as neighbour equals dense facility location",
          "[sparse_facility]") {
  const block b(50, 6, 3, true);
  dmtest::rng r(7);
  for (auto kern : {dm::similarity_kernel::cosine, dm::similarity_kernel::cosine2, dm::similarity_kernel::dot,
                    dm::similarity_kernel::rbf}) {
    dm::facility_location dense;
    dense.kernel = kern;
    dense.gamma = 0.3;
    const auto sparse = b.sparse(b.n, kern, dense.gamma);
    for (index_t k : {1, 4, 20}) {
      const auto u = r.distinct(b.n, k);
      const auto ref = r.distinct(b.n, 17);
      for (const auto* v : {&ref, &b.all}) {
        const double want = dense(b.view(u, *v));
        CHECK(std::abs(sparse(b.view(u, *v)) - want) <= 1e-6 * std::max(1.0, std::abs(want)));
      }
    }
  }
}

TEST_CASE("sparse facility location on a partial graph follows its definition", "[sparse_facility]") {
  const block b(60, 5, 4, false);  // negative cosines: clamped at 0
  dmtest::rng r(8);
  for (auto kern : {dm::similarity_kernel::cosine, dm::similarity_kernel::rbf}) {
    const auto sparse = b.sparse(6, kern, 0.4);
    for (index_t k : {0, 1, 5, 30}) {
      const auto u = r.distinct(b.n, k);
      const auto ref = r.distinct(b.n, 25);
      CHECK(std::abs(sparse(b.view(u, ref)) - brute_sparse(*sparse.graph, u, ref)) <= 1e-12);
      CHECK(std::abs(sparse(b.view(u, b.all)) - brute_sparse(*sparse.graph, u, b.all)) <= 1e-12);
    }
  }
  // A graph of another block is refused.
  const block other(61, 5, 4, false);
  const auto sparse = b.sparse(6, dm::similarity_kernel::cosine, 1.0);
  CHECK_THROWS_AS(sparse(other.view({1, 2}, other.all)), dm::invalid_input);
}

TEST_CASE("naive, lazy and stochastic greedy on sparse facility location match the brute-force greedy",
          "[sparse_facility]") {
  const block b(70, 5, 5, false);
  for (double lambda : {0.0, 0.5}) {
    for (index_t k : {5, 70}) {
      const auto sparse = b.sparse(k, dm::similarity_kernel::cosine, 1.0);
      const dm::objective_function<double, dm::sparse_facility_location> f(b.problem(), sparse, lambda);
      const index_t count = 12;
      const auto want = brute_greedy([&](const std::vector<index_t>& s) { return f(s); }, b.n, count);
      dm::greedy_options o;
      o.method = dm::greedy_method::naive;
      const auto naive = dm::greedy_select(f, count, o);
      CHECK(naive.rows == want);
      CHECK(std::abs(naive.objective - f(want)) <= 1e-9);
      o.method = dm::greedy_method::lazy;
      CHECK(dm::greedy_select(f, count, o).rows == want);
      o.method = dm::greedy_method::stochastic;
      o.epsilon = 1e-9;  // samples of n or more: every candidate, naive greedy
      CHECK(dm::greedy_select(f, count, o).rows == want);
    }
  }
}

TEST_CASE("the relaxation of sparse facility location: exact expectation and gradient", "[sparse_facility]") {
  const block b(10, 4, 6, false);
  dmtest::rng r(9);
  for (index_t k : {3, 10}) {
    const auto sparse = b.sparse(k, dm::similarity_kernel::cosine2, 1.0);
    std::vector<double> p(static_cast<std::size_t>(b.n));
    for (double& v : p) v = 0.05 + 0.9 * r.uniform();
    auto relax = [&](const std::vector<double>& at, std::vector<double>& grad) {
      grad.assign(at.size(), 0.0);
      const dm::relax_view<double> v{dm::make_matrix_view(b.x.data(), b.n, b.d), b.inv.data(), b.sq.data(),
                                     std::span<const double>(at), 3.0, 1};
      return dm::relax_on_host(sparse, v, std::span<double>(grad));
    };
    std::vector<double> grad;
    const double val = relax(p, grad);
    // Enumeration: sum over all 2^n subsets of P(U) F(U), items included independently.
    double want = 0.0;
    for (unsigned mask = 0; mask < (1u << b.n); ++mask) {
      std::vector<index_t> u;
      double pr = 1.0;
      for (index_t i = 0; i < b.n; ++i) {
        const bool in = (mask >> i) & 1u;
        pr *= in ? p[i] : 1.0 - p[i];
        if (in) u.push_back(i);
      }
      want += pr * brute_sparse(*sparse.graph, u, b.all);
    }
    CHECK(std::abs(val - want) <= 1e-12);
    // Central finite differences (F is multilinear: exact up to rounding).
    const double h = 1e-5;
    std::vector<double> scratch;
    for (index_t i = 0; i < b.n; ++i) {
      auto hi = p;
      auto lo = p;
      hi[i] += h;
      lo[i] -= h;
      const double fd = (relax(hi, scratch) - relax(lo, scratch)) / (2.0 * h);
      CHECK(std::abs(grad[i] - fd) <= 1e-8);
    }
    // At an integral p, the objective on that set, the whole block as reference set.
    const std::vector<index_t> u{1, 4, 7};
    std::vector<double> ind(static_cast<std::size_t>(b.n), 0.0);
    for (index_t i : u) ind[i] = 1.0;
    CHECK(std::abs(relax(ind, scratch) - sparse(b.view(u, b.all))) <= 1e-12);
  }
}

TEST_CASE("the continuous learner optimises sparse facility location", "[sparse_facility]") {
  const block b(300, 6, 10, false);
  const auto sparse = b.sparse(16, dm::similarity_kernel::cosine, 1.0);
  dm::continuous_options o;
  o.common.ratio = 0.1;
  o.common.lambda = 0.0;
  o.common.seed = 3;
  o.ascent.iterations = 60;
  const auto res = dm::continuous_learner(o).select(b.problem(), sparse);
  dm::objective_function<double, dm::sparse_facility_location> f(b.problem(), sparse, 0.0);
  dm::greedy_options g;
  g.method = dm::greedy_method::lazy;
  const auto greedy = dm::greedy_select(f, 30, g);
  REQUIRE(res.rows.size() == 30);
  // Random subsets of 30 as the floor; lazy greedy as the bar.
  dmtest::rng r(4);
  double random = 0.0;
  for (int t = 0; t < 20; ++t) random += f(r.distinct(b.n, 30)) / 20.0;
  const double share = (f(res.rows) - random) / (greedy.objective - random);
  CHECK(share >= 0.97);
}

TEST_CASE("the polish's swap gains on sparse facility location are exact", "[sparse_facility]") {
  const block b(80, 5, 12, false);
  dmtest::rng r(13);
  for (index_t k : {1, 7, 80}) {
    const auto sparse = b.sparse(k, dm::similarity_kernel::cosine, 1.0);
    std::vector<index_t> sel = r.distinct(b.n, 15);
    static_assert(dm::swappable_objective<dm::sparse_facility_location, double>);
    auto term = sparse.swap_state(b.view({}, b.all), sel);
    for (int step = 0; step < 40; ++step) {
      const index_t out = sel[static_cast<std::size_t>(r.below(15))];
      index_t in = r.below(b.n);
      while (std::find(sel.begin(), sel.end(), in) != sel.end()) in = r.below(b.n);
      auto next = sel;
      *std::find(next.begin(), next.end(), out) = in;
      const double want = sparse(b.view(next, b.all)) - sparse(b.view(sel, b.all));
      CHECK(std::abs(term.delta(out, in) - want) <= 1e-12);
      if (step % 2 == 0) {  // every other swap applied
        term.apply(out, in);
        sel = next;
      }
    }
  }
}

TEST_CASE("dense facility location's greedy similarity cache gives the same gains, bit for bit", "[sparse_facility]") {
  const block b(150, 6, 14, false);
  for (auto kern : {dm::similarity_kernel::cosine, dm::similarity_kernel::cosine2, dm::similarity_kernel::dot,
                    dm::similarity_kernel::rbf}) {
    dm::facility_location tiled;
    tiled.kernel = kern;
    tiled.gamma = 0.2;
    tiled.cache_bytes = 0;
    dm::facility_location cached = tiled;
    cached.cache_bytes = std::size_t{1} << 20;
    const dm::greedy_block<double> g{dm::make_matrix_view(b.x.data(), b.n, b.d), b.inv, b.sq, 2};
    auto st_tiled = tiled.greedy_state(g);
    auto st_cached = cached.greedy_state(g);
    CHECK(st_tiled.cache.empty());
    CHECK(st_cached.cache.size() == static_cast<std::size_t>(b.n * b.n));
    dmtest::rng r(15);
    for (int round = 0; round < 4; ++round) {
      const auto cands = r.distinct(b.n, 70);
      std::vector<double> a(cands.size(), 0.0);
      std::vector<double> c(cands.size(), 0.0);
      st_tiled.accumulate(cands, a, 1.0);
      st_cached.accumulate(cands, c, 1.0);
      CHECK(a == c);
      st_tiled.add(cands[0]);
      st_cached.add(cands[0]);
    }
    for (double lambda : {0.0, 0.5}) {
      const dm::objective_function<double, dm::facility_location> ft(b.problem(), tiled, lambda);
      const dm::objective_function<double, dm::facility_location> fc(b.problem(), cached, lambda);
      for (auto method : {dm::greedy_method::naive, dm::greedy_method::lazy}) {
        dm::greedy_options o;
        o.method = method;
        const auto x = dm::greedy_select(ft, 20, o);
        const auto y = dm::greedy_select(fc, 20, o);
        CHECK(x.rows == y.rows);
        CHECK(x.gains == y.gains);
      }
    }
  }
}
