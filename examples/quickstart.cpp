// SPDX-License-Identifier: Apache-2.0
// Selects 10% of a generated corpus three ways (quality only, diversity only, jointly) and
// prints what each gives: mean quality, each diversity term and how many topics survive.
#include <datamask/datamask.hpp>
#include <datamask/core/wait_policy.hpp>

#include <chrono>
#include <cstdio>
#include <numeric>
#include <set>
#include <vector>

#include <random>

#include "corpus.hpp"

int main(int, char** argv) {
  datamask::passive_wait_unless_set(argv);  // first: see datamask/core/wait_policy.hpp
  using namespace datamask;
  const example::corpus c = example::make_corpus(20000, 64, 60, 7);
  std::printf("corpus: %lld documents, %lld-d embeddings, %d topics of very uneven size\n",
              static_cast<long long>(c.n), static_cast<long long>(c.d), c.clusters);

  const problem<float> block{make_matrix_view(c.embeddings.data(), c.n, c.d),
                             {quality_column{c.quality, 1.0}},
                             {}};
  // Every row is measured with the same yardsticks: raw terms, whole block as reference set.
  const auto all_terms = mix(weighted{pairwise_similarity{}, 1.0},
                             weighted{facility_location{}, 1.0}, weighted{disf{}, 1.0});
  const objective_function<float, decltype(all_terms)> measure(block, all_terms, 0.5);

  settings opt;  // select() runs the optimizer the program's `auto` runs for each f
  opt.ratio = 0.1;
  opt.seed = 1;

  std::printf("\n%-26s %9s %10s %10s %10s %7s %8s\n", "selection (10%)", "quality", "pairwise",
              "facility", "disf", "topics", "time");
  auto report = [&](const char* label, const std::vector<index_t>& rows, double seconds) {
    const std::vector<double> raw = measure.raw(rows);  // quality, pairwise, facility, disf
    std::set<int> topics;
    for (index_t r : rows) topics.insert(c.cluster[r]);
    std::printf("%-26s %9.4f %10.5f %10.5f %10.5f %7zu %7.2fs\n", label, raw[0], raw[1], raw[2],
                raw[3], topics.size(), seconds);
  };
  auto run = [&](const char* label, double lambda) {
    settings o = opt;
    o.lambda = lambda;
    const auto t0 = std::chrono::steady_clock::now();
    const selection_result r = select(block, pairwise_similarity{}, o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report(label, r.rows, s);
  };

  {  // A uniformly random 10% for reference (seeded, so the table is reproducible).
    std::vector<index_t> rows(static_cast<std::size_t>(c.n));
    std::iota(rows.begin(), rows.end(), index_t{0});
    std::mt19937_64 gen(3);
    std::shuffle(rows.begin(), rows.end(), gen);
    rows.resize(static_cast<std::size_t>(c.n / 10));
    report("random", rows, 0.0);
  }
  run("quality only (lambda=1)", 1.0);
  run("diversity only (lambda=0)", 0.0);
  run("joint (lambda=0.5, PWS)", 0.5);
  std::printf(
      "\nquality: mean score (higher is better); pairwise: minus mean cosine (higher is more "
      "diverse);\nfacility: mean best cosine of every document to the selection (higher covers "
      "more);\ndisf: minus squared feature correlation / 1e4 (higher is less collapsed); topics: "
      "of %d.\n",
      c.clusters);
  return 0;
}
