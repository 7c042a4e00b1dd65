// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief User diversity objectives that run on the device (the Thrust backend's fast path for
/// functors that are not built in). Needs no Thrust and no CUDA: a device objective is also an
/// ordinary `diversity_objective` the CPU backend calls on the host.

#include <concepts>
#include <type_traits>

#include "datamask/core/concepts.hpp"
#include "datamask/core/config.hpp"

namespace datamask {

/// @brief A diversity objective the Thrust backend may call inside device code.
///
/// Required expressions (besides `diversity_objective<D, T>`):
/// - `D::device_callable`, a `static constexpr bool` equal to `true`: the opt-in, because no
///   compiler can check that a call operator is `__host__ __device__`;
/// - `std::is_trivially_copyable_v<D>`: the functor is copied by value into device code.
///
/// Rules the compiler cannot check:
/// - the call operator `double operator()(const subset_view<T>&) const` is marked
///   `DATAMASK_HOST_DEVICE` (which is `__host__ __device__` under nvcc and empty under g++),
///   and so is everything it calls: no Eigen, no `std::vector`, no exceptions, no allocation;
/// - the functor holds no host pointers: it may read only the `subset_view` it is given
///   (embeddings, norms, subset and reference rows all live in device memory);
/// - the value is deterministic and does not depend on the order of `s.subset`.
///
/// Under the Thrust backend a device objective is evaluated by one device thread per rollout
/// (the backend adapts it to the `device_evaluable` path with `evaluate_device_objective`): keep it O(k d) or give the rollouts enough work
/// each. A diversity objective that is not a device objective still works with the Thrust
/// backend, but every step then copies the G x k subset rows to the host and scores them there
/// (slow under CUDA; see backend/thrust.hpp).
///
/// Example:
/// @code
/// struct spread {
///   static constexpr bool device_callable = true;
///   template <class T>
///   DATAMASK_HOST_DEVICE double operator()(const datamask::subset_view<T>& s) const { ... }
/// };
/// @endcode
template <class D, class T = float>
concept device_objective =
    diversity_objective<D, T> && std::is_trivially_copyable_v<D> && requires {
      { D::device_callable } -> std::convertible_to<bool>;
      requires static_cast<bool>(D::device_callable);
    };

namespace detail {
/// One rollout of a user device objective: out[g] = objective(b[g]).
template <class D, class T>
struct device_objective_call {
  D objective;
  batch_view<T> b;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t g) const { out[g] = static_cast<double>(objective(b[g])); }
};
}  // namespace detail

/// @brief A `device_objective` on the `device_evaluable` path: scores the G subsets of `b`
/// through `exec` (see `device_evaluable`), one call of the functor per subset.
template <class D, class T, class Exec>
  requires device_objective<D, T>
void evaluate_device_objective(const D& objective, Exec& exec, const batch_view<T>& b, double* out) {
  exec.for_each(b.subsets.rows, detail::device_objective_call<D, T>{objective, b, out});
}

}  // namespace datamask
