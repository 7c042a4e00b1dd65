// SPDX-License-Identifier: Apache-2.0
// A user objective with a relaxation (examples/centred_mean.hpp) in the continuous learner,
// together with pairwise similarity, each term scaled and weighted as in the learner's f.
#include <cstdio>
#include <random>
#include <span>
#include <vector>

#include <datamask/learners/continuous.hpp>
#include <datamask/datamask.hpp>
#include <datamask/core/wait_policy.hpp>

#include "centred_mean.hpp"

int main(int, char** argv) {
  datamask::passive_wait_unless_set(argv);  // first: see datamask/core/wait_policy.hpp
  const dm::index_t n = 2000;
  const dm::index_t d = 16;
  std::mt19937_64 g(1);
  std::normal_distribution<float> nd(0.0F, 1.0F);
  std::vector<float> x(static_cast<std::size_t>(n * d));
  for (float& v : x) v = nd(g) + 0.3F;
  std::vector<double> q(static_cast<std::size_t>(n));
  for (double& v : q) v = nd(g);
  dm::problem<float> p;
  p.embeddings = dm::make_matrix_view(x.data(), n, d);
  p.quality.push_back({std::span<const double>(q), 1.0});

  // Together with pairwise similarity, each term scaled and weighted as in the learner's f.
  const auto diversity = dm::mix(dm::weighted{centred_mean{}, 1.0}, dm::weighted{dm::pairwise_similarity{}, 1.0});
  dm::continuous_options o;
  o.common.ratio = 0.1;
  o.common.lambda = 0.5;
  o.ascent.iterations = 100;
  const auto res = dm::continuous_learner(o).select(p, diversity);
  std::printf("selected %zu of %lld items, f = %.4f\n", res.rows.size(), static_cast<long long>(n),
              res.objective);
  for (const auto& t : res.terms) {
    std::printf("  %-13s raw %9.4f  scale %.4g  weight %.2f\n", t.name.c_str(), t.raw, t.scale, t.weight);
  }
  return 0;
}
