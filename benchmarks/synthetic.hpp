// SPDX-License-Identifier: Apache-2.0
// The synthetic block every benchmark program uses (benchmarks/RESULTS.md describes it).
//
// It keeps its own generator rather than datamask::make_synthetic_corpus (the one generator of the
// tests, examples and --demo): every figure in RESULTS.md and in docs/'s measured tables was
// taken on this block, and another generator would change all of them. Switch it in the same
// commit as a full re-run of scripts/bench and benchmarks/fronts.py.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include <datamask/datamask.hpp>

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
  cache = std::make_unique<block>();
  block& b = *cache;
  b.n = n;
  b.d = d;
  std::mt19937_64 g(12345);
  std::normal_distribution<float> nd(0.0F, 1.0F);
  const index_t clusters = 64;
  const index_t rank = 16;
  std::vector<float> centers(static_cast<std::size_t>(clusters * d));
  for (float& c : centers) c = nd(g);
  std::vector<float> mixing(static_cast<std::size_t>(rank * d));
  for (float& c : mixing) c = nd(g) * 0.5F;
  b.x.resize(static_cast<std::size_t>(n * d));
  b.q.resize(static_cast<std::size_t>(n));
  std::vector<float> z(static_cast<std::size_t>(rank));
  for (index_t i = 0; i < n; ++i) {
    const auto c = static_cast<index_t>(g() % static_cast<std::uint64_t>(clusters));
    for (float& v : z) v = nd(g);
    float* row = b.x.data() + i * d;
    for (index_t j = 0; j < d; ++j) {
      float v = centers[c * d + j] + nd(g);
      for (index_t r = 0; r < rank; ++r) v += z[r] * mixing[r * d + j];
      row[j] = v;
    }
    b.q[i] = 0.5 * static_cast<double>(row[0] - row[1]) / 3.0 + static_cast<double>(nd(g));
  }
  return b;
}

}  // namespace dm_bench
