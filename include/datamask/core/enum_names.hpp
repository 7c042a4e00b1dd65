// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The spelling of each enum value a user can choose by name (`--scaling group`,
/// `--logprob plackett-luce`), kept next to each enum as `enum_traits<E>::choices`, and the one
/// parser and printer over them.
///
/// Why a trait and not a map in the program: the command-line program, the benchmarks' tune
/// tool and the settings table (settings.hpp) all read the same list, so a new enum value is
/// spelled once, where it is declared.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "datamask/core/error.hpp"

namespace datamask {

/// @brief One spelling of an enum value.
template <class E>
struct enum_choice {
  std::string_view name;  ///< lower case, words joined by '-'
  E value;
};

/// @brief Specialise with `static constexpr std::array<enum_choice<E>, N> choices` for every
/// enum a user may give by name (done next to each enum of the library).
template <class E>
struct enum_traits;

/// @brief Whether `E` has a list of spellings.
template <class E>
concept named_enum = requires { enum_traits<E>::choices; };

/// @brief The spelling of `value`; empty for a value without one.
template <named_enum E>
[[nodiscard]] constexpr std::string_view enum_name(E value) {
  for (const auto& c : enum_traits<E>::choices) {
    if (c.value == value) return c.name;
  }
  return {};
}

/// @brief "a, b or c": the spellings of `E`, as error messages and help texts list them.
template <named_enum E>
[[nodiscard]] std::string enum_names_text() {
  const auto& list = enum_traits<E>::choices;
  std::string out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (i > 0) out += i + 1 == list.size() ? " or " : ", ";
    out += list[i].name;
  }
  return out;
}

/// @brief Parses a spelling of `E`; '_' and '-' are the same letter ("plackett_luce").
/// @throws invalid_input naming `input` when the text is none of the spellings.
template <named_enum E>
[[nodiscard]] E parse_enum(std::string_view text, std::string_view input) {
  for (const auto& c : enum_traits<E>::choices) {
    if (c.name.size() != text.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < text.size() && same; ++i) {
      same = c.name[i] == (text[i] == '_' ? '-' : text[i]);
    }
    if (same) return c.value;
  }
  throw invalid_input(std::string(input),
                      detail::concat("expected ", enum_names_text<E>(), ", found '", text, "'"));
}

}  // namespace datamask
