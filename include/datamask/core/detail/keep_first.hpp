// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The host's "the s first items in an order" (the S largest keys, ties to the smaller
/// id, of the read-outs and the CPU backend's top-k). Not API.

#include <algorithm>
#include <cstddef>
#include <vector>

namespace datamask::detail {

/// Keeps the first `s` items of `items` in the strict total order `before` (ties already broken,
/// e.g. to the smaller id), in that order; all of them, sorted, when fewer. Selecting the first
/// s and sorting them gives partial_sort's result, in O(n + s log s) instead of O(n log s).
template <class E, class Before>
void keep_first(std::vector<E>& items, std::size_t s, Before before) {
  if (s < items.size()) {
    std::nth_element(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(s), items.end(), before);
    items.resize(s);
  }
  std::sort(items.begin(), items.end(), before);
}

}  // namespace datamask::detail
