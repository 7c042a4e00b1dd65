// SPDX-License-Identifier: Apache-2.0
#pragma once

// The examples' corpus: the library's one synthetic generator (datamask/core/synthetic.hpp) with the
// examples' shape: clusters of very uneven size (a few dense topics, many rare ones), the dense
// clusters the good ones. Quality-only selection then piles into the best clusters;
// diversity-only selection ignores quality; joint selection does both.

#include <cstdint>

#include <datamask/core/synthetic.hpp>

namespace example {

using corpus = datamask::synthetic_corpus;

/// n x d embeddings in `clusters` Zipf-sized clusters; quality 1 - c / clusters plus noise.
inline corpus make_corpus(std::int64_t n, std::int64_t d, int clusters, std::uint64_t seed) {
  datamask::synthetic_options o;
  o.n = n;
  o.d = d;
  o.clusters = clusters;
  o.seed = seed;
  o.quality = datamask::quality_model::by_size;
  o.spread = 0.45;
  o.spread_step = 0.0;
  o.quality_noise = 0.15;
  return datamask::make_synthetic_corpus(o);
}

}  // namespace example
