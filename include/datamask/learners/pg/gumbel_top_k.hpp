// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The Gumbel-top-k rollout sampler.

#include <cstdint>

#include "datamask/exec/backend/concept.hpp"

namespace datamask {

/// @brief Exact-k rollouts: key_i = L_i + g_i with g_i standard Gumbel, keep the k largest keys.
/// This draws exactly the Plackett-Luce distribution (k draws without replacement from
/// softmax(L)), and the order of the keys is the draw order.
struct gumbel_top_k_sampler {
  template <class B, class Dataset>
  void sample(const B& b, const typename B::template vector<double>& logits, const Dataset& ds,
              const typename B::template vector<index_t>& active, rng::philox_key key,
              std::uint32_t step, index_t g, index_t k,
              typename B::template vector<index_t>& out) const {
    b.gumbel_top_k(logits, ds, active, key, step, 0u, g, k, out);
  }
};

}  // namespace datamask
