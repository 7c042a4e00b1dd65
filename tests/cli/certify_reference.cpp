// SPDX-License-Identifier: Apache-2.0
//
// The library's certificate (datamask::certify) of a selection of datamask-select's --demo corpus
// (the demo's ids are its rows) for f = pairwise similarity + quality with the given lambda and
// scales: prints "bound random_mean certified_share", each with 17 digits. certify_test.py's
// `library` scenario checks that `datamask-select --demo --certify` reports the same numbers for
// its selection, so the program adds nothing to the library's certificate.
//
// Usage: datamask_certify_reference IDS.txt LAMBDA QUALITY_SCALE PAIRWISE_SCALE [STEPS]
// (STEPS: certify_settings::iterations, the budget --certify-steps gives; default 0)

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

#include <datamask/objectives/certify.hpp>
#include <datamask/datamask.hpp>
#include <datamask/core/synthetic.hpp>

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: %s IDS.txt LAMBDA QUALITY_SCALE PAIRWISE_SCALE [STEPS]\n", argv[0]);
    return 2;
  }
  const datamask::synthetic_corpus g = datamask::make_synthetic_corpus(datamask::synthetic_options{});
  const datamask::problem<float> p = g.view();
  std::vector<datamask::index_t> rows;
  std::ifstream in(argv[1]);
  for (long long id = 0; in >> id;) rows.push_back(static_cast<datamask::index_t>(id));
  datamask::objective_function<float, datamask::pairwise_similarity> f(p, datamask::pairwise_similarity{},
                                                                       std::atof(argv[2]));
  f.set_scales(std::vector<double>{std::atof(argv[3]), std::atof(argv[4])});
  datamask::certify_settings s;
  s.seed = 0;  // the run's seed (0) for block 0
  if (argc == 6) s.iterations = std::atoll(argv[5]);
  const datamask::certificate_report r = datamask::certify(f, rows, s);
  std::printf("%.17g %.17g %.17g\n", r.bound, r.random_mean, r.certified_share);
  return r.certified ? 0 : 1;
}
