// SPDX-License-Identifier: Apache-2.0
// A user objective that opts in to the continuous learner by providing a relaxation.
//
// The metric: F(U) = -||mean_{i in U} e_i||^2, larger when the selection's mean embedding sits
// near the origin (a balanced set). Its relaxation on inclusion probabilities p, with the
// selection size S fixed,
//   F(p) = -||X^T p||^2 / S^2,   dF/dp_i = -2 e_i . (X^T p) / S^2,
// equals F(U) at every p in {0, 1}^n with sum p = S: that is all `relaxable_objective` asks,
// with a value and gradient that do not depend on the thread count (here: serial sums).
#include <cstdio>
#include <random>
#include <span>
#include <vector>

#include <datamask/continuous.hpp>
#include <datamask/datamask.hpp>
#include <datamask/wait_policy.hpp>

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

  /// The relaxation: F(p), and dF/dp written for every row.
  template <class T>
  double relax(const dm::relax_view<T>& v, std::span<double> grad) const {
    const dm::index_t n = v.embeddings.rows;
    const dm::index_t d = v.embeddings.cols;
    std::vector<double> m(static_cast<std::size_t>(d), 0.0);
    for (dm::index_t i = 0; i < n; ++i) {
      for (dm::index_t j = 0; j < d; ++j) m[j] += v.p[i] * v.embeddings(i, j);
    }
    const double s2 = v.total * v.total;
    for (dm::index_t i = 0; i < n; ++i) {
      double dot = 0.0;
      for (dm::index_t j = 0; j < d; ++j) dot += v.embeddings(i, j) * m[j];
      grad[i] = -2.0 * dot / s2;
    }
    double sq = 0.0;
    for (double x : m) sq += x * x;
    return -sq / s2;
  }
};
static_assert(dm::relaxable_objective<centred_mean, float>);

int main(int, char** argv) {
  datamask::passive_wait_unless_set(argv);  // first: see datamask/wait_policy.hpp
  const dm::index_t n = 2000;
  const dm::index_t d = 16;
  std::mt19937_64 g(1);
  std::normal_distribution<float> nd(0.0F, 1.0F);
  std::vector<float> x(static_cast<std::size_t>(n * d));
  for (float& v : x) v = nd(g) + 0.3F;
  std::vector<double> q(static_cast<std::size_t>(n));
  for (double& v : q) v = nd(g);
  dm::problem<float> p;
  p.embeddings = dm::make_matrix_view(x.data(), n, d);
  p.quality.push_back({std::span<const double>(q), 1.0});

  // Together with pairwise similarity, each term scaled and weighted as in the learner's f.
  const auto diversity = dm::mix(dm::weighted{centred_mean{}, 1.0}, dm::weighted{dm::pairwise_similarity{}, 1.0});
  dm::continuous_options o;
  o.common.ratio = 0.1;
  o.common.lambda = 0.5;
  o.ascent.iterations = 100;
  const auto res = dm::continuous_learner(o).select(p, diversity);
  std::printf("selected %zu of %lld items, f = %.4f\n", res.rows.size(), static_cast<long long>(n),
              res.objective);
  for (const auto& t : res.terms) {
    std::printf("  %-13s raw %9.4f  scale %.4g  weight %.2f\n", t.name.c_str(), t.raw, t.scale, t.weight);
  }
  return 0;
}
