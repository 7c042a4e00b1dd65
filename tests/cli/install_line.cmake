# SPDX-License-Identifier: Apache-2.0
#
# cmake -P script behind the `cli.install_line` ctest: docs/cpp.md's install line, run from a clean
# build folder. An install before the build must fail before copying anything, naming the build
# step; after the build the same install puts the program and the headers under the prefix.
# Inputs (-D): SOURCE_DIR, WORK_DIR, GENERATOR, MAKE_PROGRAM, CXX_COMPILER.
cmake_minimum_required(VERSION 3.25)
set(build "${WORK_DIR}/build")
set(prefix "${WORK_DIR}/prefix")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(step what expect_ok)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(step_output "${out}${err}" PARENT_SCOPE)
  if(expect_ok AND NOT rc EQUAL 0)
    message(FATAL_ERROR "install_line: ${what} failed (${rc}):\n${out}${err}")
  elseif(NOT expect_ok AND rc EQUAL 0)
    message(FATAL_ERROR "install_line: ${what} succeeded, expected a failure:\n${out}${err}")
  endif()
endfunction()

# docs/cpp.md: cmake -S . -B build && cmake --build build --target datamask-select
#             && cmake --install build --prefix P
# Built without optimisation: the line is under test, not the code, and at -O3 this build of the
# program took 147 s of CI's ctest, the longest test.
step("configure" TRUE "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
     "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
     "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG")
step("install before the build" FALSE "${CMAKE_COMMAND}" --install "${build}" --prefix "${prefix}")
if(NOT step_output MATCHES "datamask-select is not built" OR NOT step_output MATCHES "cmake --build")
  message(FATAL_ERROR "install_line: the refused install does not say what to build:\n${step_output}")
endif()
file(GLOB_RECURSE copied "${prefix}/*")
if(copied)
  message(FATAL_ERROR "install_line: a refused install copied files: ${copied}")
endif()
step("build" TRUE "${CMAKE_COMMAND}" --build "${build}" --target datamask-select)
step("install" TRUE "${CMAKE_COMMAND}" --install "${build}" --prefix "${prefix}")
foreach(f IN ITEMS bin/datamask-select include/datamask/datamask.hpp include/datamask/run/pipeline.hpp
                   include/datamask/core/synthetic.hpp include/datamask/run/report.hpp)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "install_line: ${prefix}/${f} was not installed")
  endif()
endforeach()
step("the installed program" TRUE "${prefix}/bin/datamask-select" --help)
file(REMOVE_RECURSE "${WORK_DIR}")
