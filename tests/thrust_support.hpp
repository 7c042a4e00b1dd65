// SPDX-License-Identifier: Apache-2.0
#pragma once
// Shared helpers of the backend-templated tests (test_thrust_*.cpp and tests/cuda/).

#include <algorithm>
#include <iterator>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <datamask/datamask.hpp>
#include <datamask/exec/backend/thrust.hpp>
#include <datamask/core/synthetic.hpp>

namespace dm_test {

using datamask::index_t;

/// n x d float embeddings in `clusters` Gaussian clusters (datamask::make_synthetic_corpus),
/// quality scores and shuffled ids.
struct instance {
  index_t n = 0;
  index_t d = 0;
  std::vector<float> x;
  std::vector<double> q;
  std::vector<datamask::id_t> ids;

  instance(index_t rows, index_t cols, std::uint64_t seed, int clusters = 8) : n(rows), d(cols) {
    // The library's one generator: equal clusters, each with the same spread of a third of the
    // centres' scale (the 3:1 ratio of centre scale to noise these tests always had).
    datamask::synthetic_options o;
    o.n = rows;
    o.d = cols;
    o.clusters = clusters;
    o.seed = seed;
    o.sizes = datamask::cluster_sizes::equal;
    o.spread = 1.0 / 3.0;
    o.spread_step = 0.0;
    auto g = datamask::make_synthetic_corpus(o);
    x = std::move(g.embeddings);
    q = std::move(g.quality);
    ids.resize(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) ids[i] = static_cast<datamask::id_t>(1000 + 7919 * ((i * 37) % n));
  }

  [[nodiscard]] datamask::problem<float> problem() const {
    datamask::problem<float> p;
    p.embeddings = datamask::make_matrix_view(x.data(), n, d);
    p.quality.push_back(datamask::quality_column{q, 1.0});
    p.ids = ids;
    return p;
  }
};

/// A rollout sampler that draws exactly like gumbel_top_k_sampler and records every step's masks
/// on the host, so tests can compare the masks of two runs step by step.
struct recording_sampler {
  std::shared_ptr<std::vector<std::vector<index_t>>> log =
      std::make_shared<std::vector<std::vector<index_t>>>();

  template <class B, class Dataset>
  void sample(const B& b, const typename B::template vector<double>& logits, const Dataset& ds,
              const typename B::template vector<index_t>& active, datamask::rng::philox_key key,
              std::uint32_t step, index_t g, index_t k,
              typename B::template vector<index_t>& out) const {
    datamask::gumbel_top_k_sampler{}.sample(b, logits, ds, active, key, step, g, k, out);
    log->push_back(b.to_host(out));
  }
};

/// The fraction of `a` that is also in `b`.
inline double overlap(std::vector<index_t> a, std::vector<index_t> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::vector<index_t> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return a.empty() ? 1.0 : static_cast<double>(both.size()) / static_cast<double>(a.size());
}

/// The small run both backends are compared on: 30 steps of 32 rollouts, an active batch that
/// changes every step (m = 256 of the block), seed 17.
inline datamask::settings parity_options() {
  datamask::settings o;
  o.ratio = 0.1;
  o.rollouts = 32;
  o.steps = 30;
  o.active_fraction = 0.2;
  o.min_active = 256;
  o.seed = 17;
  return o;
}

}  // namespace dm_test
