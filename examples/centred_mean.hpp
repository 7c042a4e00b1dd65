// SPDX-License-Identifier: Apache-2.0
#pragma once
// A user objective that opts in to the continuous learner by providing a relaxation (used by
// examples/relaxed_metric.cpp, by examples/own_program.cpp, datamask-select with it registered,
// and by the tests that run it on the CPU and Thrust backends).
//
// The metric: F(U) = -||mean_{i in U} e_i||^2, larger when the selection's mean embedding sits
// near the origin (a balanced set). Its relaxation on inclusion probabilities p, with the
// selection size S fixed,
//   F(p) = -||X^T p||^2 / S^2,   dF/dp_i = -2 e_i . (X^T p) / S^2,
// equals F(U) at every p in {0, 1}^n with sum p = S: that is all `relaxable_objective` asks,
// with a value and gradient that do not depend on the thread count. The relaxation is written
// with the executor's passes only, so the same member runs on the CPU backend and on a GPU.

#include <string_view>
#include <vector>

#include <datamask/core/concepts.hpp>
#include <datamask/exec/ops.hpp>

namespace dm = datamask;

struct centred_mean {
  static constexpr std::string_view name = "centred_mean";

  /// The objective on one subset (what the greedy baselines and the final evaluation use).
  template <class T>
  double operator()(const dm::subset_view<T>& s) const {
    if (s.subset.size == 0) return 0.0;
    std::vector<double> m(static_cast<std::size_t>(s.embeddings.cols), 0.0);
    for (dm::index_t i : s.subset) {
      for (dm::index_t j = 0; j < s.embeddings.cols; ++j) m[j] += s.embeddings(i, j);
    }
    double sq = 0.0;
    for (double v : m) sq += v * v;
    return -sq / (static_cast<double>(s.subset.size) * static_cast<double>(s.subset.size));
  }

  /// The relaxation, written once against the executor the learner runs on (the host's threads
  /// on the CPU backend, the GPU on the Thrust backend under CUDA): m = X^T p and grad_i = e_i . m
  /// are the executor's two products, the rest one pass and one sum. Every sum goes through the
  /// executor (fixed order), so the value and gradient do not depend on the thread count.
  template <class Exec, class T>
  double relax(Exec& exec, const dm::relax_view<T>& v, double* grad) const {
    const dm::index_t d = v.embeddings.cols;
    auto scope = exec.scope();  // scratch freed on return
    double* m = scope.template scratch<double>(d);
    scope.column_sums(v.embeddings, v.p.data(), m);  // m = X^T p
    scope.row_dots(v.embeddings, m, grad);           // grad_i = e_i . m
    const double s2 = v.total * v.total;
    scope.for_each(v.embeddings.rows, dm::ops::scale{grad, -2.0 / s2});
    return -scope.reduce(d, dm::ops::square{m}, dm::ops::plus{}, 0.0) / s2;
  }
};
static_assert(dm::relaxable_objective<centred_mean, float>);

