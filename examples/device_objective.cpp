// SPDX-License-Identifier: Apache-2.0
//
// A user diversity objective that runs on the device, with the Thrust backend.
//
// `spread` scores a subset by the mean squared distance of its rows to their centroid (larger is
// more diverse). It models `datamask::device_objective`: a trivially copyable functor with a
// `DATAMASK_HOST_DEVICE` call operator and `device_callable = true`, so the Thrust backend runs
// it inside device code, one thread per rollout. The same file builds
//   - with g++ against datamask::thrust_omp (Thrust on OpenMP threads): device_objective_omp;
//   - with nvcc against datamask::cuda (device_objective.cu includes this file): runs on the GPU.
#include <datamask/datamask.hpp>
#include <datamask/core/wait_policy.hpp>
#include <datamask/exec/backend/thrust.hpp>
#include <datamask/core/device_objective.hpp>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#include <cuda_runtime_api.h>
#endif

/// Mean squared distance of the subset's rows to their centroid.
struct spread {
  static constexpr std::string_view name = "spread";
  static constexpr bool device_callable = true;

  template <class T>
  DATAMASK_HOST_DEVICE double operator()(const datamask::subset_view<T>& s) const {
    const datamask::index_t k = s.subset.size;
    if (k == 0) return 0.0;
    double total = 0.0;
    for (datamask::index_t j = 0; j < s.embeddings.cols; ++j) {
      double mean = 0.0;
      for (datamask::index_t r : s.subset) mean += static_cast<double>(s.embeddings(r, j));
      mean /= static_cast<double>(k);
      for (datamask::index_t r : s.subset) {
        const double c = static_cast<double>(s.embeddings(r, j)) - mean;
        total += c * c;
      }
    }
    return total / static_cast<double>(k);
  }
};
static_assert(datamask::device_objective<spread, float>,
              "spread must be trivially copyable, DATAMASK_HOST_DEVICE and device_callable");

int main(int, char** argv) {
  datamask::passive_wait_unless_set(argv);  // first: see datamask/core/wait_policy.hpp
#if defined(__CUDACC__)
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("device_objective: no CUDA device present; not run\n");
    return 77;
  }
#endif
  // 20 000 items in 16 clusters, 32 dimensions; quality favours a few clusters.
  const datamask::index_t n = 20000;
  const datamask::index_t d = 32;
  std::mt19937_64 gen(1);
  std::normal_distribution<double> normal;
  std::vector<float> centers(16 * d);
  for (float& c : centers) c = static_cast<float>(4.0 * normal(gen));
  std::vector<float> x(static_cast<std::size_t>(n * d));
  std::vector<double> q(static_cast<std::size_t>(n));
  for (datamask::index_t i = 0; i < n; ++i) {
    const auto c = static_cast<datamask::index_t>(gen() % 16);
    for (datamask::index_t j = 0; j < d; ++j) x[i * d + j] = centers[c * d + j] + static_cast<float>(normal(gen));
    q[i] = (c < 4 ? 1.0 : 0.0) + 0.5 * normal(gen);
  }
  datamask::problem<float> p;
  p.embeddings = datamask::make_matrix_view(x.data(), n, d);
  p.quality.push_back(datamask::quality_column{q, 1.0});

  datamask::settings o;
  o.ratio = 0.05;
  o.lambda = 0.5;
  o.steps = 100;
  o.rollouts = 64;

  // The backend is a template argument: the same call runs on the CPU backend for comparison.
  const auto gpu = datamask::learner<datamask::thrust_backend>(o).select(p, spread{});
  const auto cpu = datamask::learner<datamask::eigen_backend>(o).select(p, spread{});
  std::printf("backend %s: selected %zu of %lld items in %lld steps; quality %.4f, spread %.4f, f %.4f\n",
              std::string(datamask::thrust_backend::name).c_str(), gpu.rows.size(),
              static_cast<long long>(n), static_cast<long long>(gpu.steps_run), gpu.terms[0].raw,
              gpu.terms[1].raw, gpu.objective);
  std::printf("backend eigen: f %.4f; same selection: %s\n", cpu.objective,
              cpu.ids == gpu.ids ? "yes" : "no");
  return cpu.ids == gpu.ids ? 0 : 1;
}
