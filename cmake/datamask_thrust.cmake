# SPDX-License-Identifier: Apache-2.0
#
# The Thrust backend's targets. Included from the top CMakeLists.txt after the core target.
#
#   datamask::thrust_omp   INTERFACE: datamask::datamask + Thrust/CCCL headers with
#                          THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP + OpenMP. Plain g++ or
#                          clang; no CUDA compiler, no GPU. Made when Thrust and OpenMP are found.
#   datamask::cuda         INTERFACE: datamask::datamask + Thrust/CCCL for nvcc (CUDA device
#                          system). Only with -DDATAMASK_ENABLE_CUDA=ON. Consumers compile their
#                          .cu files with -std=c++20 themselves (CMake 3.25 has no cuda_std_20 for
#                          nvcc 13, and a standard is never exported from here).
#
# Thrust's config makes Thrust::Thrust an ALIAS of a target of the consuming project, which an
# export cannot name; the installed targets link datamask::thrust_headers instead, an IMPORTED
# target the package config creates around the consumer's own Thrust::Thrust.
#
# Thrust comes from the CUDA toolkit (find_package(Thrust CONFIG), lib64/cmake/thrust); CUDA is
# never needed for datamask::datamask. Each target is installed into its own export set so that
# the package config loads it only when asked for as a component (install rules in
# datamask_install.cmake, which is included after this file so that the config can name Thrust_DIR).
option(DATAMASK_WITH_THRUST "Make datamask::thrust_omp when Thrust (CCCL) and OpenMP are found" ON)
option(DATAMASK_ENABLE_CUDA "Enable CUDA: make datamask::cuda and the CUDA tests and examples" OFF)

set(DATAMASK_HAS_THRUST OFF)
if(DATAMASK_WITH_THRUST OR DATAMASK_ENABLE_CUDA)
  find_package(Thrust CONFIG QUIET HINTS "$ENV{CUDA_PATH}/lib64/cmake/thrust"
               "/usr/local/cuda/lib64/cmake/thrust")
  if(Thrust_FOUND)
    set(DATAMASK_HAS_THRUST ON)
    message(STATUS "datamask: Thrust ${THRUST_VERSION} found at ${Thrust_DIR}")
    # Thrust's config deliberately makes its include directories non-SYSTEM; our private targets
    # build with -Wall -Wextra -Werror, which third-party headers need not pass.
    foreach(_t IN ITEMS Thrust::Thrust Thrust::libcudacxx)
      if(TARGET ${_t})
        get_target_property(_real ${_t} ALIASED_TARGET)
        if(_real)
          set_property(TARGET ${_real} PROPERTY SYSTEM ON)
        endif()
      endif()
    endforeach()
    if(TARGET Thrust::libcudacxx)
      get_target_property(_lcx Thrust::libcudacxx INTERFACE_LINK_LIBRARIES)
      foreach(_t IN LISTS _lcx)
        if(TARGET ${_t})
          get_target_property(_imported ${_t} IMPORTED)
          if(NOT _imported)
            set_property(TARGET ${_t} PROPERTY SYSTEM ON)
          endif()
        endif()
      endforeach()
    endif()
  else()
    message(STATUS "datamask: Thrust (CCCL) not found; no datamask::thrust_omp. Point Thrust_DIR "
                   "at <cuda>/lib64/cmake/thrust to build it.")
  endif()
endif()

set(DATAMASK_THRUST_OMP OFF)
if(DATAMASK_WITH_THRUST AND DATAMASK_HAS_THRUST AND DATAMASK_USES_OPENMP)
  set(DATAMASK_THRUST_OMP ON)
  add_library(datamask_thrust_omp INTERFACE)
  add_library(datamask::thrust_omp ALIAS datamask_thrust_omp)
  set_target_properties(datamask_thrust_omp PROPERTIES EXPORT_NAME thrust_omp)
  target_link_libraries(datamask_thrust_omp INTERFACE datamask
                        $<BUILD_INTERFACE:Thrust::Thrust> $<INSTALL_INTERFACE:datamask::thrust_headers>
                        OpenMP::OpenMP_CXX)
  target_compile_definitions(datamask_thrust_omp INTERFACE
                             THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP)
elseif(DATAMASK_WITH_THRUST AND DATAMASK_HAS_THRUST)
  message(STATUS "datamask: OpenMP not found; no datamask::thrust_omp")
endif()

if(DATAMASK_ENABLE_CUDA)
  if(NOT DATAMASK_HAS_THRUST)
    message(FATAL_ERROR "datamask: DATAMASK_ENABLE_CUDA is ON but Thrust (CCCL) was not found; "
                        "set Thrust_DIR to <cuda>/lib64/cmake/thrust")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  add_library(datamask_cuda INTERFACE)
  add_library(datamask::cuda ALIAS datamask_cuda)
  set_target_properties(datamask_cuda PROPERTIES EXPORT_NAME cuda)
  target_link_libraries(datamask_cuda INTERFACE datamask
                        $<BUILD_INTERFACE:Thrust::Thrust> $<INSTALL_INTERFACE:datamask::thrust_headers>)
  # Eigen's and the library's constexpr host helpers are used from __host__ __device__ code.
  target_compile_options(datamask_cuda INTERFACE
                         $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
  # OpenMP::OpenMP_CXX gives its flag to C++ sources only: without it nvcc's host compiler sees no
  # `#pragma omp`, and a CUDA translation unit's host work (the final evaluation, the polish, the
  # tracked read-outs) ran on one thread (seen on an H200: evaluation 1.3 s against the CPU
  # program's 0.2 s on the same 16 cores).
  # The flags are the C++ compiler's, so they are given only where nvcc's host compiler takes
  # GCC's spelling (g++, the default host compiler on Linux, or clang++ in GCC mode).
  if(DATAMASK_USES_OPENMP AND CMAKE_CXX_COMPILER_ID MATCHES "^(GNU|Clang)$")
    separate_arguments(_datamask_omp_flags NATIVE_COMMAND "${OpenMP_CXX_FLAGS}")
    foreach(_flag IN LISTS _datamask_omp_flags)
      target_compile_options(datamask_cuda INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${_flag}>)
    endforeach()
  elseif(DATAMASK_USES_OPENMP)
    message(STATUS "datamask: OpenMP's flags not passed to nvcc's host compiler (C++ compiler "
                   "${CMAKE_CXX_COMPILER_ID}); the host code of CUDA sources runs on one thread")
  endif()
endif()
