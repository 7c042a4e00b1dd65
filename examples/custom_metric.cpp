// SPDX-License-Identifier: Apache-2.0
// Plugging in your own metrics: a per-document quality functor and a set-level diversity
// functor, mixed with a built-in objective.
#include <datamask/datamask.hpp>
#include <datamask/core/wait_policy.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "corpus.hpp"

// Quality: any per-document score. Here: prefer documents near a "reference style" direction,
// penalise very long ones (the length stands in for whatever your pipeline knows).
struct style_quality {
  const example::corpus* c;
  const std::vector<double>* length;
  double operator()(datamask::index_t row) const {
    double dot = 0.0;
    for (datamask::index_t a = 0; a < c->d; ++a) dot += c->embeddings[row * c->d + a];
    return dot / std::sqrt(static_cast<double>(c->d)) - 0.1 * std::log((*length)[row]);
  }
};
static_assert(datamask::quality_metric<style_quality>);

// Diversity: the spread of the selection along each embedding dimension (mean per-dimension
// standard deviation). Order-independent, larger is more diverse, thread-safe: it reads only.
struct spread {
  static constexpr std::string_view name = "spread";
  template <class T>
  double operator()(const datamask::subset_view<T>& s) const {
    const auto d = s.embeddings.cols;
    const auto k = static_cast<double>(s.subset.size);
    if (k < 2) return 0.0;
    double total = 0.0;
    for (datamask::index_t a = 0; a < d; ++a) {
      double m = 0.0, m2 = 0.0;
      for (datamask::index_t i : s.subset) {
        const double v = s.embeddings(i, a);
        m += v;
        m2 += v * v;
      }
      m /= k;
      total += std::sqrt(std::max(0.0, m2 / k - m * m));
    }
    return total / static_cast<double>(d);
  }
};
static_assert(datamask::diversity_objective<spread, float>);

int main(int, char** argv) {
  datamask::passive_wait_unless_set(argv);  // first: see datamask/core/wait_policy.hpp
  using namespace datamask;
  const example::corpus c = example::make_corpus(5000, 32, 30, 11);
  std::vector<double> length(static_cast<std::size_t>(c.n));
  for (index_t i = 0; i < c.n; ++i) length[i] = 200.0 + 50.0 * static_cast<double>(i % 17);

  // A quality functor becomes a score column once, when the run starts.
  const style_quality q{&c, &length};
  std::vector<double> scores(static_cast<std::size_t>(c.n));
  for (index_t i = 0; i < c.n; ++i) scores[i] = q(i);

  const problem<float> block{make_matrix_view(c.embeddings.data(), c.n, c.d),
                             {quality_column{scores, 1.0}, quality_column{c.quality, 0.5}},
                             {}};
  const auto diversity = mix(weighted{spread{}, 1.0}, weighted{pairwise_similarity{}, 0.5});
  settings opt;
  opt.ratio = 0.05;
  opt.lambda = 0.4;
  opt.steps = 300;
  optimizer_hooks progress;
  progress.on_step = [](const step_record& s) {
    if (s.step % 100 == 0) std::printf("step %4lld  mean reward %8.4f\n", static_cast<long long>(s.step), s.reward_mean);
  };
  // `spread` is a black box (no relaxation, no greedy state), so auto runs the policy gradient,
  // which needs only its values on rollouts (a greedy would evaluate f for every candidate).
  const selection_result r = select(block, diversity, opt, progress);
  std::printf("selected %zu of %lld; f = %.4f\n", r.ids.size(), static_cast<long long>(c.n), r.objective);
  for (const auto& t : r.terms) {
    std::printf("  %-9s weight %.2f  scale %.4g  raw %.5f\n", t.name.c_str(), t.weight, t.scale, t.raw);
  }
  return 0;
}
