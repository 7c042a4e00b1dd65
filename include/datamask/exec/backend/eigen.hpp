// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The CPU backend: host memory, OpenMP threads over rollouts, Eigen for the products.

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "datamask/exec/backend/concept.hpp"
#include "datamask/core/concepts.hpp"
#include "datamask/core/detail/chunked_sum.hpp"
#include "datamask/core/detail/keep_first.hpp"
#include "datamask/core/detail/parallel.hpp"
#include "datamask/exec/host.hpp"
#include "datamask/core/philox.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

/// @brief The CPU backend. Rollouts run concurrently on `threads` OpenMP threads (0: all);
/// every reduction has a fixed order, so results do not depend on the thread count.
struct eigen_backend {
  template <class T>
  using vector = std::vector<T>;
  static constexpr std::string_view name = "eigen";

  int threads = 0;

  /// @brief The block as the backend stores it: the embeddings stay where the caller has them.
  template <class T>
  struct dataset {
    matrix_view<const T> embeddings;
    vector<double> inv_norms;
    vector<double> sq_norms;
    vector<id_t> ids;
  };

  /// @brief Where the algorithms written against an executor run: the host's threads.
  using executor = host_executor;
  /// @brief An executor for a run on `ds`, on this backend's threads.
  template <class T>
  [[nodiscard]] host_executor make_executor(const dataset<T>& /*ds*/) const {
    return host_executor(threads);
  }
  /// @brief The block as a relaxation reads it: the embeddings where the caller keeps them and
  /// the dataset's norms; `p` and `total` are the caller's to fill.
  template <class T>
  [[nodiscard]] relax_view<T> relaxation_view(const dataset<T>& ds) const {
    return relax_view<T>{ds.embeddings, ds.inv_norms.data(), ds.sq_norms.data(), {}, 0.0, threads};
  }

  template <class T>
  [[nodiscard]] vector<T> to_device(std::span<const T> host) const {
    return vector<T>(host.begin(), host.end());
  }
  template <class T>
  [[nodiscard]] std::vector<T> to_host(const vector<T>& dev) const {
    return dev;
  }
  /// @brief Elements [offset, offset + count) only (one rollout of G, say).
  template <class T>
  [[nodiscard]] std::vector<T> to_host(const vector<T>& dev, index_t offset, index_t count) const {
    return std::vector<T>(dev.begin() + offset, dev.begin() + offset + count);
  }

  template <class T>
  [[nodiscard]] dataset<T> make_dataset(matrix_view<const T> x, std::span<const double> inv_norms,
                                        std::span<const double> sq_norms,
                                        std::span<const id_t> ids) const {
    return dataset<T>{x, to_device(inv_norms), to_device(sq_norms), to_device(ids)};
  }

  /// @brief The m candidates with the smallest uniform draw for (step, active-batch stream),
  /// ties to the smaller id, returned in increasing row order.
  template <class T>
  void active_batch(const dataset<T>& ds, const vector<index_t>& candidates, rng::philox_key key,
                    std::uint32_t step, index_t m, vector<index_t>& out) const {
    const auto c = static_cast<index_t>(candidates.size());
    if (m >= c) {
      out = candidates;
      return;
    }
    std::vector<std::pair<double, index_t>> u(static_cast<std::size_t>(c));
    detail::parallel_for(
        ceil_div(c, chunk), threads,
        [&](index_t b) {
          for (index_t i = b * chunk; i < std::min(c, (b + 1) * chunk); ++i) {
            const index_t r = candidates[i];
            u[i] = {rng::uniform01(key, ds.ids[r], step, rng::stream_active_batch), r};
          }
        },
        draw_cost * static_cast<double>(std::min(c, chunk)));
    auto less = [&](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : ds.ids[a.second] < ds.ids[b.second];
    };
    std::nth_element(u.begin(), u.begin() + (m - 1), u.end(), less);
    out.resize(static_cast<std::size_t>(m));
    for (index_t i = 0; i < m; ++i) out[i] = u[i].second;
    std::sort(out.begin(), out.end());
  }

