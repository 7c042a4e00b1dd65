// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The relaxation of a run's f (`objective_function`): the same terms, weights and
/// scales, each term replaced by its relaxation (quality: q . p / S for the mean, q . p for the
/// sum; each diversity term its `relax`), written once against an executor.

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>

#include "datamask/core/concepts.hpp"
#include "datamask/exec/host.hpp"
#include "datamask/exec/ops.hpp"
#include "datamask/objectives/function.hpp"

namespace datamask {

namespace detail::continuous {

/// Refuses, at compile time, a diversity term with the host-only `relax` of datamask 0.1, naming
/// the spelling a relaxation now has. (A term with no relaxation at all may sit in f with weight
/// 0; the learner refuses it at run time where it counts: `unrelaxed_term`.)
template <class D, class T>
constexpr void require_relaxation() {
  static_assert(!host_only_relaxation<D, T>,
                "datamask: this objective's relax(const relax_view<T>&, std::span<double>) is the host-only "
                "form of datamask 0.1; a relaxation now runs through an executor, on the host and on a device: "
                "template <class Exec, class T> double relax(Exec& exec, const datamask::relax_view<T>& v, "
                "double* grad) const (see examples/relaxed_metric.cpp)");
}

/// The name of the first diversity term of a mix that counts (`slots`: its index in f's terms,
/// -1 when off) and has no relaxation (not a `relaxable_objective`, or one that says at run time
/// it has none: `has_relaxation()`); empty when every term that counts relaxes.
template <class T, class Mix>
std::string unrelaxed_term(const Mix& mix, std::span<const int> slots) {
  std::string name;
  mix.for_each([&](auto i, const auto& objective, double /*v*/) {
    using D = std::decay_t<decltype(objective)>;
    bool relaxes = relaxable_objective<D, T>;
    if constexpr (requires { objective.has_relaxation(); }) relaxes = relaxes && objective.has_relaxation();
    if (name.empty() && slots[i] >= 0 && !relaxes) name = mix.names()[i];
  });
  return name;
}

}  // namespace detail::continuous

/// @brief One term's relaxation on the host: `d.relax` through a `host_executor` on `v.threads`
/// threads, with v and grad in host memory. Returns F(p) and writes dF/dp into grad.
template <class D, class T>
  requires relaxable_objective<D, T>
double relax_on_host(const D& d, const relax_view<T>& v, std::span<double> grad) {
  host_executor exec(v.threads);
  return static_cast<double>(d.relax(exec, v, grad.data()));
}

/// @brief The relaxation of f at p through an executor: `rel(exec, p, grad)` returns F(p) and
/// writes dF/dp into grad (both n values in the executor's memory).
/// @param view the block as the executor reads it (its embeddings and norms; `p` and `total` are
///        filled in here)
/// @param quality f's combined quality per row in the executor's memory (null without a quality
///        term)
/// @return a callable `double(Exec& exec, const double* p, double* grad)`; it refers to `f`
template <class T, class Diversity>
[[nodiscard]] auto relaxation_of(const objective_function<T, Diversity>& f, index_t s, relax_view<T> view,
                                 const double* quality) {
  return [&f, s, view, quality](auto& exec, const double* p, double* grad) -> double {
    const index_t n = f.size();
    const auto& terms = f.terms();
    const double sd = static_cast<double>(s);
    exec.for_each(n, ops::fill{grad, 0.0});
    double val = 0.0;
    if (f.has_quality_term()) {
      const double div = f.aggregate() == quality_aggregate::mean ? sd : 1.0;
      const double w = terms[0].weight / terms[0].scale / div;
      val += w * exec.reduce(n, ops::product{quality, p}, ops::plus{}, 0.0);
      exec.for_each(n, ops::add_scaled{grad, quality, w});
    }
    relax_view<T> v = view;
    v.p = std::span<const double>(p, static_cast<std::size_t>(n));
    v.total = sd;
    auto scope = exec.scope();
    double* term_grad = scope.template scratch<double>(n);
    f.mix().for_each([&](auto i, const auto& objective, double /*v*/) {
      using D = std::decay_t<decltype(objective)>;
      detail::continuous::require_relaxation<D, T>();
      if constexpr (relaxable_objective<D, T>) {
        const int t = f.term_slots()[i];
        if (t < 0) return;
        const double w = terms[static_cast<std::size_t>(t)].weight / terms[static_cast<std::size_t>(t)].scale;
        val += w * static_cast<double>(objective.relax(scope, v, term_grad));
        scope.for_each(n, ops::add_scaled{grad, term_grad, w});
      }
    });
    return val;
  };
}

/// @brief `relaxation_of` on the host, from f's own arrays, as a callable of host spans,
/// `double(std::span<const double> p, std::span<double> grad)` (the polish ranks by it).
/// @param threads as `settings::threads` (0: all); the result does not depend on it
template <class T, class Diversity>
[[nodiscard]] auto relaxed_objective(const objective_function<T, Diversity>& f, index_t s, int threads) {
  const relax_view<T> view{f.embeddings(), f.inv_norms().data(), f.sq_norms().data(), {}, 0.0, threads};
  const double* quality = f.has_quality_term() ? f.quality().data() : nullptr;
  return [relaxed = relaxation_of(f, s, view, quality), threads](std::span<const double> p,
                                                                  std::span<double> grad) -> double {
    host_executor exec(threads);
    return relaxed(exec, p.data(), grad.data());
  };
}

}  // namespace datamask
