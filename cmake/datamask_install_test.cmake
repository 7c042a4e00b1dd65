# SPDX-License-Identifier: Apache-2.0
#
# datamask_add_install_test(): registers the ctest `install_consumer`, which proves the package
# works as users get it. It installs this build into a throwaway prefix under the build tree,
# moves that prefix (so any absolute path baked into the package config breaks the test), then
# configures, builds and runs test_package/ -- a separate project that only does
# find_package(datamask CONFIG REQUIRED) and links datamask::datamask -- against it. The same
# folder is the Conan test_package (plain CMake ignores its conanfile.py), so the Conan test and
# the install test build one program.
#
# Use from tests/CMakeLists.txt:
#   include(datamask_install_test)
#   datamask_add_install_test()
#
# Optional arguments:
#   NAME <name>          test name (default: install_consumer)
#   CONSUMER_DIR <dir>   consumer project (default: <source>/test_package)
#   CONSUMER_ARGS <text> the consumer's arguments (default: none)
#   EXPECTED_OUTPUT <re> what its output must match (default: "datamask <version>")
set(_datamask_install_test_script "${CMAKE_CURRENT_LIST_DIR}/install_test.cmake")

function(datamask_add_install_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME;CONSUMER_DIR;CONSUMER_ARGS;EXPECTED_OUTPUT" "")
  if(NOT arg_NAME)
    set(arg_NAME install_consumer)
  endif()
  if(NOT arg_CONSUMER_DIR)
    set(arg_CONSUMER_DIR "${PROJECT_SOURCE_DIR}/test_package")
  endif()
  if(NOT DATAMASK_INSTALL)
    message(STATUS "datamask: DATAMASK_INSTALL is OFF; not registering the ${arg_NAME} test")
    return()
  endif()

  set(work_dir "${CMAKE_CURRENT_BINARY_DIR}/${arg_NAME}")
  add_test(
    NAME ${arg_NAME}
    COMMAND
      "${CMAKE_COMMAND}"
      "-DDATAMASK_BUILD_DIR=${PROJECT_BINARY_DIR}"
      "-DDATAMASK_CONSUMER_DIR=${arg_CONSUMER_DIR}"
      "-DDATAMASK_WORK_DIR=${work_dir}"
      "-DDATAMASK_CONFIG=$<CONFIG>"
      "-DDATAMASK_EXPECTED_VERSION=${PROJECT_VERSION}"
      "-DDATAMASK_GENERATOR=${CMAKE_GENERATOR}"
      "-DDATAMASK_MAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}"
      "-DDATAMASK_CXX_COMPILER=${CMAKE_CXX_COMPILER}"
      "-DDATAMASK_CONSUMER_ARGS=${arg_CONSUMER_ARGS}"
      "-DDATAMASK_EXPECTED_OUTPUT=${arg_EXPECTED_OUTPUT}"
      -P "${_datamask_install_test_script}")
  set_tests_properties(${arg_NAME} PROPERTIES LABELS "install;packaging" TIMEOUT 900)
endfunction()
