// SPDX-License-Identifier: Apache-2.0
//
// The smallest program a user of the installed package writes. It must print
// "datamask <version>" (the install test checks it) and exit 0.
#include <datamask/datamask.hpp>

#include <cstdio>
#include <vector>

int main() {
  std::printf("datamask %s\n", datamask::version_string);

  // ---- CONSUMER-SELECTION ----
  // Six items on two lines in the plane; quality favours the first line. With lambda = 1 the
  // selection is exactly the top 2 by quality; with diversity it must still pick 2 distinct ids.
  const std::vector<float> x = {1, 0, 0.9f, 0.1f, 0.8f, 0.2f, 0, 1, 0.1f, 0.9f, 0.2f, 0.8f};
  const std::vector<double> q = {0.9, 0.8, 0.7, 0.3, 0.2, 0.1};
  const datamask::problem<float> p{datamask::make_matrix_view(x.data(), 6, 2),
                                   {datamask::quality_column{q, 1.0}}, {}};
  datamask::settings o;
  o.count = 2;
  o.lambda = 1.0;
  const auto top = datamask::select(p, datamask::pairwise_similarity{}, o);
  if (top.ids.size() != 2 || top.ids[0] != 0 || top.ids[1] != 1) return 1;
  o.lambda = 0.5;
  const auto joint = datamask::select(p, datamask::pairwise_similarity{}, o);
  if (joint.ids.size() != 2 || joint.ids[0] == joint.ids[1]) return 2;
  std::printf("selected %llu and %llu\n", static_cast<unsigned long long>(joint.ids[0]),
              static_cast<unsigned long long>(joint.ids[1]));
  // ---- end CONSUMER-SELECTION ----

  return 0;
}
