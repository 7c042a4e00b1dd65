// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The `executor` concept: where an algorithm's passes run. Every backend supplies one
/// (`eigen_backend`: `host_executor`; `thrust_backend`: its device executor), and every algorithm
/// that runs on a device is written once against it: the continuous ascent, the projections, the
/// relaxations of the objectives (ours and a user's), the device evaluations.

#include <concepts>
#include <memory>
#include <span>

#include "datamask/core/config.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

namespace detail {
/// Functors the `executor` concept is stated with (a lambda in a requires-expression is not
/// accepted by every CUDA compiler).
struct probe_body {
  DATAMASK_HOST_DEVICE void operator()(index_t) const {}
};
struct probe_term {
  DATAMASK_HOST_DEVICE double operator()(index_t) const { return 0.0; }
};
struct probe_op {
  DATAMASK_HOST_DEVICE double operator()(double a, double b) const { return a + b; }
};
struct probe_pred {
  DATAMASK_HOST_DEVICE bool operator()(index_t) const { return true; }
};

/// The executor interface objectives are checked against (declarations only).
struct executor_archetype {
  template <class F>
  void for_each(index_t n, F f, double work_per_item = 16.0);
  template <class U>
  U* scratch(index_t count);
  template <class U>
  U* upload(std::span<const U> host);
  template <class U>
  const U* resident(std::span<const U> host, const std::shared_ptr<const void>& owner);
  template <class U>
  void download(const U* from, std::span<U> host);
  template <class Term, class Op>
  double reduce(index_t n, Term term, Op op, double init);
  template <class Pred>
  index_t keep_if(index_t n, Pred pred, index_t* out);
  [[nodiscard]] executor_archetype scope() const;
  template <class T>
  void column_sums(matrix_view<const T> x, const double* w, double* out);
  template <class T>
  void row_dots(matrix_view<const T> x, const double* s, double* out);
  template <class T>
  void scatter(matrix_view<const T> x, const double* mu, const double* w, double* sigma);
  template <class T>
  void quadratic_forms(matrix_view<const T> x, const double* mu, const double* g, double* out);
};
}  // namespace detail

/// @brief An executor: memory and passes on one device (the host's threads, a GPU). Required,
/// for `e` of type E:
/// - `e.for_each(index_t n, F f)` (optionally `, double work_per_item`): f(i) for every i in
///   [0, n), in any order and concurrently; F is trivially copyable, its call operator
///   `DATAMASK_HOST_DEVICE` (no Eigen, no `std::vector`, no exceptions), and it reads only the
///   executor's memory; passes run in program order (a pass sees the writes of earlier ones);
/// - `e.template scratch<U>(count)`: `count` uninitialised U in the executor's memory, valid as
///   long as `e`; `e.upload(std::span<const U>)`: a new buffer holding those values;
/// - `e.resident(std::span<const U> host, std::shared_ptr<const void> owner)`: `host`'s values in
///   the executor's memory, read-only; a device copies an array an objective holds for the whole
///   run (a kNN graph) once and hands the same copy to later calls for it, keeping `owner`
///   alive (rules: `host` stays allocated and unchanged while `owner` lives);
/// - `e.download(const U* from, std::span<U> host)`: copies values back;
/// - `e.reduce(n, term, op, init)`: init op term(0) op ... op term(n - 1) as `tree_reduce`'s
///   fixed tree (executor/reduce.hpp): the same bits on every executor and thread count;
/// - `e.keep_if(n, pred, index_t* out)`: the k in [0, n) with pred(k), ascending; their count;
/// - `e.scope()`: an executor on the same device whose buffers are freed with it;
/// - the dense products of executor/dense.hpp, each implemented as the executor runs products
///   fastest: `e.column_sums(x, w, out)` (X^T w), `e.row_dots(x, s, out)` (X s),
///   `e.scatter(x, mu, w, sigma)` and `e.quadratic_forms(x, mu, g, out)`.
/// Optional: `E::search_depth` (an int, 1 to 4; 1 without it): how many levels of a bisection
/// to decide per trip to the host, for an executor whose `reduce` costs a round trip more than a
/// pass (the projections ask for its 2^depth - 1 midpoints' sums at once, `tree_reduce_many`).
template <class E>
concept executor = requires(E& e, const E& ce, index_t n, std::span<const double> hs, std::span<double> out,
                            const double* cp, double* p, index_t* rows, matrix_view<const float> x,
                            const std::shared_ptr<const void>& owner) {
  e.for_each(n, detail::probe_body{});
  { e.template scratch<double>(n) } -> std::same_as<double*>;
  { e.upload(hs) } -> std::same_as<double*>;
  { e.resident(hs, owner) } -> std::same_as<const double*>;
  e.download(cp, out);
  { e.reduce(n, detail::probe_term{}, detail::probe_op{}, 0.0) } -> std::same_as<double>;
  { e.keep_if(n, detail::probe_pred{}, rows) } -> std::same_as<index_t>;
  { ce.scope() } -> std::same_as<E>;
  e.column_sums(x, cp, p);
  e.row_dots(x, cp, p);
  e.scatter(x, cp, cp, p);
  e.quadratic_forms(x, cp, cp, p);
};

}  // namespace datamask
