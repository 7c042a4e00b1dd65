// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Several diversity objectives with weights: F_d = sum_b v_b F_db.

#include <array>
#include <cmath>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "datamask/core/concepts.hpp"

namespace datamask {

/// @brief An objective with its weight v_b in F_d.
template <class D>
struct weighted {
  D objective;
  double weight = 1.0;
};
template <class D>
weighted(D, double) -> weighted<D>;

/// @brief A weighted list of diversity objectives, each a separate term of f (scaled on its own,
/// reported on its own). A weight of 0 switches a term off at run time without a new type, which
/// is how the command-line program picks objectives from flags.
template <class... Ds>
struct diversity_mix {
  std::tuple<Ds...> objectives;
  std::array<double, sizeof...(Ds)> weights{};

  diversity_mix() = default;
  explicit diversity_mix(weighted<Ds>... ws)
    requires(sizeof...(Ds) > 0)  // else it would redeclare the default constructor (no_diversity)
      : objectives(std::move(ws.objective)...), weights{ws.weight...} {}

  static constexpr std::size_t size = sizeof...(Ds);

  /// @brief Term names, unique: a repeated name gets "#2", "#3", ... appended. An objective
  /// named at run time (`term_name()`, external_objective) has that name, else its type's.
  [[nodiscard]] std::array<std::string, sizeof...(Ds)> names() const {
    std::array<std::string, sizeof...(Ds)> base{};
    for_each([&](auto i, const auto& o, double) { base[i] = term_name_of(o); });
    std::array<std::string, sizeof...(Ds)> out = base;
    for (std::size_t i = 0; i < out.size(); ++i) {
      int repeat = 1;
      for (std::size_t j = 0; j < i; ++j) repeat += base[j] == base[i] ? 1 : 0;
      if (repeat > 1) out[i].append(1, '#').append(std::to_string(repeat));
    }
    return out;
  }

  /// @brief Calls f(index, objective, weight) for each term in order.
  template <class F>
  void for_each(F&& f) const {
    for_each_impl(std::forward<F>(f), std::index_sequence_for<Ds...>{});
  }

 private:
  template <class D>
  static std::string term_name_of(const D& o) {
    if constexpr (requires { o.term_name(); }) {
      return std::string(o.term_name());
    } else {
      return std::string(objective_name<D>());
    }
  }
  template <class F, std::size_t... I>
  void for_each_impl(F&& f, std::index_sequence<I...>) const {
    (f(std::integral_constant<std::size_t, I>{}, std::get<I>(objectives), weights[I]), ...);
  }
};

/// @brief Builds a mix: `mix(weighted{pairwise_similarity{}, 1.0}, weighted{disf{}, 0.5})`.
template <class... Ds>
diversity_mix<Ds...> mix(weighted<Ds>... ws) {
  return diversity_mix<Ds...>(std::move(ws)...);
}

namespace detail {
template <class D>
struct is_mix : std::false_type {};
template <class... Ds>
struct is_mix<diversity_mix<Ds...>> : std::true_type {};

/// Whether a diversity argument (one objective, or a mix) models `diversity_objective<D, T>`,
/// each of its objectives for a mix: the learners' static_assert says so by name.
template <class D, class T>
struct mix_models : std::bool_constant<diversity_objective<D, T>> {};
template <class... Ds, class T>
struct mix_models<diversity_mix<Ds...>, T> : std::bool_constant<(diversity_objective<Ds, T> && ...)> {};

/// A single objective becomes a mix of one with weight 1; a mix stays as it is.
template <class D>
auto as_mix(const D& d) {
  if constexpr (is_mix<D>::value) {
    return d;
  } else {
    return diversity_mix<D>(weighted<D>{d, 1.0});
  }
}
}  // namespace detail

/// @brief No diversity term: quality-only selection (lambda must be 1).
using no_diversity = diversity_mix<>;

}  // namespace datamask
