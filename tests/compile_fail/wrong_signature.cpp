// SPDX-License-Identifier: Apache-2.0
// Must NOT compile: a diversity functor whose call operator takes an int is not a
// datamask::diversity_objective, and datamask::select must say so. Compiled with
// -DDATAMASK_COMPILE_FAIL_CONTROL it has the right signature and must compile (the control
// proves the failure above comes from the signature, not from a broken file or include path).
#include <datamask/datamask.hpp>

#include <vector>

struct my_objective {
#ifdef DATAMASK_COMPILE_FAIL_CONTROL
  double operator()(const datamask::subset_view<float>& s) const { return static_cast<double>(s.subset.size); }
#else
  double operator()(int k) const { return static_cast<double>(k); }
#endif
};

int main() {
  std::vector<float> x(40, 1.0f);
  const datamask::problem<float> p{datamask::make_matrix_view(x.data(), 10, 4), {}, {}};
  datamask::settings opt;
  opt.lambda = 0.0;
  const auto res = datamask::select(p, my_objective{}, opt);
  return res.ids.empty() ? 1 : 0;
}
