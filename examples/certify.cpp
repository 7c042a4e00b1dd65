// SPDX-License-Identifier: Apache-2.0
// How far can a selection be from the best possible one? Selects 10% of a generated corpus twice
// -- pairwise similarity + quality with the continuous learner, facility location on a kNN graph
// + quality with lazy greedy -- and certifies each (datamask/objectives/certify.hpp): f of the selection,
// an upper bound on the optimum of the same f, the gap, and the share of the best possible gain
// over random subsets that the selection is proven to reach.
//
//   certify [n] [d]      (n items, default 20,000; d dimensions, default 64)
#include <datamask/objectives/certify.hpp>
#include <datamask/datamask.hpp>
#include <datamask/learners/greedy/greedy.hpp>
#include <datamask/core/wait_policy.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "corpus.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void print(const char* label, double optimise_seconds, const datamask::certificate_report& r) {
  std::printf("\n%s, optimised in %.2f s\n", label, optimise_seconds);
  if (!r.certified) {
    std::printf("  f = %.6f: no certificate (%s)\n", r.value, r.reason.c_str());
    return;
  }
  std::printf("  f = %.8f, optimum <= %.8f (gap %.3g)\n", r.value, r.bound, r.gap);
  std::printf("  mean f of random subsets %.6f: certified share %.6f%% of the best possible gain\n",
              r.random_mean, 100.0 * r.certified_share);
  for (const auto& t : r.terms) {
    std::printf("  term %s%s: %s, %lld evaluations, %.3f s\n", t.name.c_str(),
                t.with_quality ? " + quality" : "", t.method.c_str(),
                static_cast<long long>(t.evaluations), t.seconds);
  }
}

}  // namespace

int main(int argc, char** argv) {
  datamask::passive_wait_unless_set(argv);  // first: see datamask/core/wait_policy.hpp
  using namespace datamask;
  const index_t n = argc > 1 ? std::atoll(argv[1]) : 20000;
  const index_t d = argc > 2 ? std::atoll(argv[2]) : 64;
  const example::corpus c = example::make_corpus(n, d, 60, 7);
  const problem<float> block{
      make_matrix_view(c.embeddings.data(), c.n, c.d), {quality_column{c.quality, 1.0}}, {}};
  std::printf("corpus: %lld documents, %lld-d embeddings; select 10%%, lambda 0.5\n",
              static_cast<long long>(c.n), static_cast<long long>(c.d));

  {  // Pairwise similarity + quality: the continuous learner, then the bound of the same f.
    continuous_options o;
    o.common.ratio = 0.1;
    o.common.lambda = 0.5;
    o.common.seed = 1;
    const auto t0 = std::chrono::steady_clock::now();
    const selection_result res = continuous_learner(o).select(block, pairwise_similarity{});
    const double optimise = seconds_since(t0);
    objective_function<float, pairwise_similarity> f(block, pairwise_similarity{}, o.common.lambda);
    std::vector<double> scales;
    for (const auto& t : res.terms) scales.push_back(t.scale);
    f.set_scales(scales);  // the f the run optimised
    print("pairwise + quality (continuous learner)", optimise, certify(f, res.rows));
  }

  {  // Facility location on a kNN graph (K = 32) + quality: lazy greedy on the calibrated f.
    knn_settings ks;
    ks.neighbors = 32;
    ks.build = knn_build::automatic;  // exact up to 50,000 items, clustered above
    const sparse_facility_location fl{
        std::make_shared<const knn_graph>(build_knn_graph(block, ks))};
    settings o;
    o.ratio = 0.1;
    o.lambda = 0.5;
    o.seed = 1;
    std::vector<double> scales;
    for (const auto& t : learner<>(o).calibrate(block, fl)) scales.push_back(t.scale);
    objective_function<float, sparse_facility_location> f(block, fl, o.lambda);
    f.set_scales(scales);
    const auto t0 = std::chrono::steady_clock::now();
    const greedy_result g = greedy_select(f, static_cast<index_t>(c.n / 10));
    const double optimise = seconds_since(t0);
    print("facility location (kNN graph, K = 32) + quality (lazy greedy)", optimise,
          certify(f, g.rows));
  }
  std::printf(
      "\nThe bound is for f with the run's scales over every subset of the block's size; on the "
      "kNN\n"
      "graph it is for the sparse objective the run optimised.\n");
  return 0;
}
