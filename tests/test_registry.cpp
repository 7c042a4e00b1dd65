// SPDX-License-Identifier: Apache-2.0
// The front ends' objective registry (frontend/include/datamask/frontend/registry.hpp): names to
// weights and the user's term; a registered type held as functions scores as its definition
// (brute force in double) with the library's views (norms, reference set), and its relaxation
// equals the objective at integral points with the gradient of finite differences.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <datamask/frontend/registry.hpp>
#include <datamask/frontend/request.hpp>
#include <datamask/learners/greedy/scorers.hpp>

namespace dm = datamask;
using dm::index_t;

namespace {

/// -mean cosine over ordered pairs, from the definition, in double.
double pairwise_reference(const std::vector<float>& x, index_t d, const std::vector<index_t>& rows) {
  const auto k = static_cast<double>(rows.size());
  double sum = 0.0;
  for (index_t a : rows) {
    for (index_t b : rows) {
      if (a == b) continue;
      double ab = 0.0, aa = 0.0, bb = 0.0;
      for (index_t j = 0; j < d; ++j) {
        const double u = x[static_cast<std::size_t>(a * d + j)], v = x[static_cast<std::size_t>(b * d + j)];
        ab += u * v;
        aa += u * u;
        bb += v * v;
      }
      sum += ab / std::sqrt(aa * bb);
    }
  }
  return -sum / (k * (k - 1.0));
}

/// The sum of the subset's first coordinates: one subset per call, no relaxation.
struct first_coordinate {
  template <class T>
  double operator()(const dm::subset_view<T>& s) const {
    double v = 0.0;
    for (index_t i : s.subset) v += s.embeddings(i, 0);
    return v;
  }
};

/// The size of the reference set the library passes.
struct reference_size {
  template <class T>
  double operator()(const dm::subset_view<T>& s) const {
    return static_cast<double>(s.reference.size);
  }
};

std::vector<float> random_rows(index_t n, index_t d) {
  std::mt19937_64 g(7);
  std::normal_distribution<float> nd(0.0F, 1.0F);
  std::vector<float> x(static_cast<std::size_t>(n * d));
  for (float& v : x) v = nd(g);
  return x;
}

/// n random rows of d floats, viewed, with their norms in double as the library prepares them.
struct rows_with_norms {
  std::vector<float> x;
  dm::matrix_view<const float> view;
  std::vector<double> inv, sq;
  rows_with_norms(index_t n, index_t d)
      : x(random_rows(n, d)), view(dm::make_matrix_view(static_cast<const float*>(x.data()), n, d)),
        inv(static_cast<std::size_t>(n)), sq(static_cast<std::size_t>(n)) {
    for (index_t i = 0; i < n; ++i) {
      for (index_t j = 0; j < d; ++j) sq[static_cast<std::size_t>(i)] += double(view(i, j)) * view(i, j);
      inv[static_cast<std::size_t>(i)] = 1.0 / std::sqrt(sq[static_cast<std::size_t>(i)]);
    }
  }
};

}  // namespace

