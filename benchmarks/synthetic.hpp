// SPDX-License-Identifier: Apache-2.0
// The synthetic block every benchmark program uses: the library's generator (datamask/synthetic.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <datamask/datamask.hpp>
#include <datamask/synthetic.hpp>

namespace dm_bench {

namespace dm = datamask;
using dm::index_t;

/// Synthetic block: 64 clusters in R^d with correlated columns (a shared low-rank mixing), and
/// a quality score that is partly predictable from the embedding.
struct block {
  index_t n = 0;
  index_t d = 0;
  std::vector<float> x;
  std::vector<double> q;
  [[nodiscard]] dm::problem<float> problem() const {
    dm::problem<float> p;
    p.embeddings = dm::make_matrix_view(x.data(), n, d);
    p.quality.push_back({std::span<const double>(q), 1.0});
    return p;
  }
};

inline const block& data(index_t n, index_t d) {
  static std::unique_ptr<block> cache;  // one block per process (each benchmark runs alone)
  if (cache && cache->n == n && cache->d == d) return *cache;
  // The library's one synthetic generator, in the benchmarks' shape: 64 equal clusters, columns
  // correlated through a shared rank-16 mixing, quality partly predictable from the cluster.
  datamask::synthetic_options o;
  o.n = n;
  o.d = d;
  o.clusters = 64;
  o.seed = 12345;
  o.sizes = datamask::cluster_sizes::equal;
  o.quality = datamask::quality_model::by_size;
  o.spread = 1.0;
  o.spread_step = 0.0;
  o.quality_noise = 1.0;
  o.mixing_rank = 16;
  auto g = datamask::make_synthetic_corpus(o);
  cache = std::make_unique<block>();
  cache->n = n;
  cache->d = d;
  cache->x = std::move(g.embeddings);
  cache->q = std::move(g.quality);
  return *cache;
}

}  // namespace dm_bench
