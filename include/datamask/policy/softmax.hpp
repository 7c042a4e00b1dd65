// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The softmax-logit mask policy and its two log-probability gradients.

#include <array>
#include <span>
#include <string_view>

#include "datamask/backend/concept.hpp"
#include "datamask/enum_names.hpp"
#include "datamask/error.hpp"

namespace datamask {

/// @brief Gradient of ln P(mask) used by the policy update (method.md section 2).
enum class gradient_mode {
  relaxed,       ///< k independent softmax draws: L_j += eta (1/G) sum_g A_g 1[j in M_g]
  plackett_luce  ///< the exact gradient of the without-replacement (Plackett-Luce) draw
};

template <>
struct enum_traits<gradient_mode> {
  static constexpr std::array<enum_choice<gradient_mode>, 2> choices{
      {{"relaxed", gradient_mode::relaxed}, {"plackett-luce", gradient_mode::plackett_luce}}};
};

/// @brief Parses "relaxed" or "plackett-luce" (also "plackett_luce"). @throws invalid_input.
inline gradient_mode parse_gradient(std::string_view text, const char* input = "logprob") {
  return parse_enum<gradient_mode>(text, input);
}

/// @brief One logit per item; masks are k draws without replacement from softmax(L) over the
/// active items. The update is plain gradient ascent, no optimiser state.
struct softmax_policy {
  gradient_mode mode = gradient_mode::relaxed;

  template <class B>
  void update(const B& b, typename B::template vector<double>& logits,
              const typename B::template vector<index_t>& active,
              const typename B::template vector<index_t>& subsets, index_t g, index_t k,
              std::span<const double> coef, typename B::template vector<double>& scratch) const {
    if (mode == gradient_mode::relaxed) {
      // With advantages summing to zero, the -k p_j part of the relaxed gradient cancels.
      b.add_rollouts(logits, active, subsets, g, k, coef, scratch);
    } else {
      b.plackett_luce_update(logits, active, subsets, g, k, coef, scratch);
    }
  }
};

}  // namespace datamask
