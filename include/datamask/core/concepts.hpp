// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The views objectives receive and the concepts every pluggable part satisfies.
///
/// Each concept lists the expressions it requires. The rules a compiler cannot check are in
/// its comment; a model that breaks them compiles but gives wrong or irreproducible results.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "datamask/core/executor.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

/// @brief What a diversity objective sees when it scores one subset.
///
/// `embeddings` is the whole block (n x d). `subset` holds rows of it. `reference` holds the
/// rows of the reference set V for objectives that compare the subset with a population
/// (facility location): the active batch during learning, the whole block when a selection is
/// evaluated. `inv_norms[i]` is 1 / ||e_i|| (1 when the caller declared the rows normalised)
/// (double, so cosine terms keep double precision) and `sq_norms[i]` is ||e_i||^2; both have n entries.
/// `threads` is how many threads one call may use inside itself (0: all); an objective that
/// parallelises one subset (facility location's tiles) honours it, and a call made inside a
/// parallel region runs on its own thread whatever it says.
template <class T>
struct subset_view {
  matrix_view<const T> embeddings;
  const double* inv_norms = nullptr;
  const double* sq_norms = nullptr;
  index_view subset;
  index_view reference;
  int threads = 0;
};

/// @brief What a batched diversity objective sees: G subsets of k rows each (row-major G x k).
template <class T>
struct batch_view {
  matrix_view<const T> embeddings;
  const double* inv_norms = nullptr;
  const double* sq_norms = nullptr;
  matrix_view<const index_t> subsets;
  index_view reference;
  /// How many threads one `evaluate_batch` call may use inside itself (0: all), as
  /// `subset_view::threads`; a backend's device pass ignores it.
  int threads = 0;

  /// @brief The g-th subset as a single-subset view.
  [[nodiscard]] DATAMASK_HOST_DEVICE subset_view<T> operator[](index_t g) const {
    return subset_view<T>{embeddings, inv_norms, sq_norms, index_view{subsets.row(g), subsets.cols},
                          reference, threads};
  }
};

/// @brief What a relaxation sees: the block, the probabilities and the selection size.
///
/// `embeddings`, `inv_norms` and `sq_norms` are as in `subset_view` (n rows). `p` holds one
/// probability per row, in [0, 1] (rows outside the candidate set hold 0). `total` is S, the
/// number of items a selection holds: objectives whose normaliser depends on the set size use
/// it (the relaxation is exact where sum p = S). Every pointer is in the memory of the executor
/// the relaxation is called with (`relaxable_objective`). `threads`: the threads the run may use
/// (0: all), for information; the executor's passes already honour it.
template <class T>
struct relax_view {
  matrix_view<const T> embeddings;
  const double* inv_norms = nullptr;
  const double* sq_norms = nullptr;
  std::span<const double> p;
  double total = 0.0;
  int threads = 0;
};

/// @brief A set-level diversity objective: `double d(const subset_view<T>&) const`.
///
/// Required: `d(s)` converts to double. Rules the compiler cannot check: the value does not
/// depend on the order of `s.subset`; larger means more diverse; the call is thread-safe
/// (rollouts are scored concurrently) and deterministic.
template <class D, class T = float>
concept diversity_objective =
    std::copy_constructible<D> && requires(const D& d, const subset_view<T>& s) {
      { d(s) } -> std::convertible_to<double>;
    };

/// @brief The most row indices (G x k) the greedy baselines and the polish put in one
/// `evaluate_batch` call when they score sets by evaluation: enough to amortise a call (a Python
/// metric's), few enough that a metric's temporaries (G x k x d values) stay modest.
inline constexpr index_t evaluation_batch_rows = index_t{1} << 16;

