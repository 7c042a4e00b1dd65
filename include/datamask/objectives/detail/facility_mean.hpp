// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The exact mean of facility location over every set of S rows of a block (the
/// `subset_mean_objective` capability; the "random" of a certificate's share). For a reference
/// item v whose candidates, best first, are w_(0) >= w_(1) >= ..., max_{s in U} w_vs is w_(t)
/// exactly when the t-th candidate is in U and none before it is, which for a uniformly random
/// S-subset of n rows has probability q_t = C(n - t - 1, S - 1) / C(n, S). So the mean of the
/// maximum is sum_t q_t w_(t): one selection per reference item (dense: its `leading_terms`
/// largest values in O(n), then their sort; on a kNN graph the K neighbours are stored best
/// first, and every other row scores 0), instead of evaluating f on hundreds of drawn subsets.

#include <algorithm>
#include <functional>
#include <vector>

#include "datamask/objectives/detail/facility_dual.hpp"
#include "datamask/core/types.hpp"

namespace datamask::detail::facility_mean {

/// q_t for t < m: the probability that the t-th of m distinct rows (in a fixed order) is the
/// first of them in a uniformly random set of `size` of the n rows; q_0 = S / n and
/// q_{t+1} = q_t (n - S - t) / (n - t - 1), 0 once fewer than S rows remain after t.
[[nodiscard]] inline std::vector<double> first_pick(index_t n, index_t size, index_t m) {
  std::vector<double> q(static_cast<std::size_t>(m), 0.0);
  double p = static_cast<double>(size) / static_cast<double>(n);
  for (index_t t = 0; t < m && t < n; ++t) {
    q[static_cast<std::size_t>(t)] = p;
    if (t + 1 < n) p *= static_cast<double>(std::max<index_t>(0, n - size - t)) / static_cast<double>(n - t - 1);
  }
  return q;
}

/// How many of an item's n values, best first, the mean needs: the first m with the chance that
/// none of the first m rows is in the set, prod_{i < m} (n - S - i) / (n - i), at most 2^-64 (0
/// once m > n - S), or n. Together the values after the m-th then weigh at most 2^-64 of the
/// largest |w|: thousands of times less than the rounding of the sum itself. At S = n / 10 that
/// is m = 403 at n = 5,000 and at most 422 however large n is, so a selection replaces most of a
/// sort.
[[nodiscard]] inline index_t leading_terms(index_t n, index_t size) {
  constexpr double negligible = 0x1p-64;
  double none = 1.0;  // the chance that none of the first m rows is in the set
  index_t m = 0;
  while (m < n && none > negligible) {
    none *= static_cast<double>(std::max<index_t>(0, n - size - m)) / static_cast<double>(n - m);
    ++m;
  }
  return m;
}

/// Dense facility location with the whole block as reference set: (1 / n) sum_v sum_t q_t w_(t)
/// over each item's n similarities (`pairs` built with weight 1, so each w already carries the
/// 1 / n), t < `leading_terms`. The kernels are symmetric, so item v's similarities are the
/// pairs' column v. Each item's mean is kept and the items summed in order: the same bits
/// whatever the thread count.
template <class T>
[[nodiscard]] double dense(const facility_dual::dense_pairs<T>& pairs, index_t size) {
  const index_t n = pairs.size();
  const index_t m = leading_terms(n, size);
  const std::vector<double> q = first_pick(n, size, m);
  std::vector<double> per_item(static_cast<std::size_t>(n), 0.0);
  pairs.for_columns([&](index_t v, const double* w) {
    std::vector<double> best(w, w + n);
    const auto lead = best.begin() + static_cast<std::ptrdiff_t>(m);
    if (m < n) std::nth_element(best.begin(), lead - 1, best.end(), std::greater<>());
    std::sort(best.begin(), lead, std::greater<>());
    double acc = 0.0;
    for (index_t t = 0; t < m; ++t) acc += best[static_cast<std::size_t>(t)] * q[static_cast<std::size_t>(t)];
    per_item[static_cast<std::size_t>(v)] = acc;
  });
  double total = 0.0;
  for (double item : per_item) total += item;
  return total;
}

}  // namespace datamask::detail::facility_mean
