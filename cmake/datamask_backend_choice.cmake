# SPDX-License-Identifier: Apache-2.0
#
# The backend of the front ends' blocks (frontend/src/block_backend.cpp), resolved
# before datamask_thrust.cmake so that a CUDA choice enables CUDA there (DATAMASK_ENABLE_CUDA
# is then set as a normal variable, which its option() keeps: policy CMP0077).
#
#   DATAMASK_PYTHON_BACKEND   auto | eigen | cuda | thrust-omp  (the Python module)
#       auto: cuda when a GPU answers `nvidia-smi -L` and CMake finds a CUDA compiler, else eigen.
#       Resolved into DATAMASK_PYTHON_BACKEND_RESOLVED.
#   DATAMASK_SELECT_CUDA      ON: datamask-select's blocks on the GPU (nvcc).

# Sets `out` to TRUE when this machine can build and run the CUDA backend: a GPU is listed by
# nvidia-smi (checked first: cheap, and no compiler probe runs on a machine without a GPU) and
# a CUDA compiler works.
function(datamask_cuda_usable out)
  set(${out} FALSE PARENT_SCOPE)
  find_program(DATAMASK_NVIDIA_SMI nvidia-smi)
  if(NOT DATAMASK_NVIDIA_SMI)
    set(DATAMASK_CUDA_UNUSABLE_REASON "nvidia-smi not found" PARENT_SCOPE)
    return()
  endif()
  execute_process(COMMAND "${DATAMASK_NVIDIA_SMI}" -L RESULT_VARIABLE rc OUTPUT_VARIABLE gpus ERROR_QUIET)
  if(NOT rc EQUAL 0 OR NOT gpus MATCHES "GPU [0-9]")
    set(DATAMASK_CUDA_UNUSABLE_REASON "nvidia-smi -L lists no GPU" PARENT_SCOPE)
    return()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    set(DATAMASK_CUDA_UNUSABLE_REASON "a GPU is present but no CUDA compiler (nvcc) was found" PARENT_SCOPE)
    return()
  endif()
  set(${out} TRUE PARENT_SCOPE)
endfunction()

set(DATAMASK_PYTHON_BACKEND_RESOLVED eigen)
if(DATAMASK_BUILD_PYTHON)
  if(NOT DATAMASK_PYTHON_BACKEND MATCHES "^(auto|eigen|cuda|thrust-omp)$")
    message(FATAL_ERROR "datamask: DATAMASK_PYTHON_BACKEND must be auto, eigen, cuda or thrust-omp, "
                        "found '${DATAMASK_PYTHON_BACKEND}'")
  endif()
  if(DATAMASK_PYTHON_BACKEND STREQUAL "auto")
    datamask_cuda_usable(_datamask_cuda_usable)
    if(_datamask_cuda_usable)
      set(DATAMASK_PYTHON_BACKEND_RESOLVED cuda)
      message(STATUS "datamask: the Python module runs on the GPU (auto: a GPU and nvcc were found)")
    else()
      message(STATUS "datamask: the Python module runs on the CPU (auto: ${DATAMASK_CUDA_UNUSABLE_REASON}; "
                     "-DDATAMASK_PYTHON_BACKEND=cuda builds for CUDA anyway)")
    endif()
  else()
    set(DATAMASK_PYTHON_BACKEND_RESOLVED ${DATAMASK_PYTHON_BACKEND})
    message(STATUS "datamask: the Python module's backend: ${DATAMASK_PYTHON_BACKEND}")
  endif()
endif()

if(DATAMASK_SELECT_CUDA OR DATAMASK_PYTHON_BACKEND_RESOLVED STREQUAL "cuda")
  set(DATAMASK_ENABLE_CUDA ON)
endif()

# Links into `target` the blocks' translation unit (frontend/src/block_backend.cpp)
# built for `backend` (eigen, cuda or thrust-omp), as a static library of its own, made once per
# backend and shared by the front ends of this build: under CUDA nvcc compiles that file alone,
# never the front ends' other sources (nanobind, CLI11, MPI).
function(datamask_link_block_backend target backend)
  string(MAKE_C_IDENTIFIER "datamask_blocks_${backend}" lib)
  if(NOT TARGET ${lib})
    set(source "${PROJECT_SOURCE_DIR}/frontend/src/block_backend.cpp")
    add_library(${lib} STATIC "${source}")
    set_target_properties(${lib} PROPERTIES POSITION_INDEPENDENT_CODE ON)  # also linked into the Python module
    target_link_libraries(${lib} PUBLIC datamask::datamask PRIVATE $<BUILD_INTERFACE:datamask_warnings>)
    target_include_directories(${lib} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/frontend/include>
                                             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    if(backend STREQUAL "cuda")
      set_source_files_properties("${source}" TARGET_DIRECTORY ${lib} PROPERTIES LANGUAGE CUDA)
      target_link_libraries(${lib} PRIVATE datamask::cuda)
      # As tests/cuda: C++20 said to nvcc directly; 20012: Eigen's defaulted members' annotations.
      target_compile_options(${lib} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 -diag-suppress=20012>)
      set_target_properties(${lib} PROPERTIES CUDA_RESOLVE_DEVICE_SYMBOLS ON)
    elseif(backend STREQUAL "thrust-omp")
      if(NOT TARGET datamask::thrust_omp)
        message(FATAL_ERROR "datamask: the thrust-omp backend of ${target} needs Thrust (CCCL) and OpenMP, not found")
      endif()
      target_link_libraries(${lib} PRIVATE datamask::thrust_omp)
      target_compile_definitions(${lib} PRIVATE DATAMASK_BLOCK_BACKEND_THRUST)
    elseif(NOT backend STREQUAL "eigen")
      message(FATAL_ERROR "datamask: unknown block backend '${backend}' for ${target}")
    endif()
  endif()
  # The front-end layer calls the blocks' functions: it comes first on the link line.
  target_link_libraries(${target} PRIVATE datamask::frontend ${lib})
endfunction()
