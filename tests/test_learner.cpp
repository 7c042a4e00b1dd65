// SPDX-License-Identifier: Apache-2.0
// The learner: convergence to the exhaustive optimum on tiny blocks, quality-only selection,
// pruning, determinism, and the invariants of a result.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "helpers.hpp"

using datamask::index_t;

namespace {

struct block {
  index_t n, d;
  std::vector<double> x;
  std::vector<double> q;
  datamask::problem<double> p;
  block(index_t n_, index_t d_, std::uint64_t seed)
      : n(n_), d(d_), x(dmtest::random_embeddings<double>(n_, d_, seed)),
        q(dmtest::random_quality(n_, seed + 7777)),
        p{datamask::make_matrix_view(x.data(), n_, d_), {{q, 1.0}}, {}} {}
  block(const block&) = delete;
};

/// The outcome of one convergence run: the learner's f, the exhaustive best f, and whether the
/// learner's selection is an optimum.
struct outcome {
  double learned = 0.0;
  double best = 0.0;
  bool optimal = false;
};

template <class D>
outcome converge_once(const D& objective, std::uint64_t seed) {
  const index_t n = 12;
  block blk(n, 6, seed);
  datamask::options opt;
  opt.ratio = 0.25;  // S = 3
  opt.lambda = 0.5;
  opt.seed = seed;
  const datamask::learner<> learner(opt);
  const auto res = learner.select(blk.p, objective);
  REQUIRE(res.selected == 3);
  REQUIRE(res.rows.size() == 3);
  // The f the run optimised: the calibrated scales, which calibrate() also reports.
  const auto terms = learner.calibrate(blk.p, objective);
  REQUIRE(terms.size() == res.terms.size());
  std::vector<double> scales;
  for (std::size_t t = 0; t < terms.size(); ++t) {
    CHECK(terms[t].scale == res.terms[t].scale);
    CHECK(terms[t].scale != 1.0);  // really calibrated
    scales.push_back(res.terms[t].scale);
  }
  datamask::objective_function<double, D> f(blk.p, objective, opt.lambda);
  f.set_scales(scales);
  outcome o;
  o.best = -std::numeric_limits<double>::infinity();
  for (const auto& u : dmtest::all_subsets(n, 3)) o.best = std::max(o.best, f(std::span<const index_t>(u)));
  o.learned = f(std::span<const index_t>(res.rows));
  CHECK(res.objective == Approx(o.learned).epsilon(1e-12));
  o.optimal = o.learned >= o.best - 1e-12 * std::max(1.0, std::abs(o.best));
  return o;
}

template <class D>
void check_convergence(const D& objective, const char* name) {
  int hits = 0;
  std::string misses;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const outcome o = converge_once(objective, seed);
    if (o.optimal) {
      ++hits;
    } else {
      misses += " seed " + std::to_string(seed) + ": f " + std::to_string(o.learned) + " vs best " +
                std::to_string(o.best) + ";";
    }
  }
  INFO(name << ": exhaustive optimum in " << hits << " of 20 seeds." << misses);
  CHECK(hits >= 18);
}

}  // namespace

// n = 12, S = 3 (ratio 0.25), d = 6, lambda = 0.5, every other option at its default (G = 128,
// 1000 steps, linear 10 -> 1, calibrated scales, relaxed gradient). With min_active = 1024 the
// active batch is the whole block, so the learner's f (reference set = active batch) is exactly
// objective_function's f (reference set = whole block).
TEST_CASE("the learner finds the exhaustive optimum: pairwise similarity", "[learner][convergence]") {
  check_convergence(datamask::pairwise_similarity{}, "pairwise_similarity");
}
TEST_CASE("the learner finds the exhaustive optimum: facility location", "[learner][convergence]") {
  check_convergence(datamask::facility_location{}, "facility_location");
}
TEST_CASE("the learner finds the exhaustive optimum: DiSF", "[learner][convergence]") {
  check_convergence(datamask::disf{}, "disf");
}
