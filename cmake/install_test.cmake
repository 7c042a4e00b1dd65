# SPDX-License-Identifier: Apache-2.0
#
# cmake -P script behind the `install_consumer` ctest (see datamask_install_test.cmake).
# Inputs (-D): DATAMASK_BUILD_DIR, DATAMASK_CONSUMER_DIR, DATAMASK_WORK_DIR, DATAMASK_CONFIG,
# DATAMASK_EXPECTED_VERSION, DATAMASK_GENERATOR, DATAMASK_MAKE_PROGRAM, DATAMASK_CXX_COMPILER;
# optionally DATAMASK_CONSUMER_ARGS (the consumer's arguments, one string split as a shell would)
# and DATAMASK_EXPECTED_OUTPUT (a regex its output must match; default "datamask <version>").
cmake_minimum_required(VERSION 3.25)

foreach(var IN ITEMS DATAMASK_BUILD_DIR DATAMASK_CONSUMER_DIR DATAMASK_WORK_DIR
                     DATAMASK_EXPECTED_VERSION DATAMASK_GENERATOR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "install_test.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT DATAMASK_CONFIG)
  set(DATAMASK_CONFIG Release)
endif()

set(stage "${DATAMASK_WORK_DIR}/stage")
set(prefix "${DATAMASK_WORK_DIR}/prefix")
set(consumer_build "${DATAMASK_WORK_DIR}/consumer-build")

function(run_step what)
  message(STATUS "install_consumer: ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer: ${what} failed (${rc})")
  endif()
endfunction()

file(REMOVE_RECURSE "${DATAMASK_WORK_DIR}")
file(MAKE_DIRECTORY "${DATAMASK_WORK_DIR}")

run_step("install into ${stage}"
  "${CMAKE_COMMAND}" --install "${DATAMASK_BUILD_DIR}" --prefix "${stage}"
                     --config "${DATAMASK_CONFIG}")

# A relocatable package works wherever the tree lands; move it to prove that.
file(RENAME "${stage}" "${prefix}")

# The exported target carries requirements only: no warning flags, no -march, no -O.
file(GLOB_RECURSE targets_files "${prefix}/*/datamaskTargets*.cmake")
if(NOT targets_files)
  message(FATAL_ERROR "install_consumer: no datamaskTargets.cmake under ${prefix}")
endif()
foreach(f IN LISTS targets_files)
  file(READ "${f}" content)
  if(content MATCHES "(-W[a-z]|-march|-mtune|-O[0-3sfg]|-ffast-math|/W[0-4]|/WX)")
    message(FATAL_ERROR "install_consumer: ${f} exports a build flag (${CMAKE_MATCH_1}); "
                        "datamask::datamask must carry requirements only")
  endif()
endforeach()

# A component's dependency must be found through the package config's own hints, as on a machine
# whose PATH has no CUDA toolkit (find_package would otherwise find Thrust next to nvcc on PATH).
# Only a package with a Thrust component needs the hint (without one, Thrust_DIR is never set).
file(GLOB component_files "${prefix}/*/cmake/datamask/datamask-*-targets.cmake")
set(config_files)
if(component_files)
  file(GLOB config_files "${prefix}/*/cmake/datamask/datamaskConfig.cmake")
endif()
foreach(f IN LISTS config_files)
  file(READ "${f}" content)
  if(content MATCHES "HINTS \"\"")
    message(FATAL_ERROR "install_consumer: ${f} has an empty HINTS path (a variable was not set "
                        "when the config was generated)")
  endif()
endforeach()
set(path_without_cuda)
if(CMAKE_HOST_WIN32)
  set(path_sep ";")
else()
  set(path_sep ":")
endif()
string(REPLACE "${path_sep}" ";" path_entries "$ENV{PATH}")
foreach(entry IN LISTS path_entries)
  if(NOT entry MATCHES "[Cc][Uu][Dd][Aa]")
    list(APPEND path_without_cuda "${entry}")
  endif()
endforeach()
string(REPLACE ";" "${path_sep}" path_without_cuda "${path_without_cuda}")
set(ENV{PATH} "${path_without_cuda}")

set(configure_args
  -S "${DATAMASK_CONSUMER_DIR}" -B "${consumer_build}" -G "${DATAMASK_GENERATOR}"
  "-DCMAKE_PREFIX_PATH=${prefix}"
  "-DCMAKE_BUILD_TYPE=${DATAMASK_CONFIG}"
  # Only the prefix may satisfy find_package(datamask): no package registries.
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
if(DATAMASK_MAKE_PROGRAM)
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${DATAMASK_MAKE_PROGRAM}")
endif()
if(DATAMASK_CXX_COMPILER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${DATAMASK_CXX_COMPILER}")
endif()
run_step("configure the consumer" "${CMAKE_COMMAND}" ${configure_args})

# Make sure it was this prefix, not some datamask installed elsewhere, that was found.
file(STRINGS "${consumer_build}/CMakeCache.txt" found_dir REGEX "^datamask_DIR:")
string(REGEX REPLACE "^datamask_DIR:[A-Z]+=" "" found_dir "${found_dir}")
file(REAL_PATH "${prefix}" real_prefix)
file(REAL_PATH "${found_dir}" real_found)
string(FIND "${real_found}/" "${real_prefix}/" pos)
if(NOT pos EQUAL 0)
  message(FATAL_ERROR "install_consumer: found datamask in '${found_dir}', not under ${prefix}")
endif()

run_step("build the consumer"
  "${CMAKE_COMMAND}" --build "${consumer_build}" --config "${DATAMASK_CONFIG}")

find_program(consumer_exe NAMES datamask_consumer
  PATHS "${consumer_build}" "${consumer_build}/${DATAMASK_CONFIG}" NO_DEFAULT_PATH)
if(NOT consumer_exe)
  message(FATAL_ERROR "install_consumer: built no datamask_consumer in ${consumer_build}")
endif()
message(STATUS "install_consumer: run ${consumer_exe}")
separate_arguments(consumer_args UNIX_COMMAND "${DATAMASK_CONSUMER_ARGS}")
if(NOT DATAMASK_EXPECTED_OUTPUT)
  set(DATAMASK_EXPECTED_OUTPUT "datamask ${DATAMASK_EXPECTED_VERSION}")
endif()
execute_process(COMMAND "${consumer_exe}" ${consumer_args} WORKING_DIRECTORY "${DATAMASK_WORK_DIR}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install_consumer: the consumer exited with ${rc}")
endif()
if(NOT out MATCHES "${DATAMASK_EXPECTED_OUTPUT}")
  message(FATAL_ERROR "install_consumer: expected the consumer to print '${DATAMASK_EXPECTED_OUTPUT}'")
endif()
message(STATUS "install_consumer: passed")