/// @brief Refinement of `diversity_objective`: scores G subsets in one call,
/// `d.evaluate_batch(const batch_view<T>&, std::span<double> out)` with `out.size() == G`.
/// Must give the same values as scoring each subset alone, whatever the thread count.
template <class D, class T = float>
concept batched_diversity_objective =
    diversity_objective<D, T> &&
    requires(const D& d, const batch_view<T>& b, std::span<double> out) { d.evaluate_batch(b, out); };

/// @brief What an incremental (greedy) state is built over: the whole block, its norms (as in
/// `subset_view`) and the threads the state may use (0: all). Facility location's reference set
/// in a greedy run is the whole block.
template <class T>
struct greedy_block {
  matrix_view<const T> embeddings;
  std::span<const double> inv_norms;
  std::span<const double> sq_norms;
  int threads = 0;
};

/// @brief The state a greedy run keeps for one diversity term while it grows a set S.
///
/// Required expressions, for `st` of type S (const where marked):
/// - `st.accumulate(std::span<const index_t> cands, std::span<double> out, double w)` (const):
///   `out[c] += w * p(cands[c])`, where p(i) is the candidate-dependent part of the gain
///   F(S + i) - F(S);
/// - `st.common()` (const), convertible to double: the part of the gain every candidate shares,
///   so that F(S + i) - F(S) = p(i) + common() (a normalisation that changes with |S| lives
///   here);
/// - `st.add(j)`: S becomes S + j.
///
/// Optional members:
/// - `static constexpr bool diminishing_gains`: true when p(i) never grows as S grows, once
///   |S| >= 1 (submodular in the candidate-dependent part). Lazy greedy may then keep stale
///   p(i) as upper bounds; a term without it is re-scored every round.
/// - `st.lazy_batch()` (const): how many stale candidates lazy greedy should re-score per call
///   (a tiled kernel that costs the same for 1 or 32 candidates says 32).
///
/// Rules the compiler cannot check: p(i) does not depend on which other candidates are scored
/// in the same call, nor on the thread count (naive and lazy greedy then break ties alike);
/// `accumulate` may run its own parallel loops and is called from one thread at a time.
template <class S>
concept greedy_state = std::move_constructible<S> &&
                       requires(S& st, const S& cst, std::span<const index_t> cands,
                                std::span<double> out, double w, index_t j) {
                         cst.accumulate(cands, out, w);
                         { cst.common() } -> std::convertible_to<double>;
                         st.add(j);
                       };

/// @brief Refinement of `diversity_objective`: the objective builds a `greedy_state` for a
/// block, `d.greedy_state(const greedy_block<T>&)` (const). `greedy_select` then scores
/// candidates through that state instead of evaluating F on S + i for each of them.
///
/// Rule the compiler cannot check: the state's gains equal d(S + i) - d(S) with the whole
/// block as reference set, up to rounding.
template <class D, class T = float>
concept incremental_objective =
    diversity_objective<D, T> && requires(const D& d, const greedy_block<T>& b) {
      { d.greedy_state(b) } -> greedy_state;
    };

/// @brief The greedy state objective D builds for element type T.
template <class D, class T>
  requires incremental_objective<D, T>
using greedy_state_t = decltype(std::declval<const D&>().greedy_state(std::declval<const greedy_block<T>&>()));

/// @brief Whether greedy state S declares `diminishing_gains = true` (see `greedy_state`).
template <class S>
inline constexpr bool has_diminishing_gains = [] {
  if constexpr (requires { S::diminishing_gains; }) {
    return static_cast<bool>(S::diminishing_gains);
  } else {
    return false;
  }
}();