TEST_CASE("registry: names to weights and the user's term, bad lists refused", "[registry]") {
  dmfront::objective_registry r;
  r.add("first", first_coordinate{});
  r.add("second", first_coordinate{});
  dm::block_run_settings s;
  const std::vector<std::string> names{"disf", "pairwise", "first"};
  r.apply(names, std::vector<double>{0.5, 2.0, 3.0}, s);
  CHECK(s.weights.pairwise == 2.0);
  CHECK(s.weights.disf == 0.5);
  CHECK(s.weights.facility == 0.0);
  REQUIRE(s.external.size() == 1);
  CHECK(s.external[0].weight == 3.0);
  CHECK(s.external[0].objective->label == "first");
  r.apply(std::vector<std::string>{"facility"}, {}, s);
  CHECK(s.weights.facility == 1.0);
  CHECK(s.weights.pairwise == 0.0);
  CHECK(s.external.empty());
  const auto refuses = [&](std::vector<std::string> n, std::vector<double> w) { r.apply(n, w, s); };
  CHECK_THROWS_WITH(refuses({"cosine"}, {}),
                    Catch::Contains("objective: must be one of pairwise, facility, disf, first, second, found 'cosine'"));
  CHECK_THROWS_WITH(refuses({"disf", "disf"}, {}), Catch::Contains("given twice"));
  CHECK_THROWS_WITH(refuses({"disf", "pairwise"}, {1.0}), Catch::Contains("1 weights for 2"));
  CHECK_THROWS_WITH(refuses({"disf", "pairwise"}, {1.0, -1.0}), Catch::Contains(">= 0"));
  r.apply(std::vector<std::string>{"second", "pairwise", "first"}, std::vector<double>{0.25, 1.0, 2.0}, s);
  REQUIRE(s.external.size() == 2);  // as many of the user's as named, in order
  CHECK(s.external[0].objective->label == "second");
  CHECK(s.external[0].weight == 0.25);
  CHECK(s.external[1].objective->label == "first");
  CHECK(s.external[1].weight == 2.0);
  // Objectives given with the call (Python's metrics) in the same list: each a term, in order.
  auto given = std::make_shared<dm::external_objective>();
  given->label = "metric";
  const std::vector<dmfront::objective_spec> mixed{{"pairwise", nullptr}, {"", given}, {"first", nullptr}, {"", given}};
  r.apply(mixed, std::vector<double>{1.0, 0.5, 2.0, 0.25}, s);
  CHECK(s.weights.pairwise == 1.0);
  REQUIRE(s.external.size() == 3);
  CHECK(s.external[0].objective == given);
  CHECK(s.external[0].weight == 0.5);
  CHECK(s.external[1].objective->label == "first");
  CHECK(s.external[2].objective == given);
  CHECK(s.external[2].weight == 0.25);
  CHECK_THROWS_WITH(r.apply(mixed, std::vector<double>{1.0}, s), Catch::Contains("1 weights for 4 objectives"));
  CHECK_THROWS_WITH(r.apply(std::vector<dmfront::objective_spec>{{"", given}}, std::vector<double>{-1.0}, s),
                    Catch::Contains("objective_weights: weights must be >= 0"));
  for (const char* taken : {"pairwise", "first", "quality", "facility_knn"}) {
    CHECK_THROWS_WITH(r.add(taken, first_coordinate{}), Catch::Contains("is already a term's name"));
  }
  for (const char* bad : {"My Metric", "-x", "2d", ""}) {
    CHECK_THROWS_WITH(r.add(bad, first_coordinate{}), Catch::Contains("a lower case letter, then"));
  }
}

TEST_CASE("registry: a registered type scores as its definition, its relaxation is exact", "[registry]") {
  const index_t n = 12, d = 5;
  const rows_with_norms block(n, d);
  const auto& [x, view, inv, sq] = block;
  dmfront::objective_registry r;
  r.add("mine", dm::pairwise_similarity{});  // batched, with a relaxation
  r.add("plain", first_coordinate{});        // neither
  r.add("reference", reference_size{});
  const auto& mine = *r.entries()[3].user;
  const auto& plain = *r.entries()[4].user;
  const auto& reference = *r.entries()[5].user;
  CHECK(mine.has_relaxation());
  CHECK_FALSE(plain.has_relaxation());

  // Scores of a batch: the definition, in double; the library's reference set reaches the type.
  const std::vector<index_t> subsets{0, 3, 7, 2, 5, 11, 1, 4, 9};
  const std::vector<index_t> active{0, 1, 2, 3, 4, 5, 7};
  const dm::batch_view<float> batch{view, inv.data(), sq.data(), {subsets.data(), 3, 3}, dm::index_view(active), 2};
  std::vector<double> got(3), first(3), seen(3);
  mine.score(batch, got);
  plain.score(batch, first);
  reference.score(batch, seen);
  for (index_t g = 0; g < 3; ++g) {
    const std::vector<index_t> rows(subsets.begin() + g * 3, subsets.begin() + g * 3 + 3);
    CHECK(got[static_cast<std::size_t>(g)] == Approx(pairwise_reference(x, d, rows)).epsilon(1e-6));
    double v = 0.0;
    for (index_t i : rows) v += x[static_cast<std::size_t>(i * d)];
    CHECK(first[static_cast<std::size_t>(g)] == Approx(v).epsilon(1e-12));
    CHECK(seen[static_cast<std::size_t>(g)] == 7.0);
  }

  // The relaxation: at an integral p it is the objective; its gradient, central differences.
  const double total = 4.0;
  std::vector<double> p(static_cast<std::size_t>(n), 0.0), grad(static_cast<std::size_t>(n));
  const auto relaxed = [&](std::span<double> g) {
    return mine.relaxation(dm::relax_view<float>{view, inv.data(), sq.data(), p, total, 1}, g);
  };
  for (index_t i : {1, 4, 6, 10}) p[static_cast<std::size_t>(i)] = 1.0;
  CHECK(relaxed(grad) == Approx(pairwise_reference(x, d, {1, 4, 6, 10})).epsilon(1e-6));
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = 0.2 + 0.05 * static_cast<double>(i % 5);
  relaxed(grad);
  std::vector<double> scratch(grad.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double h = 1e-5, keep = p[i];
    p[i] = keep + h;
    const double up = relaxed(scratch);
    p[i] = keep - h;
    const double down = relaxed(scratch);
    p[i] = keep;
    CHECK(grad[i] == Approx((up - down) / (2 * h)).margin(1e-6));
  }
}

