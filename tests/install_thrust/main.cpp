// SPDX-License-Identifier: Apache-2.0
//
// The installed Thrust-on-OpenMP component at work: quality-only selection on the Thrust backend
// must return the two best rows. Prints "datamask <version>" for the install test.
#include <datamask/datamask.hpp>
#include <datamask/exec/backend/thrust.hpp>

#include <cstdio>
#include <vector>

int main() {
  std::printf("datamask %s (%s)\n", datamask::version_string,
              std::string(datamask::thrust_backend::name).c_str());
  const std::vector<float> x = {1, 0, 0, 1, 1, 1, -1, 0, 0, -1, 2, 1};
  const std::vector<double> q = {0.1, 0.9, 0.3, 0.8, 0.2, 0.0};
  datamask::problem<float> p;
  p.embeddings = datamask::make_matrix_view(x.data(), 6, 2);
  p.quality.push_back(datamask::quality_column{q, 1.0});
  datamask::settings o;
  o.count = 2;
  o.lambda = 1.0;
  const auto res = datamask::learner<datamask::thrust_backend>(o).select(p, datamask::pairwise_similarity{});
  if (res.rows.size() != 2 || res.rows[0] != 1 || res.rows[1] != 3) {
    std::printf("unexpected selection\n");
    return 1;
  }
  return 0;
}