  /// @brief G rollouts of k items drawn without replacement from softmax(logits) over `active`
  /// by Gumbel-top-k. Rollout g uses stream `first_stream + g`; `out` is G x k rows, each row
  /// in draw order (largest key first; ties to the smaller id).
  template <class T>
  void gumbel_top_k(const vector<double>& logits, const dataset<T>& ds,
                    const vector<index_t>& active, rng::philox_key key, std::uint32_t step,
                    std::uint32_t first_stream, index_t g_count, index_t k,
                    vector<index_t>& out) const {
    const auto m = static_cast<index_t>(active.size());
    out.resize(static_cast<std::size_t>(g_count * k));
    detail::parallel_for(g_count, threads, [&](index_t g) {
      std::vector<std::pair<double, index_t>> keys(static_cast<std::size_t>(m));
      const auto stream = static_cast<std::uint32_t>(first_stream + g);
      for (index_t a = 0; a < m; ++a) {
        const index_t r = active[a];
        keys[a] = {logits[r] + rng::gumbel(key, ds.ids[r], step, stream), r};
      }
      detail::keep_first(keys, static_cast<std::size_t>(k), [&](const auto& x, const auto& y) {
        return x.first != y.first ? x.first > y.first : ds.ids[x.second] < ds.ids[y.second];
      });
      for (index_t t = 0; t < k; ++t) out[g * k + t] = keys[t].second;
    }, draw_cost * static_cast<double>(m));
  }

  /// @brief Scores G subsets of k rows with a diversity objective: the batched form when the
  /// objective has one, else one call per subset, rollouts spread over the threads.
  template <class T, class D>
  void evaluate(const D& objective, const dataset<T>& ds, const vector<index_t>& subsets,
                index_t g_count, index_t k, const vector<index_t>& reference,
                std::span<double> out) const {
    const batch_view<T> b{ds.embeddings, ds.inv_norms.data(), ds.sq_norms.data(),
                          matrix_view<const index_t>(subsets.data(), g_count, k),
                          index_view(reference.data(), static_cast<index_t>(reference.size())), threads};
    if constexpr (batched_diversity_objective<D, T>) {
      objective.evaluate_batch(b, out);
    } else {
      // One subset (a read-out, an evaluation) may parallelise inside itself, on this
      // backend's threads; several are spread over the threads one per subset.
      // Work per subset: about k d max(k, |V|) (facility location against V; pairwise similarity
      // and DiSF cost less), so small batches (tests, tiny blocks) open no region.
      const double work = static_cast<double>(k) * static_cast<double>(ds.embeddings.cols) *
                          static_cast<double>(std::max<index_t>(k, b.reference.size));
      detail::parallel_for(g_count, threads, [&](index_t g) {
        subset_view<T> s = b[g];
        s.threads = threads;
        out[g] = objective(s);
      }, work);
    }
  }

  /// @brief Per-item credit's scores (`marginal_objective`): values[g] = d(subset g) and
  /// out[g k + t] = d(subset g) - d(subset g without its t-th row): the batched form when the
  /// objective has one (`batched_marginal_objective`), else subsets spread over the threads
  /// (each call's own parallel loops then run on its thread).
  template <class T, class D>
    requires marginal_objective<D, T>
  void marginals(const D& objective, const dataset<T>& ds, const vector<index_t>& subsets,
                 index_t g_count, index_t k, const vector<index_t>& reference,
                 std::span<double> values, std::span<double> out) const {
    const batch_view<T> b{ds.embeddings, ds.inv_norms.data(), ds.sq_norms.data(),
                          matrix_view<const index_t>(subsets.data(), g_count, k),
                          index_view(reference.data(), static_cast<index_t>(reference.size())), threads};
    if constexpr (batched_marginal_objective<D, T>) {
      objective.marginals_batch(b, values, out);
      return;
    }
    const double work = static_cast<double>(k) * static_cast<double>(ds.embeddings.cols) *
                        static_cast<double>(std::max<index_t>(k, b.reference.size));
    detail::parallel_for(g_count, threads, [&](index_t g) {
      subset_view<T> s = b[g];
      s.threads = threads;
      values[g] = objective.marginals(s, out.subspan(static_cast<std::size_t>(g * k), static_cast<std::size_t>(k)));
    }, work);
  }

