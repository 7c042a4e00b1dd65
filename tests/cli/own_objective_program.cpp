// SPDX-License-Identifier: Apache-2.0
// datamask-select with two objectives of a user's own (dmfront::select_main), both pairwise
// similarity written from its definition in double (docs/method.md, section 6), for own_program_test.py,
// which compares their selections with the built-in pairwise objective's:
// - "replica": scores a batch in one call (evaluate_batch) and has a relaxation (relax);
// - "replica-plain": scores one subset per call and has no relaxation;
// and the library's own type registered as a user's would be, "pairwise-registered", whose cost
// against the built-in term benchmarks/registered_objective.py measures.

#include <cmath>
#include <span>
#include <vector>

#include <datamask/frontend/program.hpp>

namespace dm = datamask;
using dm::index_t;

namespace {

/// -(1 / (k (k - 1))) sum_{i != j in U} cos(e_i, e_j), in double.
struct replica_plain {
  template <class T>
  double operator()(const dm::subset_view<T>& s) const {
    const index_t k = s.subset.size, d = s.embeddings.cols;
    if (k < 2) return 0.0;
    std::vector<double> sum(static_cast<std::size_t>(d), 0.0);
    double self = 0.0;
    for (index_t i : s.subset) {
      for (index_t j = 0; j < d; ++j) {
        const double u = s.embeddings(i, j) * s.inv_norms[i];
        sum[static_cast<std::size_t>(j)] += u;
        self += u * u;
      }
    }
    double sq = 0.0;
    for (double v : sum) sq += v * v;
    return -(sq - self) / (static_cast<double>(k) * static_cast<double>(k - 1));
  }
};

struct replica : replica_plain {
  template <class T>
  void evaluate_batch(const dm::batch_view<T>& b, std::span<double> out) const {
    for (index_t g = 0; g < b.subsets.rows; ++g) {
      const dm::index_view rows(b.subsets.row(g), b.subsets.cols);
      out[static_cast<std::size_t>(g)] = (*this)(dm::subset_view<T>{b.embeddings, b.inv_norms, b.sq_norms, rows, b.reference});
    }
  }

  /// F(p) = -(||sum_i p_i u_i||^2 - sum_i p_i^2 ||u_i||^2) / (S (S - 1)) and its gradient.
  template <class Exec, class T>
  double relax(Exec&, const dm::relax_view<T>& v, double* grad) const {
    const index_t n = v.embeddings.rows, d = v.embeddings.cols;
    std::vector<double> sum(static_cast<std::size_t>(d), 0.0);
    double self = 0.0;
    for (index_t i = 0; i < n; ++i) {
      const double p = v.p[static_cast<std::size_t>(i)];
      for (index_t j = 0; j < d; ++j) {
        const double u = v.embeddings(i, j) * v.inv_norms[i];
        sum[static_cast<std::size_t>(j)] += p * u;
        self += p * p * u * u;
      }
    }
    double sq = 0.0;
    for (double s : sum) sq += s * s;
    const double norm = v.total * (v.total - 1.0);
    for (index_t i = 0; i < n; ++i) {
      double dot = 0.0, uu = 0.0;
      for (index_t j = 0; j < d; ++j) {
        const double u = v.embeddings(i, j) * v.inv_norms[i];
        dot += u * sum[static_cast<std::size_t>(j)];
        uu += u * u;
      }
      grad[i] = -(2.0 * dot - 2.0 * v.p[static_cast<std::size_t>(i)] * uu) / norm;
    }
    return -(sq - self) / norm;
  }
};

static_assert(dm::batched_diversity_objective<replica, float> && dm::relaxable_objective<replica, float>);
static_assert(!dm::batched_diversity_objective<replica_plain, float> && !dm::relaxable_objective<replica_plain, float>);

}  // namespace

int main(int argc, char** argv) {
  dmfront::objective_registry objectives;
  objectives.add("replica", replica{}, "pairwise similarity in double, batched, with its relaxation");
  objectives.add("replica-plain", replica_plain{}, "pairwise similarity in double, one subset per call");
  objectives.add("pairwise-registered", dm::pairwise_similarity{}, "the built-in type, registered");
  return dmfront::select_main(argc, argv, objectives);
}
