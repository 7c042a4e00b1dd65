// SPDX-License-Identifier: Apache-2.0
// Runner of the CUDA tests: without a CUDA device there is nothing to run them on, so it reports
// "not run" to ctest (exit code 77, the test's SKIP_RETURN_CODE) instead of failing.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

int datamask_cuda_device_count();  // test_cuda_backend.cu

int main(int argc, char* argv[]) {
  const int devices = datamask_cuda_device_count();
  if (devices <= 0) {
    std::printf("datamask_cuda_tests: no CUDA device present; the CUDA tests were not run\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