  /// @brief out[g] = sum of `values` over the g-th subset, in draw order by chunks
  /// (core/detail/chunked_sum.hpp: the Thrust backend's bits).
  void gather_sum(const vector<double>& values, const vector<index_t>& subsets, index_t g_count,
                  index_t k, std::span<double> out) const {
    for (index_t g = 0; g < g_count; ++g) {
      out[g] = detail::chunked_sum(k, detail::gathered_at{values.data(), subsets.data() + g * k});
    }
  }

  /// @brief The G k rollout entries e = g k + t grouped by row: `rows` ascending, each row's
  /// entries ascending (the order the policy sums a row's terms in). Every row of `subsets` is
  /// one of `active` (increasing): a counting sort over the active positions, O(G k) plus a
  /// lookup table as long as the largest active row.
  struct grouped_entries {
    vector<index_t> rows;
    vector<index_t> entries;
  };
  [[nodiscard]] grouped_entries entries_by_row(const vector<index_t>& active, const vector<index_t>& subsets) const {
    const auto m = static_cast<std::size_t>(active.size());
    // Each active row's position by direct lookup (a binary search per entry cost 60-90 ns, ten
    // times the rest of the update).
    std::vector<index_t> position(active.empty() ? 0 : static_cast<std::size_t>(active.back()) + 1);
    for (std::size_t a = 0; a < m; ++a) position[static_cast<std::size_t>(active[a])] = static_cast<index_t>(a);
    std::vector<index_t> at(subsets.size());
    std::vector<index_t> start(m + 1, 0);
    for (std::size_t e = 0; e < subsets.size(); ++e) {
      at[e] = position[static_cast<std::size_t>(subsets[e])];
      ++start[static_cast<std::size_t>(at[e]) + 1];
    }
    for (std::size_t a = 0; a < m; ++a) start[a + 1] += start[a];
    grouped_entries out{vector<index_t>(subsets.size()), vector<index_t>(subsets.size())};
    for (std::size_t e = 0; e < subsets.size(); ++e) {
      const auto pos = static_cast<std::size_t>(start[static_cast<std::size_t>(at[e])]++);
      out.rows[pos] = subsets[e];
      out.entries[pos] = static_cast<index_t>(e);
    }
    return out;
  }

  /// @brief An executor on this backend's threads, for passes that need no dataset.
  [[nodiscard]] host_executor make_executor() const { return host_executor(threads); }

  /// @brief The values of a vector of this backend, as the executor's passes read them.
  template <class U>
  static U* data(vector<U>& v) {
    return v.data();
  }
  template <class U>
  static const U* data(const vector<U>& v) {
    return v.data();
  }

  /// @brief The S candidates with the largest logits, by logit descending, ties to the smaller id.
  template <class T>
  [[nodiscard]] std::vector<index_t> top_rows(const vector<double>& logits, const dataset<T>& ds,
                                              const vector<index_t>& candidates,
                                              index_t s) const {
    return largest(logits.data(), ds, candidates.data(), static_cast<index_t>(candidates.size()), s);
  }

  /// @brief The S of `m` candidates with the largest key, by key descending, ties to the smaller
  /// id (`top_rows` of an executor's arrays).
  template <class T>
  [[nodiscard]] vector<index_t> largest(const double* key, const dataset<T>& ds, const index_t* candidates,
                                        index_t m, index_t s) const {
    std::vector<index_t> rows(candidates, candidates + m);
    detail::keep_first(rows, static_cast<std::size_t>(std::max<index_t>(s, 0)),
                       [&](index_t a, index_t b) { return key[a] != key[b] ? key[a] > key[b] : ds.ids[a] < ds.ids[b]; });
    return rows;
  }

 private:
  static constexpr index_t chunk = 4096;
  static constexpr double draw_cost = 50.0;  ///< operations per Philox draw and its transform
  static constexpr index_t ceil_div(index_t a, index_t b) { return (a + b - 1) / b; }
};

static_assert(backend<eigen_backend>, "eigen_backend must model datamask::backend");

}  // namespace datamask
