// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The entries of the settings table (settings.hpp): a numeric range, a choice among an
/// enum's spellings, or a flag, each naming its command-line spelling, its C++ member and a line
/// of help, and checking its member. Each group of settings states its entries next to its struct
/// (options.hpp for a run's, continuous/settings.hpp for the continuous learner's) and validates
/// through them; settings.hpp gathers the groups into the table a front end builds its options
/// from.

#include <cmath>
#include <concepts>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "datamask/core/enum_names.hpp"
#include "datamask/core/error.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

/// @brief What kind of value a table entry holds.
enum class setting_kind { number, choice, flag };

/// @brief What every table entry says about itself.
struct setting_text {
  std::string_view name;   ///< command-line spelling, e.g. "active-fraction"
  std::string_view field;  ///< the C++ member, as error messages of the library name it
  std::string_view help;   ///< one line
};

/// @brief A numeric setting: `Owner::*member` holds a `V` (or an optional `V`, or a list of
/// `V`, each value checked). Range [min, max], either end open; an infinite or extreme end is
/// no bound. NaN is outside every range.
template <class Owner, class V, class Field = V>
struct number_setting : setting_text {
  static constexpr setting_kind kind = setting_kind::number;
  using owner_type = Owner;
  using value_type = V;
  Field Owner::*member;
  V min;
  V max;
  bool min_open = false;
  bool max_open = false;
  std::string_view symbol = {};  ///< the method's symbol (G, E, ...), prefixed to messages
  /// Whether the range applies to this set of values (an unused setting is not checked).
  bool (*applies)(const Owner&) = nullptr;

  [[nodiscard]] Field default_value() const { return Owner{}.*member; }
  [[nodiscard]] bool contains(V v) const {
    const bool above = min_open ? v > min : v >= min;
    const bool below = max_open ? v < max : v <= max;
    return above && below;
  }
  [[nodiscard]] bool bounded_above() const {
    if constexpr (std::floating_point<V>) return std::isfinite(max);
    return max != std::numeric_limits<V>::max();
  }
  [[nodiscard]] bool bounded_below() const {
    if constexpr (std::floating_point<V>) return std::isfinite(min);
    return min != std::numeric_limits<V>::lowest();
  }
  /// "in (0, 1]", "at least 2", ">= 0", "> 0", "any value".
  [[nodiscard]] std::string range_text() const {
    if (bounded_above() && bounded_below()) {
      return detail::concat("in ", min_open ? "(" : "[", min, ", ", max, max_open ? ")" : "]");
    }
    if (bounded_below()) {
      if (min_open) return detail::concat("> ", min);
      return min == V{0} ? std::string(">= 0") : detail::concat("at least ", min);
    }
    if (bounded_above()) return detail::concat(max_open ? "< " : "<= ", max);
    return std::floating_point<V> ? "not NaN" : "any value";
  }
  [[nodiscard]] std::string default_text() const { return value_text(default_value()); }

  /// @throws invalid_input naming `field` for a value outside the range.
  void check(const Owner& o) const {
    if (applies != nullptr && !applies(o)) return;
    const Field& f = o.*member;
    if constexpr (std::is_same_v<Field, V>) {
      check_value(f, "");
    } else if constexpr (std::is_same_v<Field, std::optional<V>>) {
      if (f) check_value(*f, "");
    } else {
      for (std::size_t i = 0; i < f.size(); ++i) check_value(f[i], detail::concat("value ", i, " "));
    }
  }

 private:
  void check_value(V v, const std::string& which) const {
    if (contains(v)) return;
    // An integer names the bound it broke ("at least 2"): its far end is usually a type limit.
    std::string expected = range_text();
    if constexpr (std::integral<V>) {
      expected = v < min ? (min == V{0} ? std::string(">= 0") : detail::concat("at least ", min))
                         : detail::concat("at most ", max);
    }
    throw invalid_input(std::string(field),
                        detail::concat(which, symbol, symbol.empty() ? "" : " ", "must be ",
                                       expected, ", found ", v));
  }
  static std::string value_text(const Field& f) {
    if constexpr (std::is_same_v<Field, V>) {
      return detail::concat(f);
    } else if constexpr (std::is_same_v<Field, std::optional<V>>) {
      return f ? detail::concat(*f) : std::string("none");
    } else {
      std::string s;
      for (std::size_t i = 0; i < f.size(); ++i) s += (i ? "," : "") + detail::concat(f[i]);
      return s.empty() ? std::string("none") : s;
    }
  }
};

/// @brief A setting chosen by name among the spellings of enum `E` (`enum_traits<E>`).
template <class Owner, named_enum E>
struct choice_setting : setting_text {
  static constexpr setting_kind kind = setting_kind::choice;
  using owner_type = Owner;
  using value_type = E;
  E Owner::*member;
  static constexpr const auto& choices = enum_traits<E>::choices;  ///< name and value pairs

  [[nodiscard]] E default_value() const { return Owner{}.*member; }
  [[nodiscard]] std::string default_text() const { return std::string(enum_name(default_value())); }
  [[nodiscard]] std::string range_text() const { return "one of " + enum_names_text<E>(); }
  /// @throws invalid_input naming `field` for a value without a spelling (a cast integer).
  void check(const Owner& o) const {
    DATAMASK_EXPECTS(!enum_name(o.*member).empty(), std::string(field), "must be ",
                     range_text(), ", found the value ", static_cast<long long>(o.*member));
  }
  /// @brief Parses a spelling into the setting. @throws invalid_input naming `name`.
  void parse(std::string_view text, Owner& o) const { o.*member = parse_enum<E>(text, name); }
};

/// @brief An on/off setting (a flag without a value on the command line).
template <class Owner>
struct flag_setting : setting_text {
  static constexpr setting_kind kind = setting_kind::flag;
  using owner_type = Owner;
  using value_type = bool;
  bool Owner::*member;

  [[nodiscard]] bool default_value() const { return Owner{}.*member; }
  [[nodiscard]] std::string default_text() const { return default_value() ? "on" : "off"; }
  [[nodiscard]] std::string range_text() const { return "on or off"; }
  void check(const Owner& /*o*/) const {}
};

/// @brief `a` or `b`, whichever owns the members of table entry `s` (see the usage sketch).
template <class Entry, class A, class B>
[[nodiscard]] auto& setting_owner(const Entry& /*s*/, A& a, B& b) {
  using owner = typename Entry::owner_type;
  if constexpr (std::is_base_of_v<owner, std::remove_cv_t<A>>) {
    return static_cast<owner&>(a);
  } else {
    static_assert(std::is_base_of_v<owner, std::remove_cv_t<B>>,
                  "datamask::setting_owner: neither object holds this setting");
    return static_cast<owner&>(b);
  }
}

namespace detail {
inline constexpr index_t index_max = std::numeric_limits<index_t>::max();
inline constexpr double inf = std::numeric_limits<double>::infinity();
}  // namespace detail

}  // namespace datamask