/// @brief Refinement of `diversity_objective`: the objective scores G subsets through an
/// executor the backend supplies (executor/concept.hpp), `d.evaluate_device(exec, const
/// batch_view<T>& b, double* out)` (const, returning void), with `out` G values in the
/// executor's memory. So an objective header never includes Thrust and a backend never includes
/// an objective: the Thrust backend passes its executor over `thrust::for_each` and
/// `thrust::device_vector` (a GPU under nvcc, OpenMP threads under g++).
///
/// Rules the compiler cannot check: every pointer in `b` and `out` lives in the executor's
/// memory; scratch and resident copies are not kept past the call; the values equal `d(b[g])` up
/// to rounding; deterministic whatever the thread count.
template <class D, class T = float>
concept device_evaluable =
    diversity_objective<D, T> &&
    requires(const D& d, detail::executor_archetype& exec, const batch_view<T>& b, double* out) {
      { d.evaluate_device(exec, b, out) } -> std::same_as<void>;
    };

/// @brief Refinement of `diversity_objective`: a relaxation F(p) with its gradient, written once
/// against an executor, `double d.relax(exec, const relax_view<T>& v, double* grad) const`, which
/// returns F(p) and writes dF/dp_i into grad[i] for every row i. `v.embeddings`, `v.inv_norms`,
/// `v.sq_norms`, `v.p` and `grad` live in the executor's memory: the host's on the CPU backend, a
/// GPU's on the Thrust backend under CUDA. The same member serves both, written with the
/// executor's passes (`for_each` with `DATAMASK_HOST_DEVICE` functors, `reduce`, and the dense
/// products `column_sums`, `row_dots`, `scatter`, `quadratic_forms`; datamask/exec/ops.hpp
/// has the common functors): examples/relaxed_metric.cpp is a user's.
///
/// Rules the compiler cannot check: at every p in {0, 1}^n with sum p = v.total, F(p) equals
/// the objective on the set {i : p_i = 1} (up to rounding); F is differentiable in p on the
/// box, and grad is its exact gradient (the continuous learner's tests compare it with finite
/// differences); value and gradient are deterministic and do not depend on the thread count
/// (every sum through `reduce` or a dense product, never a parallel accumulation); only scalars
/// cross to the host; the call is thread-safe. Larger is more diverse, as for the objective.
///
/// Why a separate capability and not a generic one: a relaxation is only useful when its value
/// and gradient cost about one pass over the block (O(n d) for pairwise similarity, O(n d^2) for
/// DiSF); evaluating the objective per coordinate would cost n times the objective. So each
/// objective that has a cheap closed form opts in with a `relax` member, defined with the
/// objective (objectives/pairwise.hpp, objectives/disf.hpp).
template <class D, class T = float>
concept relaxable_objective =
    diversity_objective<D, T> &&
    requires(const D& d, detail::executor_archetype& exec, const relax_view<T>& v, double* grad) {
      { d.relax(exec, v, grad) } -> std::convertible_to<double>;
    };

/// @brief What one item costs an optimizer in multiply-adds, for one diversity objective: `greedy`,
/// naive greedy's gain of one candidate at one pick; `relaxed`, the relaxation's gradient at one
/// item in one ascent iteration. `auto` weighs the optimizers with it (learners/auto.hpp).
struct item_costs {
  double greedy = 0.0;
  double relaxed = 0.0;
};

/// @brief An objective that states its cost model: `D::costs_per_item(dims, neighbors)` (static,
/// `neighbors` the K of its kNN graph where it has one, else 0). Without one, `auto` has no cost
/// to weigh and keeps its choice by capability.
template <class D>
concept costed_objective = requires(index_t dims, index_t neighbors) {
  { D::costs_per_item(dims, neighbors) } -> std::same_as<item_costs>;
};

/// @brief Whether D still has the host-only relaxation of datamask 0.1,
/// `double relax(const relax_view<T>&, std::span<double>) const`, and not the executor form: the
/// learners then refuse it at compile time, naming the new spelling.
template <class D, class T = float>
concept host_only_relaxation =
    !relaxable_objective<D, T> && requires(const D& d, const relax_view<T>& v, std::span<double> grad) {
      { d.relax(v, grad) } -> std::convertible_to<double>;
    };

/// @brief Every relaxation now runs through an executor, on the host and on a device alike: the
/// old name of `relaxable_objective` (which had a separate `relax_device` member).
template <class D, class T = float>
concept device_relaxable = relaxable_objective<D, T>;

