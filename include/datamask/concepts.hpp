// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The views objectives receive and the concepts every pluggable part satisfies.
///
/// Each concept lists the expressions it requires. The rules a compiler cannot check are in
/// its comment; a model that breaks them compiles but gives wrong or irreproducible results.

#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include "datamask/types.hpp"

namespace datamask {

/// @brief What a diversity objective sees when it scores one subset.
///
/// `embeddings` is the whole block (n x d). `subset` holds rows of it. `reference` holds the
/// rows of the reference set V for objectives that compare the subset with a population
/// (facility location): the active batch during learning, the whole block when a selection is
/// evaluated. `inv_norms[i]` is 1 / ||e_i|| (1 when the caller declared the rows normalised)
/// (double, so cosine terms keep double precision) and `sq_norms[i]` is ||e_i||^2; both have n entries.
template <class T>
struct subset_view {
  matrix_view<const T> embeddings;
  const double* inv_norms = nullptr;
  const double* sq_norms = nullptr;
  index_view subset;
  index_view reference;
};

/// @brief What a batched diversity objective sees: G subsets of k rows each (row-major G x k).
template <class T>
struct batch_view {
  matrix_view<const T> embeddings;
  const double* inv_norms = nullptr;
  const double* sq_norms = nullptr;
  matrix_view<const index_t> subsets;
  index_view reference;

  /// @brief The g-th subset as a single-subset view.
  [[nodiscard]] DATAMASK_HOST_DEVICE subset_view<T> operator[](index_t g) const {
    return subset_view<T>{embeddings, inv_norms, sq_norms, index_view{subsets.row(g), subsets.cols},
                          reference};
  }
};

/// @brief A set-level diversity objective: `double d(const subset_view<T>&) const`.
///
/// Required: `d(s)` converts to double. Rules the compiler cannot check: the value does not
/// depend on the order of `s.subset`; larger means more diverse; the call is thread-safe
/// (rollouts are scored concurrently) and deterministic.
template <class D, class T = float>
concept diversity_objective =
    std::copy_constructible<D> && requires(const D& d, const subset_view<T>& s) {
      { d(s) } -> std::convertible_to<double>;
    };

/// @brief Refinement of `diversity_objective`: scores G subsets in one call,
/// `d.evaluate_batch(const batch_view<T>&, std::span<double> out)` with `out.size() == G`.
/// Must give the same values as scoring each subset alone, whatever the thread count.
template <class D, class T = float>
concept batched_diversity_objective =
    diversity_objective<D, T> &&
    requires(const D& d, const batch_view<T>& b, std::span<double> out) { d.evaluate_batch(b, out); };

/// @brief A per-item quality metric: `double q(index_t row) const`, evaluated once per item
/// when a run starts; the quality term of a set is the mean (or sum) of these scores.
/// Rules: deterministic and finite for every row of the block.
template <class Q>
concept quality_metric = std::copy_constructible<Q> && requires(const Q& q, index_t row) {
  { q(row) } -> std::convertible_to<double>;
};

/// @brief A learning-rate schedule: `double s(index_t step, index_t total_steps) const`,
/// steps counted from 1. Rule: finite and non-negative.
template <class S>
concept lr_scheduler = std::copy_constructible<S> && requires(const S& s, index_t t, index_t e) {
  { s(t, e) } -> std::convertible_to<double>;
};

/// @brief An objective may name itself (`static constexpr std::string_view name`); the name is
/// used in results, reports and logs.
template <class D>
concept named_objective = requires {
  { D::name } -> std::convertible_to<std::string_view>;
};

/// @brief The name of objective type D: its `name` member, or "diversity".
template <class D>
constexpr std::string_view objective_name() {
  if constexpr (named_objective<D>) {
    return std::string_view(D::name);
  } else {
    return "diversity";
  }
}

}  // namespace datamask
