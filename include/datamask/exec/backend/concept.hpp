// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The `backend` concept: the fixed set of primitives the learner's loop calls.
///
/// The loop (learner.hpp) is written once against these expressions and never names Eigen or
/// Thrust. A backend keeps the block, the logits, the active batch and the rollouts in its own
/// memory (`B::vector<T>`); only per-step scalars (G rewards per term) cross to the host.

#include <concepts>
#include <cstdint>
#include <span>
#include <vector>

#include "datamask/core/concepts.hpp"
#include "datamask/core/executor.hpp"
#include "datamask/core/philox.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

namespace detail {
/// A diversity objective used only to state the backend concept.
struct probe_objective {
  template <class T>
  double operator()(const subset_view<T>&) const {
    return 0.0;
  }
};
}  // namespace detail

/// @brief A compute backend. Required (for element type float; the library instantiates float
/// and double):
/// - `B::vector<T>`: owning storage in the backend's memory;
/// - `b.to_device(std::span<const T>)`, `b.to_host(const vector<T>&) -> std::vector<T>`;
/// - `b.make_dataset(matrix_view<const T>, inv_norms, sq_norms, ids)` -> `B::dataset<T>`;
/// - `b.active_batch(ds, candidates, key, step, m, out)`: the m candidates with the smallest
///   draw of the active-batch stream, in increasing row order;
/// - `b.gumbel_top_k(logits, ds, active, key, step, first_stream, G, k, out)`: G x k rows in draw
///   order;
/// - `b.evaluate(objective, ds, subsets, G, k, reference, std::span<double>)`;
/// - `b.gather_sum(values, subsets, G, k, std::span<double>)`;
/// - `b.entries_by_row(active, subsets)`: the G k rollout entries grouped by row (rows
///   ascending, each row's entries ascending), which the policy's updates sum over;
/// - `B::data(v)`: the values of a backend vector as an executor's passes read them;
/// - `b.top_rows(logits, ds, candidates, S) -> std::vector<index_t>` (host), and the same of
///   arrays in the executor's memory kept there, `b.largest(key, ds, candidates, m, S) ->
///   B::vector<index_t>`;
/// - `b.make_executor(ds)`: an `executor` (executor/concept.hpp) on the backend's memory, where
///   every algorithm written against an executor runs (the continuous ascent, relaxations);
/// - `b.relaxation_view(ds)`: the block as a relaxation reads it (`relax_view`, in the
///   executor's memory).
/// Rules: every draw is the Philox function of (key, item id, step, stream) (rng/philox.hpp), so
/// masks are identical across backends; every sum has a fixed order, so results do not depend on
/// the thread count; ties break to the smaller id.
template <class B>
concept backend = requires(const B& b, typename B::template vector<double>& dv,
                           const typename B::template vector<double>& cdv,
                           typename B::template vector<index_t>& iv,
                           const typename B::template vector<index_t>& civ,
                           const typename B::template dataset<float>& ds,
                           matrix_view<const float> x, std::span<const double> hs,
                           std::span<const id_t> ids, std::span<double> out,
                           std::span<const double> coef, rng::philox_key key, std::uint32_t u32,
                           index_t n) {
  { b.to_device(hs) } -> std::same_as<typename B::template vector<double>>;
  { b.to_host(cdv) } -> std::same_as<std::vector<double>>;
  { b.make_dataset(x, hs, hs, ids) } -> std::same_as<typename B::template dataset<float>>;
  b.active_batch(ds, civ, key, u32, n, iv);
  b.gumbel_top_k(cdv, ds, civ, key, u32, u32, n, n, iv);
  b.evaluate(detail::probe_objective{}, ds, civ, n, n, civ, out);
  b.gather_sum(cdv, civ, n, n, out);
  b.entries_by_row(civ, civ);
  { B::data(cdv) } -> std::same_as<const double*>;
  { B::data(dv) } -> std::same_as<double*>;
  { b.make_executor() } -> executor;
  { b.top_rows(cdv, ds, civ, n) } -> std::same_as<std::vector<index_t>>;
  { b.largest(B::data(cdv), ds, B::data(civ), n, n) } -> std::same_as<typename B::template vector<index_t>>;
  { b.make_executor(ds) } -> executor;
  { b.relaxation_view(ds) } -> std::same_as<relax_view<float>>;
};

/// @brief Whether a backend's passes leave the host's cores free (its executor is a device's):
/// then host work that does not depend on them (the continuous learner's stochastic-greedy
/// start) runs on a host thread beside them. A backend says so with `static constexpr bool
/// frees_host = true;`; without the member, false (the host work runs after the passes).
template <class B>
inline constexpr bool backend_frees_host = requires { requires B::frees_host; };

}  // namespace datamask

namespace datamask {

/// @brief Draws the G rollouts of a step: `s.sample(backend, logits, dataset, active, key, step,
/// G, k, out)` fills `out` (G x k rows, each in draw order) with k distinct rows of `active`.
/// Rules: a pure function of its arguments (same masks on every backend and thread count); the
/// policy update assumes the masks follow the distribution it differentiates.
template <class S, class B>
concept rollout_sampler =
    backend<B> && requires(const S& s, const B& b, const typename B::template vector<double>& l,
                           const typename B::template dataset<float>& ds,
                           const typename B::template vector<index_t>& active,
                           rng::philox_key key, std::uint32_t step, index_t n,
                           typename B::template vector<index_t>& out) {
      s.sample(b, l, ds, active, key, step, n, n, out);
    };

/// @brief Updates the logits from the rollouts of a step: `p.update(backend, logits, active,
/// subsets, G, k, coef)` adds sum_g coef_g * grad ln P(M_g) to the active logits, with
/// coef_g = eta_t * A_g / G (`softmax_policy` writes its maths once against the backend's
/// executor: `relaxed_update`, `plackett_luce_update`). Rule: touches only the logits of active
/// rows.
template <class P, class B>
concept mask_policy =
    backend<B> && requires(const P& p, const B& b, typename B::template vector<double>& l,
                           const typename B::template vector<index_t>& iv, index_t n,
                           std::span<const double> coef) {
      p.update(b, l, iv, iv, n, n, coef);
    };

/// @brief A mask policy that can take per-item credit (`credit_mode::item`):
/// `p.takes_item_credit()` says whether its current form can, and `p.update_items(backend,
/// logits, active, draws, entries, coef)` adds each draw's own coefficient (draws: G k rows,
/// coef: one per draw). Without it, `credit auto` gives rollout credit and `credit item` is
/// refused.
template <class P, class B>
concept item_credit_policy =
    mask_policy<P, B> && requires(const P& p, const B& b, typename B::template vector<double>& l,
                                  const typename B::template vector<index_t>& iv, index_t n,
                                  std::span<const double> coef) {
      { p.takes_item_credit() } -> std::convertible_to<bool>;
      p.update_items(b, l, iv, iv, n, coef);
    };

}  // namespace datamask