TEST_CASE("registry: a registered type's greedy state gives the greedy baselines its gains", "[registry]") {
  const index_t n = 10, d = 4;
  const rows_with_norms block_rows(n, d);
  const auto& [x, view, inv, sq] = block_rows;
  dmfront::objective_registry r;
  r.add("mine", dm::pairwise_similarity{});
  r.add("plain", first_coordinate{});
  const auto& mine = *r.entries()[3].user;
  const auto& plain = *r.entries()[4].user;
  REQUIRE(static_cast<bool>(mine.greedy));
  CHECK_FALSE(static_cast<bool>(plain.greedy));  // no greedy_state: S + i by evaluation

  const dm::greedy_block<float> block{view, inv, sq, 1};
  dm::held_greedy_state st = mine.greedy(block);
  using state = dm::greedy_state_t<dm::pairwise_similarity, float>;
  CHECK(st.diminishing == dm::has_diminishing_gains<state>);
  // Its gains: F(S + i) - F(S) from the definition in double (F of fewer than two items is 0).
  const auto f = [&](const std::vector<index_t>& rows) { return rows.size() < 2 ? 0.0 : pairwise_reference(x, d, rows); };
  std::vector<index_t> s;
  for (const index_t next : {3, 8, 1, 6}) {
    std::vector<index_t> cands;
    for (index_t i = 0; i < n; ++i) {
      if (std::find(s.begin(), s.end(), i) == s.end()) cands.push_back(i);
    }
    std::vector<double> gains(cands.size(), 0.0);
    st.accumulate(cands, gains, 1.0);
    for (std::size_t c = 0; c < cands.size(); ++c) {
      std::vector<index_t> with = s;
      with.push_back(cands[c]);
      CHECK(gains[c] + st.common() == Approx(f(with) - f(s)).margin(1e-6));
    }
    st.add(next);
    s.push_back(next);
  }
  // The greedy scorer reads the held state's flag at run time.
  CHECK(dm::detail::greedy::external_state(mine, block).diminishing_gains() == dm::has_diminishing_gains<state>);
  CHECK_FALSE(dm::detail::greedy::external_state(plain, block).diminishing_gains());
}

TEST_CASE("front end: a library message with its settings spelled as a front end's options", "[request]") {
  const auto bracketed = [](std::string_view name) {  // appended: GCC 12 misreads "<" + s (-Wrestrict)
    std::string out(1, '<');
    out.append(name).push_back('>');
    return out;
  };
  const dmfront::spelling sp{bracketed, [&](std::string_view name, std::string_view value, bool) {
                               return bracketed(name).append(" ").append(value);
                             }};
  const auto spelled = [&](const std::string& input, const std::string& text) {
    return std::string(dmfront::as_option(dm::invalid_input(input, text), sp).what());
  };
  // The input, and a field named in the text as a whole word.
  CHECK(spelled("lr_min", "must not exceed lr_max (0.5), found 0.7") ==
        "<lr-min>: must not exceed <lr-max> (0.5), found 0.7");
  // Not inside another word (a longer name, a user's label).
  CHECK(spelled("objective", "label my_lr_max and xlr_max, lr_max_2") ==
        "objective: label my_lr_max and xlr_max, lr_max_2");
  // A field two entries share: the first entry of the table (stochastic greedy's, not Adam's).
  CHECK(spelled("epsilon", "must be in (0, 1)") == "<epsilon>: must be in (0, 1)");
}
