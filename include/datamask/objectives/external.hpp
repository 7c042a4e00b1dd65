// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief A diversity objective given at run time, as functions: a scorer of G subsets in one
/// call and, optionally, a relaxation and a greedy state. The front ends run through it a Python metric
/// (datamask.select's `objective`) and a C++ user's own type registered by name
/// (dmfront::objective_registry, whose program is datamask-select with more names); it is a term
/// of `standard_mix` like the built-in ones. The functions see the library's views (the block's
/// norms, the reference set, the threads). They run on the host: with a device's executor the
/// relaxation's arrays are copied across.

#include <algorithm>
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "datamask/core/concepts.hpp"
#include "datamask/core/error.hpp"
#include "datamask/core/half.hpp"
#include "datamask/exec/host.hpp"

namespace datamask {

namespace detail::external_impl {
/// to[i] = from[i] on the executor (a device's gradient back from the host); at namespace scope,
/// as nvcc wants a kernel's functor.
struct copy_values {
  const double* from;
  double* to;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const { to[i] = from[i]; }
};
}  // namespace detail::external_impl

/// @brief A greedy state (`greedy_state`) held as functions: that of an objective given at run
/// time which brings its own (a C++ type registered by name: its `greedy_state`).
struct held_greedy_state {
  std::function<void(std::span<const index_t> cands, std::span<double> out, double w)> accumulate_fn;
  std::function<double()> common_fn;
  std::function<void(index_t j)> add_fn;
  bool diminishing = false;  ///< the held state's `diminishing_gains`: lazy greedy may keep stale gains
  index_t batch = 1;         ///< the held state's `lazy_batch()`, or 1

  void accumulate(std::span<const index_t> cands, std::span<double> out, double w) const {
    accumulate_fn(cands, out, w);
  }
  [[nodiscard]] double common() const { return common_fn(); }
  void add(index_t j) { add_fn(j); }
};

/// @brief A diversity objective held as functions (see the file comment). Elements: float. A
/// 16-bit block with this term in f is refused when the term is scored (`invalid_input`
/// naming it): its functions read float rows, and a float copy of the block per call would cost
/// more than the block saves (the front ends give such a run float32 blocks).
///
/// Rules the functions must keep (as every objective's, concepts.hpp): values do not depend on
/// the order of a subset's rows, larger is more diverse, the same subset always scores the same;
/// `score` may be called from any thread, one call at a time or several at once (also beside a
/// relaxation's call: the continuous learner's stochastic start runs beside its ascent under
/// CUDA); the relaxation equals the objective at every p in {0, 1}^n with sum p = S and gives
/// its exact gradient.
struct external_objective {
  /// Scores G subsets: row g of `b.subsets` (G x k, k >= 1) holds k rows of the block
  /// `b.embeddings` (n x d); writes the G values into `out`. The views are the library's, as a
  /// `batched_diversity_objective` gets them.
  using score_fn = std::function<void(const batch_view<float>& b, std::span<double> out)>;
  /// F(p) of a relaxation (`v.total` is S), with dF/dp_i written into grad[i] for the n rows; the
  /// view's arrays in host memory.
  using relax_fn = std::function<double(const relax_view<float>& v, std::span<double> grad)>;
  /// The objective's own greedy state for a block (`incremental_objective`), built on the host.
  using greedy_fn = std::function<held_greedy_state(const greedy_block<float>& b)>;

  std::string label = "external";  ///< the term's name in reports
  score_fn score;
  relax_fn relaxation;  ///< empty: no relaxation (the continuous learner cannot run this f)
  greedy_fn greedy;     ///< empty: the greedy baselines score S + i by evaluation

  /// @brief The term's name (`diversity_mix::names`).
  [[nodiscard]] const std::string& term_name() const { return label; }
  [[nodiscard]] bool has_relaxation() const { return static_cast<bool>(relaxation); }

  /// The empty set scores 0, without a call (a greedy run's gains are differences from it).
  template <class T>
    requires std::is_same_v<T, float> || half_precision<T>
  double operator()(const subset_view<T>& s) const {
    double out = 0.0;
    if (s.subset.size == 0) return out;
    if constexpr (half_precision<T>) {
      refuse_16_bit();
    } else {
      const batch_view<T> one{s.embeddings, s.inv_norms, s.sq_norms,
                              matrix_view<const index_t>{s.subset.data, 1, s.subset.size}, s.reference, s.threads};
      score(one, std::span<double>(&out, 1));
    }
    return out;
  }

  template <class T>
    requires std::is_same_v<T, float> || half_precision<T>
  void evaluate_batch(const batch_view<T>& b, std::span<double> out) const {
    if (b.subsets.cols == 0) {
      std::fill(out.begin(), out.end(), 0.0);
      return;
    }
    if constexpr (half_precision<T>) {
      refuse_16_bit();
    } else {
      score(b, out);
    }
  }

  /// @brief The relaxation through an executor: called with the arrays as they are in host
  /// memory; copied across for a device's executor.
  template <class Exec, class T>
    requires std::is_same_v<T, float> || half_precision<T>
  double relax(Exec& exec, const relax_view<T>& v, double* grad) const {
    DATAMASK_EXPECTS(has_relaxation(), label, "has no relaxation, so the continuous learner cannot run it");
    const auto n = static_cast<std::size_t>(v.embeddings.rows);
    if constexpr (half_precision<T>) {
      refuse_16_bit();
      return 0.0;
    } else if constexpr (std::is_same_v<std::remove_cvref_t<Exec>, host_executor>) {
      return relaxation(v, std::span<double>(grad, n));
    } else {
      std::vector<float> rows(n * static_cast<std::size_t>(v.embeddings.cols));
      exec.download(v.embeddings.data, std::span<float>(rows));
      std::vector<double> p(n), inv(n), sq(n), g(n);
      exec.download(v.p.data(), std::span<double>(p));
      if (v.inv_norms != nullptr) exec.download(v.inv_norms, std::span<double>(inv));
      if (v.sq_norms != nullptr) exec.download(v.sq_norms, std::span<double>(sq));
      const relax_view<float> host{
          make_matrix_view(static_cast<const float*>(rows.data()), v.embeddings.rows, v.embeddings.cols),
          v.inv_norms != nullptr ? inv.data() : nullptr, v.sq_norms != nullptr ? sq.data() : nullptr, p, v.total,
          v.threads};
      const double value = relaxation(host, g);
      const double* up = exec.upload(std::span<const double>(g));
      exec.for_each(v.embeddings.rows, detail::external_impl::copy_values{up, grad});
      return value;
    }
  }

 private:
  [[noreturn]] void refuse_16_bit() const {
    throw invalid_input(label.empty() ? std::string("objective") : label,
                        "reads float32 rows, and this block holds float16 or bfloat16 ones; give float32 embeddings "
                        "to a run with an objective given at run time");
  }
};

}  // namespace datamask