/// @brief The state a swap search (the continuous learner's polish) keeps for one diversity term
/// on a selection U of the block. Required, for `st` of type S:
/// - `st.delta(index_t r, index_t a)` (const): F(U - r + a) - F(U) for r in U and a not in U,
///   the whole block as reference set;
/// - `st.apply(r, a)`: U becomes U - r + a;
/// - `st.prepare(std::span<const index_t> removals, std::span<const index_t> additions)`: called
///   before a scan's deltas with the rows it may remove and add, and again with one removal and
///   one addition before a pair's delta is checked after an `apply` (a state may compute per-row
///   quantities there).
/// Rules the compiler cannot check: `delta` is thread-safe (a round scores pairs concurrently)
/// and deterministic; a copy is independent of the original (a double-swap search tries a swap on
/// a copy).
template <class S>
concept swap_state = std::copy_constructible<S> &&
                     requires(S& st, const S& cst, index_t r, std::span<const index_t> rows) {
                       { cst.delta(r, r) } -> std::convertible_to<double>;
                       st.apply(r, r);
                       st.prepare(rows, rows);
                     };

/// @brief Refinement of `swap_state`: the exact change of the term when one row leaves the
/// selection or joins it, `st.one_sided(i, inside)` (const, thread-safe and deterministic: the
/// polish calls it for every row in parallel; `inside`: i is selected and leaves).
///
/// Why: the polish ranks its candidates by how much each selected row holds up and each other row
/// would add. Without this, the ranking is the relaxation's gradient at the selection, which for
/// a relaxation that is not exact at 0/1 points (DiSF's p-weighted statistics) can rank the
/// improving swaps out of reach.
template <class S>
concept ranked_swap_state = swap_state<S> && requires(const S& cst, index_t i, bool inside) {
  { cst.one_sided(i, inside) } -> std::convertible_to<double>;
};

/// @brief Refinement of `ranked_swap_state` for an executor E and a block of T:
/// `st.add_one_sided(e, x, rows, count, inside, weight, out)` adds weight times
/// `one_sided(rows[t], inside)` to out[t] for t in [0, count), with x (the block), rows and out
/// in the executor's memory (the same values to rounding, the same bits on any thread count).
///
/// Why: the polish ranks every candidate at each refresh; with this, the ranking's keys are
/// computed where the block is kept (on a device, under CUDA), so that they need not cross to
/// the host, and a state whose per-row formula is faster as matrix products (DiSF's) batches it.
template <class S, class E, class T>
concept executor_ranked_swap_state =
    ranked_swap_state<S> && requires(const S& cst, E& e, matrix_view<const T> x, const index_t* rows, index_t count,
                                     bool inside, double weight, double* out) {
      cst.add_one_sided(e, x, rows, count, inside, weight, out);
    };

/// @brief Refinement of `diversity_objective`: exact swap gains cheaper than two evaluations,
/// `d.swap_state(const subset_view<T>& block, std::span<const index_t> selection)` (const),
/// returning a `swap_state` on the selection; `block.reference` is every row of the block and
/// `block.subset` is empty.
///
/// Why: the continuous learner's polish scores many swaps per round; without this capability it
/// evaluates the objective on the swapped set (O(cost of the objective) per swap), with it a
/// swap costs O(d) for pairwise similarity, O(d^2) for DiSF, O(K^2) for facility location on a
/// kNN graph.
template <class D, class T = float>
concept swappable_objective =
    diversity_objective<D, T> && requires(const D& d, const subset_view<T>& b, std::span<const index_t> sel) {
      { d.swap_state(b, sel) } -> swap_state;
    };

