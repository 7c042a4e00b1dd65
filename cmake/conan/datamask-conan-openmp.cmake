# SPDX-License-Identifier: Apache-2.0
#
# Conan build module for with_openmp=True (see conanfile.py): link OpenMP when the consumer's
# compiler has it. The headers guard every `#pragma omp` with _OPENMP, so without it they
# still work, single-threaded.
if(NOT TARGET OpenMP::OpenMP_CXX)
  find_package(OpenMP QUIET COMPONENTS CXX)
endif()
if(TARGET OpenMP::OpenMP_CXX)
  target_link_libraries(datamask::datamask INTERFACE OpenMP::OpenMP_CXX)
endif()
