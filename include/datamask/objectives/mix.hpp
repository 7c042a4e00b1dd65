// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Several diversity objectives with weights: F_d = sum_b v_b F_db.

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

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

/// @brief Objectives of one type whose number is known at run time (the objectives a program's
/// user names, each held as functions): each is a term of f of its own, as if the mix listed them
/// one by one, weighed by its own weight times the list's. A mix holds at most one list, as its
/// last element, so every other element's term keeps its place (its index in the mix).
template <class D>
struct term_list {
  std::vector<weighted<D>> terms;
};

/// @brief The index `diversity_mix::for_each` passes for a term of a `term_list`: `element` is
/// the list's place in the mix, `member` the term's place in the list; as a number it is the
/// term's place among the mix's terms (`names`, f's term slots). An element that is not a list
/// gets `std::integral_constant<std::size_t, I>` instead, its place in the mix and among the
/// terms at once. `term_entry` reads a per-element tuple at either kind of index.
template <std::size_t I>
struct list_term {
  static constexpr std::size_t element = I;
  std::size_t member = 0;
  constexpr operator std::size_t() const noexcept { return I + member; }  // NOLINT: an index
};

namespace detail {
template <class D>
struct list_of : std::false_type {
  using type = D;
};
template <class D>
struct list_of<term_list<D>> : std::true_type {
  using type = D;
};
}  // namespace detail

/// @brief The type of each term an element of a mix gives: D itself, or the type a list holds.
template <class D>
using term_type_t = typename detail::list_of<D>::type;

/// @brief Whether D is a `term_list`.
template <class D>
inline constexpr bool is_term_list = detail::list_of<D>::value;

/// @brief A per-element entry for the terms of D: X, or one X per term of a list.
template <class D, class X>
using per_term_t = std::conditional_t<is_term_list<D>, std::vector<X>, X>;

/// @brief The entry of term `i` (an index `for_each` passed) in a tuple of `per_term_t` entries,
/// one per element of the mix, sized by `size_entries`.
template <class Tuple, class Index>
decltype(auto) term_entry(Tuple& entries, Index i) {
  if constexpr (requires { Index::element; }) {
    return (std::get<Index::element>(entries)[i.member]);
  } else {
    return (std::get<Index::value>(entries));
  }
}

/// @brief A weighted list of diversity objectives, each a separate term of f (scaled on its own,
/// reported on its own). A weight of 0 switches a term off at run time without a new type, which
/// is how the command-line program picks objectives from flags; a `term_list` element, last,
/// holds terms whose number is known at run time.
template <class... Ds>
struct diversity_mix {
  std::tuple<Ds...> objectives;
  std::array<double, sizeof...(Ds)> weights{};

  diversity_mix() = default;
  explicit diversity_mix(weighted<Ds>... ws)
    requires(sizeof...(Ds) > 0)  // else it would redeclare the default constructor (no_diversity)
      : objectives(std::move(ws.objective)...), weights{ws.weight...} {}

  static constexpr std::size_t size = sizeof...(Ds);  ///< elements; `term_count()` terms
  static_assert(
      [] {
        std::size_t at = 0;
        bool last = true;
        ((last = last && (!is_term_list<Ds> || at + 1 == sizeof...(Ds)), ++at), ...);
        return last;
      }(),
      "datamask::diversity_mix: a term_list may only be the mix's last element");

  /// @brief The number of terms: one per element, a list's as many as it holds.
  [[nodiscard]] std::size_t term_count() const {
    std::size_t n = 0;
    for_each([&](auto, const auto&, double) { ++n; });
    return n;
  }

  /// @brief Term names, one per term, unique: a repeated name gets "#2", "#3", ... appended. An
  /// objective named at run time (`term_name()`, external_objective) has that name, else its
  /// type's.
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::string> out;
    for_each([&](auto, const auto& o, double) {
      const std::string base = term_name_of(o);
      std::string name = base;
      // The first free of base, base#2, base#3, ... (a name given at run time may end in "#2").
      for (int repeat = 2; std::find(out.begin(), out.end(), name) != out.end(); ++repeat) {
        name = base + '#' + std::to_string(repeat);
      }
      out.push_back(std::move(name));
    });
    return out;
  }

  /// @brief Sizes a tuple of `per_term_t` entries, one per element, for this mix's terms (a
  /// list's vector to the list's length), before any is built: entries never move afterwards.
  template <class Tuple>
  void size_entries(Tuple& entries) const {
    for_each([&](auto i, const auto&, double) {
      if constexpr (requires { decltype(i)::element; }) {
        auto& list = std::get<decltype(i)::element>(entries);
        if (list.size() <= i.member) list.resize(i.member + 1);
      }
    });
  }

  /// @brief Calls f(index, objective, weight) for each term in order: index is
  /// `std::integral_constant<std::size_t, I>` for element I, `list_term<I>` for a list's terms
  /// (whose weight is the list's times the term's own).
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
  template <std::size_t I, class F>
  void visit_element(F& f) const {
    const auto& element = std::get<I>(objectives);
    if constexpr (is_term_list<std::tuple_element_t<I, std::tuple<Ds...>>>) {
      for (std::size_t k = 0; k < element.terms.size(); ++k) {
        f(list_term<I>{k}, element.terms[k].objective, weights[I] * element.terms[k].weight);
      }
    } else {
      f(std::integral_constant<std::size_t, I>{}, element, weights[I]);
    }
  }
  template <class F, std::size_t... I>
  void for_each_impl(F&& f, std::index_sequence<I...>) const {
    (visit_element<I>(f), ...);
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
struct mix_models<diversity_mix<Ds...>, T> : std::bool_constant<(diversity_objective<term_type_t<Ds>, T> && ...)> {};

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
