// SPDX-License-Identifier: Apache-2.0
//
// The library's continuous learner on datamask-select's --demo corpus, with the program's
// defaults (ratio 0.1, lambda 0.5, pairwise similarity, calibrated scales, seed 0): prints the
// selected ids, one per line, in selection order. cli_test.py's `continuous` scenario checks that
// `datamask-select --demo --optimizer continuous --iterations N` selects exactly these ids, so the
// program adds nothing to the library's selection (same S, scales, kept rows and read-out order).
//
// Usage: datamask_continuous_reference ITERATIONS [disf]

#include <cstdio>
#include <cstdlib>
#include <string>

#include <datamask/datamask.hpp>
#include <datamask/core/synthetic.hpp>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ITERATIONS [disf]\n", argv[0]);
    return 2;
  }
  const datamask::synthetic_corpus g = datamask::make_synthetic_corpus(datamask::synthetic_options{});
  const datamask::problem<float> p = g.view();
  datamask::continuous_options o;
  o.common.count = static_cast<datamask::index_t>(std::llround(0.1 * static_cast<double>(g.n)));
  o.common.evaluate_selection = false;
  o.ascent.iterations = std::atoll(argv[1]);
  const bool disf = argc > 2 && std::string(argv[2]) == "disf";
  const datamask::basic_continuous_learner<datamask::eigen_backend> learner(o);
  const auto res = disf ? learner.select(p, datamask::disf{}) : learner.select(p, datamask::pairwise_similarity{});
  for (const auto id : res.ids) std::printf("%lld\n", static_cast<long long>(id));
  return 0;
}
