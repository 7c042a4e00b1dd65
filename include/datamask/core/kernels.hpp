// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The similarity kernels of facility location and of the kNN graph builders: one
/// definition of sim(a, b) from a dot product, which both compute the same way.

#include <array>
#include <cmath>
#include <string_view>

#include "datamask/core/config.hpp"
#include "datamask/core/enum_names.hpp"

namespace datamask {

/// @brief The similarity kernel of facility location.
enum class similarity_kernel {
  cosine,   ///< cos(a, b)
  cosine2,  ///< cos(a, b)^2
  dot,      ///< a . b
  rbf       ///< exp(-gamma * ||a - b||^2)
};

/// The kernels' spellings, next to the enum (read by `parse_enum`, the settings table and the
/// program's --kernel flag): one list, no second string map.
template <>
struct enum_traits<similarity_kernel> {
  static constexpr std::array<enum_choice<similarity_kernel>, 4> choices{
      {{"cosine", similarity_kernel::cosine},
       {"cosine2", similarity_kernel::cosine2},
       {"dot", similarity_kernel::dot},
       {"rbf", similarity_kernel::rbf}}};
};

/// @brief Parses "cosine", "cosine2", "dot" or "rbf" (`parse_enum` over `enum_traits`).
/// @throws invalid_input naming `input` for any other text.
inline similarity_kernel parse_kernel(std::string_view text, const char* input = "kernel") {
  return parse_enum<similarity_kernel>(text, input);
}

/// @brief Whether a kernel works on unit rows (the cosine kernels), else on the rows as given.
[[nodiscard]] inline bool unit_rows(similarity_kernel k) {
  return k == similarity_kernel::cosine || k == similarity_kernel::cosine2;
}

/// @brief sim(v, c) from their dot product (of unit rows for the cosine kernels) and, for rbf,
/// their squared norms.
DATAMASK_HOST_DEVICE inline double kernel_similarity(similarity_kernel kernel, double gamma, double dot, double sq_v,
                                                     double sq_c) {
  switch (kernel) {
    case similarity_kernel::cosine:
    case similarity_kernel::dot:
      return dot;
    case similarity_kernel::cosine2:
      return dot * dot;
    case similarity_kernel::rbf: {
      const double e = sq_v + sq_c - 2.0 * dot;
      return ::exp(-gamma * (e > 0.0 ? e : 0.0));
    }
  }
  return 0.0;
}

}  // namespace datamask
