// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The kNN graph of a problem by the builder its settings name: exact (knn/exact.hpp) or
/// clustered (knn/clustered.hpp).

#include "datamask/core/detail/prepare.hpp"
#include "datamask/objectives/knn/clustered.hpp"
#include "datamask/objectives/knn/exact.hpp"
#include "datamask/core/options.hpp"

namespace datamask {

/// @brief The kNN graph of a problem's embeddings (norms as the learners compute them), by the
/// builder `s.build` names (exact by default).
/// @throws invalid_input for bad embeddings or settings; run_stopped when `hooks.stop` said so
template <class T>
[[nodiscard]] knn_graph build_knn_graph(const problem<T>& p, const knn_settings& s, bool normalized = false,
                                        const knn_build_hooks& hooks = {}) {
  const detail::prepared data = detail::knn::row_norms(p, normalized, s.threads);
  const std::span<const double> inv(data.inv_norms);
  const std::span<const double> sq(data.sq_norms);
  return builds_exact(s, p.embeddings.rows) ? build_knn_graph(p.embeddings, inv, sq, s, hooks)
                                            : build_clustered_knn_graph(p.embeddings, inv, sq, s, hooks);
}

}  // namespace datamask
