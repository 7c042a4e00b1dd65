// SPDX-License-Identifier: Apache-2.0
// Certified selections (datamask/objectives/certify.hpp, docs/method.md section 7): the bound against the
// exhaustive optimum on tiny blocks, against every optimizer's selection on random blocks, on a
// constructed instance whose optimum is known, and against the numpy reference
// (benchmarks/certificates/certify.py) on fixed blocks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <datamask/objectives/certify.hpp>
#include <datamask/datamask.hpp>
#include <datamask/learners/greedy/greedy.hpp>
#include <datamask/io/npy.hpp>

#include "helpers.hpp"

namespace dm = datamask;
using dm::index_t;

namespace {

struct block {
  index_t n = 0;
  index_t d = 0;
  std::vector<double> x;
  std::vector<double> q;
  block(index_t n_, index_t d_, std::uint64_t seed)
      : n(n_),
        d(d_),
        x(dmtest::random_embeddings<double>(n_, d_, seed)),
        q(dmtest::random_quality(n_, seed + 99)) {}
  block(index_t n_, index_t d_, std::vector<double> x_, std::vector<double> q_)
      : n(n_), d(d_), x(std::move(x_)), q(std::move(q_)) {}
  [[nodiscard]] dm::problem<double> problem() const {
    dm::problem<double> p;
    p.embeddings = dm::make_matrix_view(x.data(), n, d);
    p.quality.push_back({std::span<const double>(q), 1.0});
    return p;
  }
  [[nodiscard]] dm::sparse_facility_location knn(index_t k) const {
    dm::knn_settings s;
    s.neighbors = k;
    s.threads = 1;
    return {std::make_shared<const dm::knn_graph>(dm::build_knn_graph(problem(), s))};
  }
};

/// Calls fn(rows) for every set of `size` rows of [0, n), in lexicographic order.
template <class Fn>
void for_each_subset(index_t n, index_t size, Fn&& fn) {
  std::vector<index_t> rows(static_cast<std::size_t>(size));
  std::iota(rows.begin(), rows.end(), index_t{0});
  while (true) {
    fn(std::as_const(rows));
    index_t i = size - 1;
    while (i >= 0 && rows[static_cast<std::size_t>(i)] == n - size + i) --i;
    if (i < 0) return;
    ++rows[static_cast<std::size_t>(i)];
    for (index_t j = i + 1; j < size; ++j)
      rows[static_cast<std::size_t>(j)] = rows[static_cast<std::size_t>(j - 1)] + 1;
  }
}

/// max f over every set of `size` rows of [0, n).
template <class F>
double exhaustive_optimum(const F& f, index_t n, index_t size) {
  double best = -std::numeric_limits<double>::infinity();
  for_each_subset(n, size, [&](const std::vector<index_t>& rows) { best = std::max(best, f(rows)); });
  return best;
}

/// The mean f over every set of `size` rows of [0, n).
template <class F>
double exhaustive_mean(const F& f, index_t n, index_t size) {
  double sum = 0.0;
  double count = 0.0;
  for_each_subset(n, size, [&](const std::vector<index_t>& rows) {
    sum += f(rows);
    count += 1.0;
  });
  return sum / count;
}

double tolerance(double x) { return 1e-12 * std::max(1.0, std::abs(x)); }

/// Scales away from 1, one per term (as a run's calibration fixes them), so a mix-up shows.
template <class F>
void set_test_scales(F& f) {
  std::vector<double> scales;
  for (const auto& t : f.terms())
    scales.push_back(t.name == "quality" ? 0.7 : 1.3 + 0.2 * static_cast<double>(scales.size()));
  f.set_scales(scales);
}

/// The bound of every selection and budget is at least the exhaustive optimum, exact at lambda 1;
/// each term's re-check equals what its method reported.
template <class D>
void check_tiny(const block& b, const D& objective, const char* name) {
  const dm::problem<double> p = b.problem();
  for (index_t size : {2, 4, 7}) {
    for (double lambda : {0.0, 0.3, 0.7, 1.0}) {
      // the quality term as a mean, and (at S = 4) as a sum
      const auto aggregate = size == 4 ? dm::quality_aggregate::sum : dm::quality_aggregate::mean;
      dm::objective_function<double, D> f(p, objective, lambda, aggregate);
      set_test_scales(f);
      const double optimum = exhaustive_optimum(f, b.n, size);
      dm::greedy_options go;
      go.threads = 1;
      const std::vector<index_t> greedy = dm::greedy_select(f, size, go).rows;
      const std::vector<index_t> random =
          dmtest::rng(static_cast<std::uint64_t>(size) * 31u).distinct(b.n, size);
      for (const auto& selection : {greedy, random}) {
        for (index_t iterations : {1, 0}) {  // the start only, and the default budget
          dm::certify_settings s;
          s.iterations = iterations;
          s.random_subsets = 8;
          s.threads = 1;
          if (iterations == 1) s.memory_bytes = 0;  // dense similarities recomputed, not held
          const dm::certificate_report r = dm::certify(f, selection, s);
          INFO(name << ": S " << size << ", lambda " << lambda << ", iterations " << iterations
                    << (aggregate == dm::quality_aggregate::sum ? ", quality summed" : ""));
          REQUIRE(r.certified);
          CHECK(r.bound >= optimum - tolerance(optimum));
          CHECK(r.gap >= 0.0);
          CHECK(r.value ==
                Approx(f(selection)).epsilon(1e-12));  // f of the sorted rows: another sum order
          if (lambda == 1.0) {
            CHECK(std::abs(r.bound - optimum) <= tolerance(optimum));
            REQUIRE(r.terms.size() == 1);
            CHECK(r.terms[0].method == "top-S");
          }
          for (const auto& t : r.terms)
            CHECK(std::abs(t.bound - t.claimed) <= 1e-10 * std::max(1.0, std::abs(t.bound)));
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("certify: on tiny blocks the bound is at least the exhaustive optimum, exact at lambda 1",
          "[certify]") {
  for (std::uint64_t seed : {1u, 2u}) {
    const block b(12, 5, seed);
    check_tiny(b, dm::pairwise_similarity{}, "pairwise");
    for (auto kernel : {dm::similarity_kernel::cosine, dm::similarity_kernel::cosine2,
                        dm::similarity_kernel::dot, dm::similarity_kernel::rbf}) {
      dm::facility_location fl;
      fl.kernel = kernel;
      fl.gamma = 0.3;
      check_tiny(b, fl, "facility (dense)");
    }
    check_tiny(b, b.knn(4), "facility (kNN, K = 4)");
    check_tiny(b,
               dm::mix(dm::weighted{dm::pairwise_similarity{}, 1.0}, dm::weighted{b.knn(4), 0.5}),
               "pairwise + facility (kNN)");
    check_tiny(b,
               dm::mix(dm::weighted{dm::facility_location{}, 0.7},
                       dm::weighted{dm::pairwise_similarity{}, 1.0}),
               "facility (dense) + pairwise");
  }
  // Ties and a zero row: rows 6..11 repeat rows 0..5 (equal gradients, equal columns), and row 2
  // is zero (its cosines are 0, as the objectives count them).
  block b(12, 5, 3);
  for (index_t i = 6; i < 12; ++i) {
    std::copy_n(b.x.begin() + (i - 6) * b.d, b.d, b.x.begin() + i * b.d);
    b.q[static_cast<std::size_t>(i)] = b.q[static_cast<std::size_t>(i - 6)];
  }
  std::fill_n(b.x.begin() + 2 * b.d, b.d, 0.0);
  check_tiny(b, dm::pairwise_similarity{}, "pairwise, ties and a zero row");
  check_tiny(b, dm::facility_location{}, "facility (dense), ties and a zero row");
  check_tiny(b, b.knn(4), "facility (kNN), ties and a zero row");
  // A graph of its own, set up directly (make_knn_graph refuses a repeated neighbour): each item
  // lists its successor twice and, for every third item, a negative similarity (clamped at 0, as
  // sparse facility location counts it).
  auto graph = std::make_shared<dm::knn_graph>();
  graph->n = 12;
  graph->k = 4;
  for (index_t v = 0; v < 12; ++v) {
    graph->ids.insert(graph->ids.end(), {v, (v + 1) % 12, (v + 1) % 12, (v + 5) % 12});
    graph->sims.insert(graph->sims.end(), {1.0f, 0.6f, 0.6f, v % 3 == 0 ? -0.4f : 0.3f});
  }
  check_tiny(b, dm::sparse_facility_location{graph},
             "facility (kNN), a repeated neighbour and a negative similarity");
}

TEST_CASE(
    "certify: the dense dual recomputes its similarities when the n x n values exceed the budget",
    "[certify]") {
  const block b(40, 6, 5);
  dm::objective_function<double, dm::facility_location> f(b.problem(), dm::facility_location{},
                                                          0.5);
  set_test_scales(f);
  const std::vector<index_t> selection = dmtest::rng(3).distinct(b.n, 6);
  dm::certify_settings held;
  held.threads = 1;
  held.random_subsets = 0;
  dm::certify_settings recomputed = held;
  recomputed.memory_bytes = 0;
  const auto a = dm::certify(f, selection, held);
  const auto c = dm::certify(f, selection, recomputed);
  REQUIRE(a.certified);
  CHECK(c.bound == Approx(a.bound).epsilon(1e-12));
  CHECK(std::isnan(a.certified_share));  // no random subsets, no share
}

/// certify's bound and certificate for f on one thread and on two: the same bits.
template <class F>
void check_thread_counts(const F& f, std::span<const index_t> selection, index_t iterations) {
  dm::certify_settings one;
  one.threads = 1;
  one.random_subsets = 0;
  one.iterations = iterations;
  dm::certify_settings two = one;
  two.threads = 2;
  const auto a = dm::certify(f, selection, one);
  const auto c = dm::certify(f, selection, two);
  REQUIRE(a.certified);
  CHECK(a.terms[0].claimed == c.terms[0].claimed);
  CHECK(a.bound == c.bound);
  CHECK(a.terms[0].certificate == c.terms[0].certificate);
}

TEST_CASE("certify: the same bound whatever the thread count", "[certify]") {
  const block b(400, 12, 13);
  const dm::problem<double> p = b.problem();
  const auto check = [&](const auto& objective) {
    using D = std::decay_t<decltype(objective)>;
    dm::objective_function<double, D> f(p, objective, 0.4);
    set_test_scales(f);
    check_thread_counts(f, dmtest::rng(17).distinct(b.n, 40), 0);
  };
  check(dm::pairwise_similarity{});
  check(dm::facility_location{});
  check(b.knn(10));
  // The kNN dual's pass splits its columns over the threads only above a size (a work estimate):
  // a block large enough that two threads do run it.
  const block large(6000, 8, 14);
  const dm::problem<double> lp = large.problem();
  dm::objective_function<double, dm::sparse_facility_location> f(lp, large.knn(10), 0.4);
  set_test_scales(f);
  check_thread_counts(f, dmtest::rng(18).distinct(large.n, 600), 20);
}

TEST_CASE("certify: the dual's top set is the S largest b, ties to the smaller row", "[certify]") {
  dmtest::rng r(5);
  std::vector<double> scratch;
  for (index_t n = 1; n <= 40; n += 3) {
    std::vector<double> b(static_cast<std::size_t>(n));
    for (double& x : b) x = static_cast<double>(r.below(4)) - 1.5;  // many ties
    std::vector<index_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), index_t{0});
    std::stable_sort(order.begin(), order.end(), [&](index_t i, index_t j) {
      return b[static_cast<std::size_t>(i)] > b[static_cast<std::size_t>(j)];
    });
    for (index_t size = 1; size <= n; ++size) {
      std::vector<index_t> expected(order.begin(), order.begin() + size);
      std::sort(expected.begin(), expected.end());
      INFO("n " << n << ", S " << size);
      double floor = -std::numeric_limits<double>::infinity();  // no floor: every value
      CHECK(dm::detail::facility_dual::top_rows(b, size, scratch, floor) == expected);
    }
  }
}

TEST_CASE("certify: the dual's top set is the same whatever floor limits its selection",
          "[certify]") {
  dmtest::rng r(6);
  std::vector<double> scratch;
  for (index_t n : {1, 7, 40, 300}) {
    std::vector<double> b(static_cast<std::size_t>(n));
    double floor = -std::numeric_limits<double>::infinity();  // carried from call to call
    for (int call = 0; call < 12; ++call) {
      // values that move a little from call to call (the floor then holds) or jump (it fails)
      for (double& x : b) x = call % 4 == 3 ? static_cast<double>(r.below(9)) - 20.0 : x + static_cast<double>(r.below(3));
      std::vector<index_t> order(static_cast<std::size_t>(n));
      std::iota(order.begin(), order.end(), index_t{0});
      std::stable_sort(order.begin(), order.end(), [&](index_t i, index_t j) {
        return b[static_cast<std::size_t>(i)] > b[static_cast<std::size_t>(j)];
      });
      const index_t size = 1 + r.below(n);
      std::vector<index_t> expected(order.begin(), order.begin() + size);
      std::sort(expected.begin(), expected.end());
      INFO("n " << n << ", call " << call << ", S " << size << ", floor " << floor);
      CHECK(dm::detail::facility_dual::top_rows(b, size, scratch, floor) == expected);
      // and with a floor above the S-th value: every value is selected from
      double high = b[static_cast<std::size_t>(order[0])] + 1.0;
      CHECK(dm::detail::facility_dual::top_rows(b, size, scratch, high) == expected);
    }
  }
}

/// #{s in top : w_vs > lambda_v} for every v, from the graph's rows (w = c max(0, sim)).
std::vector<std::int32_t> brute_count(const dm::knn_graph& g, double c, std::span<const index_t> top,
                                      std::span<const double> lambda) {
  std::vector<char> in(static_cast<std::size_t>(g.n), 0);
  for (index_t s : top) in[static_cast<std::size_t>(s)] = 1;
  std::vector<std::int32_t> count(static_cast<std::size_t>(g.n), 0);
  for (index_t v = 0; v < g.n; ++v) {
    for (index_t k = 0; k < g.k; ++k) {
      const double w = c * std::max(0.0, static_cast<double>(g.similarity(v, k)));
      if (in[static_cast<std::size_t>(g.neighbor(v, k))] && w > lambda[static_cast<std::size_t>(v)])
        ++count[static_cast<std::size_t>(v)];
    }
  }
  return count;
}

TEST_CASE("certify: the dual's evaluation counts its top set, whatever the previous top set was",
          "[certify]") {
  // Large enough that two threads share the pass (its work estimate), and counted columns fall
  // on both. lambda moves as the method moves it (small steps down: the pass skips the columns
  // that cannot reach the top set), jumps up (the skipped columns are then computed after
  // all), or is drawn again in part (the top set changes partly: the count is corrected by the
  // columns that joined or left) or wholly. Each evaluation against the brute force.
  const block b(6000, 8, 21);
  const dm::sparse_facility_location knn = b.knn(10);
  const dm::knn_graph& g = *knn.graph;
  const double weight = 3.0;
  const double c = weight / static_cast<double>(g.n);
  std::vector<double> linear(static_cast<std::size_t>(b.n));
  dmtest::rng r(22);
  for (double& a : linear) a = 0.01 * c * r.uniform();
  const index_t size = 500;
  const dm::bound_view<double> v{dm::make_matrix_view(b.x.data(), b.n, b.d), nullptr, nullptr,
                                 linear, weight, size, {}, 0, 1};
  for (int threads : {1, 2}) {
    const dm::detail::facility_dual::knn_pairs pairs(g, weight, threads);
    dm::detail::facility_dual::dual_evaluator<dm::detail::facility_dual::knn_pairs> evaluate(
        pairs, linear, size);
    dm::detail::facility_dual::dual_point at;
    std::vector<double> lambda(static_cast<std::size_t>(b.n));
    std::ptrdiff_t skipped = 0;
    int recomputed = 0;
    for (int t = 0; t < 14; ++t) {
      for (double& l : lambda) {
        if (t == 0 || (t == 12 && r.uniform() < 0.3) || t == 13) {
          l = r.uniform() < 0.2 ? 0.0 : c * r.uniform();  // drawn again
        } else if (t == 8) {
          l += 0.5 * c;  // up: every b falls, below the floor
        } else {
          l = std::max(0.0, l - 0.002 * c * r.uniform());  // a small step down
        }
      }
      evaluate(lambda, at);
      skipped += evaluate.skipped();
      recomputed += evaluate.recomputed() ? 1 : 0;
      INFO("threads " << threads << ", evaluation " << t);
      // the same bits as a full pass: a fresh evaluator (no floor, nothing counted before)
      dm::detail::facility_dual::dual_evaluator<dm::detail::facility_dual::knn_pairs> fresh(
          pairs, linear, size);
      dm::detail::facility_dual::dual_point full;
      fresh(lambda, full);
      CHECK(fresh.skipped() == 0);
      CHECK(at.top == full.top);
      CHECK(at.count == full.count);
      CHECK(at.value == full.value);
      REQUIRE(at.top.size() == static_cast<std::size_t>(size));
      CHECK(std::is_sorted(at.top.begin(), at.top.end()));
      CHECK(at.count == brute_count(g, c, at.top, lambda));
      // L re-computed row by row (`check_knn`'s order) from the top set's own sum
      CHECK(at.value == Approx(dm::detail::facility_dual::check_knn(v, g, lambda)).epsilon(1e-12));
      // and the top set: the S largest b, recomputed row by row
      std::vector<double> bs(linear);
      for (index_t u = 0; u < g.n; ++u) {
        for (index_t k = 0; k < g.k; ++k) {
          const double w = c * std::max(0.0, static_cast<double>(g.similarity(u, k)));
          bs[static_cast<std::size_t>(g.neighbor(u, k))] += std::max(0.0, w - lambda[static_cast<std::size_t>(u)]);
        }
      }
      double smallest_in = std::numeric_limits<double>::infinity();
      std::vector<char> in(static_cast<std::size_t>(g.n), 0);
      for (index_t s : at.top) {
        in[static_cast<std::size_t>(s)] = 1;
        smallest_in = std::min(smallest_in, bs[static_cast<std::size_t>(s)]);
      }
      for (index_t s = 0; s < g.n; ++s) {
        if (!in[static_cast<std::size_t>(s)]) CHECK(bs[static_cast<std::size_t>(s)] <= smallest_in + 1e-12 * std::abs(smallest_in));
      }
    }
    CHECK(skipped > 0);      // the screening ran
    CHECK(recomputed >= 1);  // and its fallback
  }
}

TEST_CASE("certify: the dense dual's evaluation is a full pass's, held or recomputed", "[certify]") {
  // The pairs above the floors held: the pass counts the previous top set and skips columns;
  // recomputed: it does neither (its products are by blocks of columns, the count's by blocks of
  // rows). With lambda above the floors, each evaluation equals a fresh evaluator's (a full
  // pass) of either form: the same bits, as the pairs left out add exactly 0.
  const block b(300, 6, 31);
  dm::objective_function<double, dm::facility_location> f(b.problem(), dm::facility_location{}, 0.5);
  std::vector<double> linear(static_cast<std::size_t>(b.n));
  dmtest::rng r(32);
  for (double& a : linear) a = 1e-4 * r.uniform();
  const index_t size = 30;
  const double weight = 2.0;
  const double c = weight / static_cast<double>(b.n);
  const std::vector<index_t> selection = r.distinct(b.n, size);
  using pairs_t = dm::detail::facility_dual::dense_pairs<double>;
  using evaluator = dm::detail::facility_dual::dual_evaluator<pairs_t>;
  auto make = [&](std::size_t memory) {
    const dm::bound_view<double> v{f.embeddings(), f.inv_norms().data(), f.sq_norms().data(),
                                   linear, weight, size, {}, 0, 2, memory};
    pairs_t pairs(v, dm::similarity_kernel::cosine, 1.0);
    std::vector<double> start(static_cast<std::size_t>(b.n));
    pairs.best(selection, start);
    for (double& l : start) l = std::max(0.0, l);
    pairs.hold(start);
    return pairs;
  };
  const pairs_t held = make(std::size_t{256} << 20);
  const pairs_t recomputed = make(0);
  REQUIRE(held.held());
  REQUIRE_FALSE(recomputed.held());
  const std::span<const double> floor = held.floors();
  index_t kept = 0;
  for (index_t s = 0; s < b.n; ++s) kept += held.column_length(s);
  CHECK(kept > 0);
  CHECK(kept < b.n * b.n);  // some pairs lie below the floors
  evaluator evaluate(held, linear, size);
  dm::detail::facility_dual::dual_point at;
  std::vector<double> lambda(floor.begin(), floor.end());
  std::ptrdiff_t skipped = 0;
  for (int t = 0; t < 10; ++t) {
    for (std::size_t v = 0; v < lambda.size(); ++v) {
      lambda[v] = t == 0 || t == 6 ? floor[v] + c * r.uniform()
                                   : std::max(floor[v], lambda[v] - 1e-4 * c * r.uniform());
    }
    evaluate(lambda, at);
    skipped += evaluate.skipped();
    for (const pairs_t* pairs : {&held, &recomputed}) {
      evaluator fresh(*pairs, linear, size);
      dm::detail::facility_dual::dual_point full;
      fresh(lambda, full);
      INFO("held " << pairs->held() << ", evaluation " << t);
      CHECK(at.top == full.top);
      CHECK(at.count == full.count);
      CHECK(at.value == full.value);
    }
  }
  CHECK(skipped > 0);
}

TEST_CASE("certify: the dual refuses a modular part that is not finite", "[certify]") {
  const block b(40, 4, 33);
  const dm::sparse_facility_location knn = b.knn(5);
  dm::objective_function<double, dm::sparse_facility_location> f(b.problem(), knn, 0.5);
  std::vector<double> linear(static_cast<std::size_t>(b.n), 0.01);
  linear[7] = std::numeric_limits<double>::quiet_NaN();
  const std::vector<index_t> selection = dmtest::rng(34).distinct(b.n, 4);
  std::vector<index_t> sorted(selection);
  std::sort(sorted.begin(), sorted.end());
  const dm::bound_view<double> v{f.embeddings(), f.inv_norms().data(), f.sq_norms().data(),
                                 linear, 1.0, 4, sorted, 0, 1};
  CHECK_THROWS_AS(knn.bound(v), dm::invalid_input);
  CHECK_THROWS_WITH(knn.bound(v), Catch::Contains("linear"));
}

TEST_CASE("certify: DiSF and an objective without the capability give no certificate, not a bound",
          "[certify]") {
  const block b(30, 5, 7);
  const dm::problem<double> p = b.problem();
  const std::vector<index_t> selection = dmtest::rng(4).distinct(b.n, 5);
  dm::certify_settings s;
  s.threads = 1;
  s.random_subsets = 4;
  {
    const dm::objective_function<double, dm::disf> f(p, dm::disf{}, 0.5);
    const auto r = dm::certify(f, selection, s);
    CHECK_FALSE(r.certified);
    CHECK(std::isnan(r.bound));
    CHECK(std::isnan(r.gap));
    CHECK(std::isnan(r.certified_share));
    CHECK(r.reason.find("disf") != std::string::npos);
  }
  {
    const auto m =
        dm::mix(dm::weighted{dm::pairwise_similarity{}, 1.0}, dm::weighted{dm::disf{}, 1.0});
    const dm::objective_function<double, decltype(m)> f(p, m, 0.5);
    const auto r = dm::certify(f, selection, s);
    CHECK_FALSE(r.certified);
    REQUIRE(r.terms.size() == 2);
    CHECK(r.terms[0].method == "frank-wolfe");
    CHECK(r.terms[1].method == "none");
  }
  {
    struct user_metric {  // scores a set, offers no bound
      double operator()(const dm::subset_view<double>& v) const {
        return static_cast<double>(v.subset.size);
      }
    };
    static_assert(!dm::boundable_objective<user_metric, double>);
    const dm::objective_function<double, user_metric> f(p, user_metric{}, 0.5);
    CHECK_FALSE(dm::certify(f, selection, s).certified);
  }
  {  // lambda = 1: quality only, exact whatever the diversity objective
    const dm::objective_function<double, dm::disf> f(p, dm::disf{}, 1.0);
    const auto r = dm::certify(f, selection, s);
    REQUIRE(r.certified);
    CHECK(r.bound == Approx(exhaustive_optimum(f, b.n, 5)).epsilon(1e-14));
  }
  static_assert(dm::boundable_objective<dm::pairwise_similarity, double>);
  static_assert(dm::boundable_objective<dm::facility_location, float>);
  static_assert(dm::boundable_objective<dm::sparse_facility_location, double>);
  static_assert(!dm::boundable_objective<dm::disf, double>);
}

TEST_CASE("certify: certificates are re-checked, and one outside its domain is refused",
          "[certify]") {
  const block b(50, 6, 8);
  const dm::problem<double> p = b.problem();
  dm::objective_function<double, dm::facility_location> f(p, dm::facility_location{}, 0.5);
  std::vector<double> linear(static_cast<std::size_t>(b.n), 0.1);
  const std::vector<index_t> selection = dmtest::rng(5).distinct(b.n, 5);
  const dm::bound_view<double> v{
      f.embeddings(), f.inv_norms().data(), f.sq_norms().data(), linear, 0.8, 5, selection, 20, 1};
  const dm::facility_location fl;
  const dm::bound_certificate c = fl.bound(v);
  CHECK(fl.check_bound(v, c.certificate) == Approx(c.bound).epsilon(1e-12));
  std::vector<double> negative = c.certificate;
  negative[3] = -1e-3;
  CHECK_THROWS_AS(fl.check_bound(v, negative), dm::invalid_input);
  CHECK_THROWS_AS(fl.check_bound(v, std::span<const double>(c.certificate).first(10)),
                  dm::invalid_input);
  // Any lambda >= 0 certifies, however poor: all zeros gives sum of the S largest column sums.
  const std::vector<double> zeros(static_cast<std::size_t>(b.n), 0.0);
  CHECK(fl.check_bound(v, zeros) >= c.bound);
  // Any finite p certifies the pairwise bound (g is concave on all of R^n).
  const dm::pairwise_similarity pw;
  dmtest::rng r(11);
  const block tiny(10, 4, 12);
  dm::objective_function<double, dm::pairwise_similarity> g(tiny.problem(), pw, 0.0);
  const std::vector<index_t> none;
  const dm::bound_view<double> w{
      g.embeddings(), g.inv_norms().data(), g.sq_norms().data(), {}, 2.0, 4, none, 0, 1};
  const double best = 2.0 * exhaustive_optimum(g, tiny.n, 4);
  for (int t = 0; t < 20; ++t) {
    std::vector<double> point(static_cast<std::size_t>(tiny.n));
    for (double& x : point) x = 0.3 + r.normal();
    CHECK(pw.check_bound(w, point) >= best - tolerance(best));
  }
  std::vector<double> bad(static_cast<std::size_t>(tiny.n),
                          std::numeric_limits<double>::quiet_NaN());
  CHECK_THROWS_AS(pw.check_bound(w, bad), dm::invalid_input);
}

namespace {

/// Every optimizer's selection of one block: greedy (naive, lazy, stochastic), the continuous
/// learner where the objective has a relaxation, and the policy-gradient learner; f with the
/// run's calibrated scales. Each selection's bound must be >= f of every selection.
template <class D>
void check_optimizers(const block& b, const D& objective, bool continuous, const char* name) {
  const dm::problem<double> p = b.problem();
  dm::settings o;
  o.ratio = 0.1;
  o.lambda = 0.5;
  o.threads = 1;  // one thread: a loaded machine makes OpenMP barriers spin
  o.steps = 60;   // a short policy-gradient run: its selection only has to be some selection
  o.rollouts = 32;
  o.seed = 3;
  const auto terms = dm::learner<>(o).calibrate(p, objective);
  std::vector<double> scales;
  for (const auto& t : terms) scales.push_back(t.scale);
  dm::objective_function<double, D> f(p, objective, o.lambda);
  f.set_scales(scales);
  const index_t size = 30;
  std::vector<std::vector<index_t>> selections;
  for (auto method :
       {dm::greedy_method::naive, dm::greedy_method::lazy, dm::greedy_method::stochastic}) {
    dm::greedy_options go;
    go.method = method;
    go.threads = 1;
    selections.push_back(dm::greedy_select(f, size, go).rows);
  }
  if constexpr (dm::relaxable_objective<D, double>) {
    if (continuous) {
      dm::continuous_options co;
      co.common = o;
      const auto res = dm::continuous_learner(co).select(p, objective);
      for (std::size_t t = 0; t < res.terms.size(); ++t) REQUIRE(res.terms[t].scale == scales[t]);
      selections.push_back(res.rows);
    }
  }
  const auto pg = dm::learner<>(o).select(p, objective);
  for (std::size_t t = 0; t < pg.terms.size(); ++t) REQUIRE(pg.terms[t].scale == scales[t]);
  selections.push_back(pg.rows);
  double best = -std::numeric_limits<double>::infinity();
  for (const auto& u : selections) {
    REQUIRE(static_cast<index_t>(u.size()) == size);
    best = std::max(best, f(u));
  }
  dm::certify_settings s;
  s.threads = 1;
  s.random_subsets = 64;
  for (std::size_t k = 0; k < selections.size(); ++k) {
    const auto r = dm::certify(f, selections[k], s);
    INFO(name << ", selection " << k);
    REQUIRE(r.certified);
    CHECK(r.bound >= best - tolerance(best));
    CHECK(r.gap >= 0.0);
    CHECK(std::isfinite(r.certified_share));
    CHECK(r.certified_share <= 1.0);
    const std::optional<double> exact = f.subset_mean(size);  // pairwise's closed form, else drawn
    CHECK(r.random_mean == Approx(exact ? *exact : dm::random_subsets_mean(f, size, 64, 0)).epsilon(1e-14));
    CHECK(r.random_draws == (exact ? 0 : 64));
    for (const auto& t : r.terms) {
      CHECK(t.bound == Approx(t.claimed).epsilon(1e-10));  // the certificate's re-check
      CHECK(t.evaluations >= 1);
    }
  }
}

}  // namespace

TEST_CASE("certify: the random subsets are uniform over every S-subset", "[certify]") {
  // All C(6, 3) = 20 subsets against their expected count over 40,000 draws: 2,000 each, a
  // binomial sd of 44; the bound of 6 sd cannot fail by chance at these fixed Philox draws
  // unless the sampler is biased (one of 20 missing or doubled moves a count by 2,000).
  const index_t n = 6;
  const index_t size = 3;
  const auto key = dm::rng::block_key(7, 0);
  std::vector<char> taken(static_cast<std::size_t>(n), 0);
  std::vector<int> count(64, 0);
  const int draws = 40000;
  for (int g = 0; g < draws; ++g) {
    const auto rows = dm::detail::certify_impl::random_subset(key, n, size, static_cast<std::uint32_t>(g), taken);
    REQUIRE(rows.size() == static_cast<std::size_t>(size));
    int mask = 0;
    for (index_t r : rows) {
      REQUIRE((r >= 0 && r < n));
      REQUIRE((mask & (1 << r)) == 0);  // distinct rows
      mask |= 1 << r;
    }
    ++count[static_cast<std::size_t>(mask)];
  }
  CHECK(std::count(taken.begin(), taken.end(), 0) == n);  // left clear for the next draw
  int subsets = 0;
  for (int mask = 0; mask < 64; ++mask) {
    if (__builtin_popcount(static_cast<unsigned>(mask)) != size) {
      CHECK(count[static_cast<std::size_t>(mask)] == 0);
      continue;
    }
    ++subsets;
    CHECK(std::abs(count[static_cast<std::size_t>(mask)] - draws / 20) <= 6 * 44);
  }
  CHECK(subsets == 20);
}

TEST_CASE("certify: on random blocks the bound is above every optimizer's selection", "[certify]") {
  const block b(300, 8, 21);
  check_optimizers(b, dm::pairwise_similarity{}, true, "pairwise");
  check_optimizers(b, dm::facility_location{}, false, "facility (dense)");
  check_optimizers(b, b.knn(16), true, "facility (kNN, K = 16)");
}

namespace {

/// Cluster k lies in span(e_k, e_{clusters + k}): across clusters every cosine is exactly 0,
/// inside one close to 1. With S = clusters and coverage worth far more than quality, the optimum
/// takes one item per cluster: the best of each cluster on its own (benchmarks/certificates/
/// test_certify.py, separated_clusters).
struct clustered {
  index_t clusters;
  index_t per;
  std::vector<index_t> label;
  block b;
  clustered(index_t c, index_t m, std::uint64_t seed)
      : clusters(c), per(m), b(make(c, m, seed, label)) {}
  static block make(index_t c, index_t m, std::uint64_t seed, std::vector<index_t>& label) {
    dmtest::rng r(seed);
    const index_t n = c * m;
    const index_t d = 2 * c;
    std::vector<double> x(static_cast<std::size_t>(n * d), 0.0);
    std::vector<double> q(static_cast<std::size_t>(n));
    label.resize(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) {
      const index_t k = i / m;
      label[static_cast<std::size_t>(i)] = k;
      x[static_cast<std::size_t>(i * d + k)] = 1.0;
      x[static_cast<std::size_t>(i * d + c + k)] = 0.05 * r.normal();
      q[static_cast<std::size_t>(i)] = 0.01 * r.uniform();
    }
    return block(n, d, std::move(x), std::move(q));
  }
  /// The best item of each cluster on its own (f counts coverage only inside the cluster).
  template <class F>
  std::vector<index_t> optimum_rows(const F& f) const {
    std::vector<index_t> rows;
    for (index_t k = 0; k < clusters; ++k) {
      index_t arg = -1;
      double top = -std::numeric_limits<double>::infinity();
      for (index_t i = k * per; i < (k + 1) * per; ++i) {
        std::vector<index_t> u;  // i with the best of every other cluster fixed: compare within k
        for (index_t j = 0; j < clusters; ++j) u.push_back(j == k ? i : j * per);
        const double v = f(u);
        if (v > top) {
          top = v;
          arg = i;
        }
      }
      rows.push_back(arg);
    }
    return rows;
  }
};

}  // namespace

TEST_CASE("certify: the dual is tight where the optimum is known (separated clusters)",
          "[certify]") {
  const clustered inst(20, 10, 9);
  const dm::problem<double> p = inst.b.problem();
  const auto check = [&](const auto& objective, const char* name) {
    using D = std::decay_t<decltype(objective)>;
    dm::objective_function<double, D> f(p, objective, 0.5);
    f.set_scales(std::vector<double>{0.01, 0.05});
    const std::vector<index_t> best = inst.optimum_rows(f);
    const double optimum = f(best);
    dm::certify_settings s;
    s.iterations = 400;
    s.threads = 2;
    s.random_subsets = 0;
    const auto r = dm::certify(f, best, s);
    INFO(name << ": optimum " << optimum << ", bound " << r.bound << ", claimed "
              << r.terms[0].claimed);
    REQUIRE(r.certified);
    CHECK(r.terms[0].bound >= optimum - tolerance(optimum));
    CHECK(r.terms[0].bound - optimum <= 1e-9 * std::abs(optimum));
  };
  check(dm::facility_location{}, "dense");
  check(inst.b.knn(12), "kNN, K = 12");
  // The small version, exhaustively: 3 clusters of 4, from greedy's selection.
  const clustered small(3, 4, 10);
  dm::objective_function<double, dm::facility_location> f(small.b.problem(),
                                                          dm::facility_location{}, 0.5);
  f.set_scales(std::vector<double>{0.01, 0.05});
  dm::certify_settings s;
  s.iterations = 400;
  s.threads = 1;
  s.random_subsets = 0;
  const auto r = dm::certify(f, dm::greedy_select(f, 3).rows, s);
  const double optimum = exhaustive_optimum(f, small.b.n, 3);
  CHECK(r.bound >= optimum - tolerance(optimum));
  CHECK(r.bound - optimum <= 1e-9 * std::abs(optimum));
}

namespace {

std::vector<double> doubles(const std::string& path) {
  return dm::io::npy_file(path).read_doubles();
}

}  // namespace

// The fixtures are written by
//   build/venv/bin/python benchmarks/certificates/fixtures.py tests/data/certify
// (certify.py's greedy selection, its bound after the recommended budget, the certificate and its
// re-check, the random mean and facility location's LP optimum by HiGHS; see the script's
// docstring for the files).
TEST_CASE("certify: the library's bounds equal the numpy reference's on fixed blocks",
          "[certify][reference]") {
  const std::string dir = DATAMASK_CERTIFY_FIXTURES;
  for (const std::string name : {"a", "b"}) {
    const dm::io::npy_file xf(dir + "/" + name + "_x.npy");
    const block b(xf.rows(), xf.cols(), xf.read_doubles(), doubles(dir + "/" + name + "_q.npy"));
    const dm::problem<double> p = b.problem();
    const dm::io::npy_file ids(dir + "/" + name + "_knn_ids.npy");
    const std::vector<std::int64_t> id_values = ids.read_int64();
    const std::vector<double> sims = doubles(dir + "/" + name + "_knn_sims.npy");
    const auto graph = std::make_shared<const dm::knn_graph>(
        dm::make_knn_graph(id_values, sims, b.n, ids.cols(), "ids", "sims", "reference"));
    const auto check = [&](const std::string& label, const auto& objective) {
      using D = std::decay_t<decltype(objective)>;
      const std::string stem = dir + "/" + name + "_" + label;
      const std::vector<double> meta =
          doubles(stem + "_meta.npy");  // lambda, s_q, s_d, S, budget, bound, check, f
      const std::vector<std::int64_t> sel64 =
          dm::io::npy_file(stem + "_selection.npy").read_int64();
      const std::vector<index_t> selection(sel64.begin(), sel64.end());
      const std::vector<double> certificate = doubles(stem + "_certificate.npy");
      dm::objective_function<double, D> f(p, objective, meta[0]);
      f.set_scales(std::vector<double>{meta[1], meta[2]});
      const auto size = static_cast<index_t>(meta[3]);
      INFO("block " << name << ", " << label);
      REQUIRE(static_cast<index_t>(selection.size()) == size);
      CHECK(f(selection) == Approx(meta[7]).epsilon(1e-12));
      // The reference's certificate, re-checked by the library: the same bound.
      std::vector<double> linear(static_cast<std::size_t>(b.n));
      for (index_t i = 0; i < b.n; ++i)
        linear[static_cast<std::size_t>(i)] =
            meta[0] / meta[1] * b.q[static_cast<std::size_t>(i)] / meta[3];
      const dm::bound_view<double> v{
          f.embeddings(), f.inv_norms().data(),          f.sq_norms().data(),
          linear,         (1.0 - meta[0]) / meta[2],     size,
          selection,      static_cast<index_t>(meta[4]), 1};
      CHECK(objective.check_bound(v, certificate) == Approx(meta[6]).epsilon(1e-12));
      // The library's own method from the same selection and budget: the same bound.
      dm::certify_settings s;
      s.iterations = static_cast<index_t>(meta[4]);
      s.threads = 1;
      s.random_subsets = 0;
      const auto r = dm::certify(f, selection, s);
      REQUIRE(r.certified);
      CHECK(r.terms[0].claimed == Approx(meta[5]).epsilon(1e-9));
      CHECK(r.bound == Approx(meta[6]).epsilon(1e-9));
      if (label != "pairwise") {  // facility location: the LP relaxation's optimum by HiGHS
        CHECK(r.terms[0].evaluations <= static_cast<index_t>(meta[4]));  // a restart reuses one
        const double random = meta[8];
        const double lp = meta[9];
        CHECK(r.bound >= lp - 1e-6 * std::abs(lp));  // no lambda gives less than the LP
        // Within 1% of the gain over random from the LP after 100 steps (0.17% to 0.60%
        // on these four, as fixtures.py prints them).
        CHECK((r.bound - lp) / (lp - random) <= 0.01);
      }
    };
    check("pairwise", dm::pairwise_similarity{});
    check("dense", dm::facility_location{});
    check("knn", dm::sparse_facility_location{graph});
  }
}

/// Pairwise similarity with its bound but no `subset_mean`: a user's boundable objective.
struct bounded_without_mean {
  dm::pairwise_similarity inner;
  template <class T>
  double operator()(const dm::subset_view<T>& s) const { return inner(s); }
  template <class T>
  dm::bound_certificate bound(const dm::bound_view<T>& v) const { return inner.bound(v); }
  template <class T>
  double check_bound(const dm::bound_view<T>& v, std::span<const double> p) const { return inner.check_bound(v, p); }
};

/// f's exact mean over every set of each size (`subset_mean`) against the mean of its values on
/// every such set, in double, for lambda 0, 0.4 and 1 and both quality aggregates.
template <class D>
void check_subset_mean(const block& b, const D& objective, const char* name) {
  const dm::problem<double> p = b.problem();
  for (index_t size : {1, 2, 3, 5, 9}) {
    for (double lambda : {0.0, 0.4, 1.0}) {
      for (auto aggregate : {dm::quality_aggregate::mean, dm::quality_aggregate::sum}) {
        dm::objective_function<double, D> f(p, objective, lambda, aggregate);
        set_test_scales(f);
        INFO(name << ": S " << size << ", lambda " << lambda);
        const std::optional<double> mean = f.subset_mean(size);
        REQUIRE(mean);
        CHECK(*mean == Approx(exhaustive_mean(f, b.n, size)).epsilon(1e-12).margin(1e-14));
      }
    }
  }
}

TEST_CASE("certify: the mean f of random sets is exact where every term has a closed form",
          "[certify]") {
  // Quality (mean and sum), pairwise similarity, facility location (dense under each kernel, and
  // on a kNN graph with a repeated neighbour), a mix: their mean over every S-subset against
  // enumeration; a zero row among the rows. DiSF has none, so certify draws random subsets.
  block b(9, 4, 71);
  std::fill_n(b.x.begin() + 3 * b.d, b.d, 0.0);
  check_subset_mean(b, dm::pairwise_similarity{}, "pairwise");
  for (auto kernel : {dm::similarity_kernel::cosine, dm::similarity_kernel::cosine2, dm::similarity_kernel::dot,
                      dm::similarity_kernel::rbf}) {
    dm::facility_location fl;
    fl.kernel = kernel;
    fl.gamma = 0.3;
    check_subset_mean(b, fl, "facility");
  }
  dm::sparse_facility_location knn = b.knn(4);
  auto graph = std::make_shared<dm::knn_graph>(*knn.graph);
  graph->ids[static_cast<std::size_t>(2 * graph->k + 2)] = graph->ids[static_cast<std::size_t>(2 * graph->k + 1)];
  knn.graph = graph;
  check_subset_mean(b, knn, "facility on a kNN graph");
  check_subset_mean(b, dm::mix(dm::weighted{dm::pairwise_similarity{}, 1.0}, dm::weighted{dm::facility_location{}, 0.5}),
                    "pairwise + facility");

  const dm::problem<double> p = b.problem();
  dm::objective_function<double, dm::pairwise_similarity> f(p, {}, 0.5);
  set_test_scales(f);
  dm::certify_settings s;
  s.threads = 1;
  const std::vector<index_t> selection = {0, 2, 4, 6};
  const dm::certificate_report r = dm::certify(f, selection, s);
  CHECK(r.random_draws == 0);
  CHECK(r.random_mean == *f.subset_mean(4));
  CHECK(r.certified_share == Approx((r.value - r.random_mean) / (r.bound - r.random_mean)).epsilon(1e-15));

  // A term without a closed form: no exact mean, and certify draws the random subsets.
  dm::objective_function<double, bounded_without_mean> g(p, {}, 0.5);
  set_test_scales(g);
  CHECK_FALSE(g.subset_mean(4));
  s.random_subsets = 16;
  const dm::certificate_report rg = dm::certify(g, selection, s);
  CHECK(rg.random_draws == 16);
  CHECK(rg.random_mean == Approx(dm::random_subsets_mean(g, 4, 16, 0)).epsilon(1e-15));
  CHECK(rg.bound == Approx(r.bound).epsilon(1e-12));  // the same f and bound as pairwise's
}

TEST_CASE("certify: facility location's mean reads only the values that weigh", "[certify]") {
  // At n = 1,200 and S = 120 the mean needs each item's 353 largest similarities (the rest
  // weigh less than 2^-64 together); against every value sorted and weighted by
  // C(n - t - 1, S - 1) / C(n, S), from plain dot products, on 1 and 2 threads.
  const block b(1200, 5, 41);
  const index_t size = 120;
  // prod_{i < m} (1080 - i) / (1200 - i) <= 2^-64 first at m = 353
  CHECK(dm::detail::facility_mean::leading_terms(b.n, size) == 353);
  // The figures facility_mean.hpp and RESULTS.md give: 403 at n = 5,000, S = n / 10, and 422 as n
  // grows (each factor is below 0.9, and 0.9^422 < 2^-64 < 0.9^421).
  CHECK(dm::detail::facility_mean::leading_terms(5000, 500) == 403);
  CHECK(dm::detail::facility_mean::leading_terms(10000000, 1000000) == 422);
  CHECK(dm::detail::facility_mean::leading_terms(b.n, b.n) == 1);  // the best is always in
  CHECK(dm::detail::facility_mean::leading_terms(10, 3) == 8);     // 8 rows always hold one of 3

  dm::objective_function<double, dm::facility_location> f(b.problem(), dm::facility_location{}, 0.0);
  const double log_sets = std::lgamma(b.n + 1.0) - std::lgamma(size + 1.0) - std::lgamma(b.n - size + 1.0);
  double reference = 0.0;
  std::vector<double> w(static_cast<std::size_t>(b.n));
  for (index_t v = 0; v < b.n; ++v) {
    for (index_t s = 0; s < b.n; ++s) {
      double dot = 0.0;
      for (index_t j = 0; j < b.d; ++j) dot += b.x[static_cast<std::size_t>(v * b.d + j)] * b.x[static_cast<std::size_t>(s * b.d + j)];
      w[static_cast<std::size_t>(s)] = dot * f.inv_norms()[static_cast<std::size_t>(v)] * f.inv_norms()[static_cast<std::size_t>(s)] / static_cast<double>(b.n);
    }
    std::sort(w.begin(), w.end(), std::greater<>());
    for (index_t t = 0; t + size <= b.n; ++t) {  // C(n - t - 1, S - 1) / C(n, S)
      const double rest = static_cast<double>(b.n - t - 1);
      const double log_first = std::lgamma(rest + 1.0) - std::lgamma(size * 1.0) - std::lgamma(rest - size + 2.0);
      reference += std::exp(log_first - log_sets) * w[static_cast<std::size_t>(t)];
    }
  }
  for (int threads : {1, 2}) {
    const dm::bound_view<double> v{f.embeddings(), f.inv_norms().data(), f.sq_norms().data(), {}, 1.0, size, {}, 0,
                                   threads, 0};
    const double mean = dm::detail::facility_mean::dense(
        dm::detail::facility_dual::dense_pairs<double>(v, dm::similarity_kernel::cosine, 1.0), size);
    CHECK(mean == Approx(reference).epsilon(1e-12));
  }
}
