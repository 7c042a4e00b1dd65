// SPDX-License-Identifier: Apache-2.0
#pragma once

// A synthetic corpus for the examples: clusters of very uneven size (a few dense topics, many
// rare ones), quality correlated with the cluster. Quality-only selection then piles into the
// best clusters; diversity-only selection ignores quality; joint selection does both.

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace example {

struct corpus {
  std::int64_t n = 0;
  std::int64_t d = 0;
  std::vector<float> embeddings;  // n x d, row-major
  std::vector<double> quality;    // one score per row
  std::vector<int> cluster;       // the cluster of each row
  int clusters = 0;
};

inline corpus make_corpus(std::int64_t n, std::int64_t d, int clusters, std::uint64_t seed) {
  corpus c;
  c.n = n;
  c.d = d;
  c.clusters = clusters;
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal;
  // Cluster sizes follow 1/rank: the largest cluster is `clusters` times the smallest.
  std::vector<double> weight(static_cast<std::size_t>(clusters));
  double total = 0.0;
  for (int j = 0; j < clusters; ++j) total += weight[j] = 1.0 / (j + 1);
  std::discrete_distribution<int> pick(weight.begin(), weight.end());
  std::vector<double> centre(static_cast<std::size_t>(clusters * d));
  for (double& v : centre) v = normal(gen);
  // Cluster quality: the dense clusters are the good ones (boilerplate-free news, say).
  std::vector<double> cluster_quality(static_cast<std::size_t>(clusters));
  for (int j = 0; j < clusters; ++j) cluster_quality[j] = 1.0 - static_cast<double>(j) / clusters;
  c.embeddings.resize(static_cast<std::size_t>(n * d));
  c.quality.resize(static_cast<std::size_t>(n));
  c.cluster.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const int j = pick(gen);
    c.cluster[i] = j;
    for (std::int64_t a = 0; a < d; ++a) {
      c.embeddings[i * d + a] = static_cast<float>(centre[j * d + a] + 0.45 * normal(gen));
    }
    c.quality[i] = cluster_quality[j] + 0.15 * normal(gen);
  }
  return c;
}

}  // namespace example