/// @brief What an upper bound sees (`boundable_objective`): one diversity term F with a modular
/// part, the function
///   f(U) = sum_{i in U} linear[i] + weight * F(U),   |U| = size,
/// with the whole block as reference set. `embeddings`, `inv_norms` and `sq_norms` are as in
/// `subset_view` (n rows, host memory). `linear` holds n values, or is empty for none (a mix's
/// quality term is folded into one of its diversity terms' bounds: docs/method.md 7.4). `weight` is
/// the term's weight over its scale, >= 0. `selection` is the set being certified: the methods
/// start there. `iterations` is the method's budget (0: its default); `threads` as in
/// `subset_view`; `memory_bytes` caps what a method may hold beyond O(n) (a dense kernel's pairs
/// are held only when they fit, else recomputed).
template <class T>
struct bound_view {
  matrix_view<const T> embeddings;
  const double* inv_norms = nullptr;
  const double* sq_norms = nullptr;
  std::span<const double> linear;
  double weight = 1.0;
  index_t size = 0;
  std::span<const index_t> selection;
  index_t iterations = 0;
  int threads = 0;
  std::size_t memory_bytes = std::size_t{256} << 20;
};

/// @brief An upper bound on max f over the sets of `bound_view::size` items, with the values it
/// is recomputed from: `bound >= max_{|U| = S} f(U)` (docs/method.md section 7).
struct bound_certificate {
  double bound = std::numeric_limits<double>::infinity();
  std::vector<double> certificate;  ///< pairwise: the point p; facility location: lambda >= 0
  std::string_view method;          ///< how it was computed ("frank-wolfe", "lagrangian-dual")
  index_t evaluations = 0;          ///< evaluations of the bound the method made
};

/// @brief Refinement of `diversity_objective`: an upper bound on the optimum with a certificate
/// (docs/method.md section 7), `d.bound(const bound_view<T>&) const` returning a `bound_certificate`,
/// and `d.check_bound(const bound_view<T>&, std::span<const double> certificate) const`
/// returning the bound that certificate proves, recomputed from the data alone.
///
/// Rules the compiler cannot check: every value `check_bound` returns for a certificate it
/// accepts is >= max_{|U| = size} f(U) in exact arithmetic, whatever the certificate (a bound
/// from weak duality or concavity holds at any iteration: a small budget gives a looser bound,
/// never a wrong one); `check_bound` throws `invalid_input` for a certificate outside its domain
/// (a negative multiplier) and computes by a route of its own (another loop order, no shared
/// state); `bound(v).bound` equals `check_bound(v, bound(v).certificate)` up to rounding;
/// deterministic whatever the thread count.
///
/// Why a capability and not a generic bound: a bound close to the optimum needs the structure of
/// the objective (pairwise similarity: a concave quadratic relaxation; facility location: the
/// dual of its LP); a black-box objective has none, and a certificate must never be a guess.
template <class D, class T = float>
concept boundable_objective =
    diversity_objective<D, T> &&
    requires(const D& d, const bound_view<T>& v, std::span<const double> certificate) {
      { d.bound(v) } -> std::convertible_to<bound_certificate>;
      { d.check_bound(v, certificate) } -> std::convertible_to<double>;
    };

/// @brief Refinement of `diversity_objective`: the exact mean of d over every set of `size` rows
/// of `s.subset`, `double d.subset_mean(const subset_view<T>& s, index_t size) const`.
///
/// Why: a certificate's share compares a selection with the mean f of random sets of its size
/// (docs/method.md section 7). Where the mean has a closed form (pairwise similarity: the block's own
/// value), it is exact and costs one pass, where drawing random subsets costs hundreds of
/// evaluations and is an estimate. Rules: the value equals that mean up to rounding (checked by
/// enumeration on small blocks); deterministic whatever `s.threads`.
template <class D, class T = float>
concept subset_mean_objective =
    diversity_objective<D, T> && requires(const D& d, const subset_view<T>& s, index_t size) {
      { d.subset_mean(s, size) } -> std::convertible_to<double>;
    };

/// @brief Refinement of `diversity_objective`: each item's marginal in one call,
/// `double d.marginals(const subset_view<T>& s, std::span<double> out) const`, which returns
/// d(s) and writes out[t] = d(s) - d(s without row s.subset[t]) for every t (out.size() == k).
///
/// Why: the policy-gradient learner's per-item credit (`credit_mode::item`) gives each item of a
/// rollout its own marginal instead of the rollout's reward. It is only useful when all k
/// marginals cost about one evaluation (pairwise similarity: one dot product per item; facility
/// location: the best and second-best item per reference row; DiSF: a rank-one downdate of the
/// scatter per item), not k + 1 evaluations.
///
/// Rules the compiler cannot check: the values equal those differences up to rounding (the
/// empty set scores as the objective scores it, 0 for the built-ins); the returned value equals
/// d(s) up to rounding; deterministic, thread-safe, independent of s.threads.
template <class D, class T = float>
concept marginal_objective =
    diversity_objective<D, T> && requires(const D& d, const subset_view<T>& s, std::span<double> out) {
      { d.marginals(s, out) } -> std::convertible_to<double>;
    };

/// @brief Refinement of `marginal_objective`: the marginals of G subsets in one call,
/// `d.marginals_batch(const batch_view<T>&, std::span<double> values, std::span<double> out)`,
/// values[g] = d(subset g) and out[g k + t] its t-th marginal (`marginals` per subset).
///
/// Why: per-item credit scores every rollout of a step; an objective that compares subsets with
/// a shared reference set (facility location) computes the products of the reference rows with
/// all rollouts' rows once instead of once per rollout, as `batched_diversity_objective` does for
/// the values alone. Rule: the same values as one `marginals` call per subset, whatever the
/// thread count.
template <class D, class T = float>
concept batched_marginal_objective =
    marginal_objective<D, T> &&
    requires(const D& d, const batch_view<T>& b, std::span<double> values, std::span<double> out) {
      d.marginals_batch(b, values, out);
    };

/// @brief A `marginal_objective` whose k marginals cost about one evaluation in practice, as the
/// objective declares: `static constexpr bool cheap_marginals = true;`.
///
/// Why: `credit_mode::automatic` gives per-item credit only to such objectives. Per-item credit
/// reaches a given f in fewer steps; it also reaches it in less time where a step costs about
/// what the paper's estimator's does (measured for pairwise similarity and dense facility
/// location; DiSF's marginals cost several evaluations, and there the paper's estimator is as
/// good at equal time: benchmarks/RESULTS.md, "Policy gradient: per-item credit").
template <class D, class T = float>
concept cheap_marginal_objective = marginal_objective<D, T> && requires { requires D::cheap_marginals; };

/// @brief A per-item quality metric: `double q(index_t row) const`, evaluated once per item
/// when a run starts; the quality term of a set is the mean (or sum) of these scores.
/// Rules: deterministic and finite for every row of the block.
template <class Q>
concept quality_metric = std::copy_constructible<Q> && requires(const Q& q, index_t row) {
  { q(row) } -> std::convertible_to<double>;
};

/// @brief A learning-rate schedule: `double s(index_t step, index_t total_steps) const`,
/// steps counted from 1. Rule: finite and non-negative.
template <class S>
concept lr_scheduler = std::copy_constructible<S> && requires(const S& s, index_t t, index_t e) {
  { s(t, e) } -> std::convertible_to<double>;
};

/// @brief An objective may name itself (`static constexpr std::string_view name`); the name is
/// used in results, reports and logs.
template <class D>
concept named_objective = requires {
  { D::name } -> std::convertible_to<std::string_view>;
};

/// @brief The name of objective type D: its `name` member, or "diversity".
template <class D>
constexpr std::string_view objective_name() {
  if constexpr (named_objective<D>) {
    return std::string_view(D::name);
  } else {
    return "diversity";
  }
}

}  // namespace datamask
