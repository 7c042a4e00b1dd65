# SPDX-License-Identifier: Apache-2.0
#
# Conan build module for system_eigen=True (see conanfile.py): the recipe requires no Conan
# Eigen package, so the target links the system's Eigen3::Eigen (Debian: libeigen3-dev).
if(NOT TARGET Eigen3::Eigen)
  find_package(Eigen3 3.4 QUIET NO_MODULE)
  if(NOT Eigen3_FOUND)
    message(FATAL_ERROR
      "datamask (Conan, system_eigen=True) needs a system Eigen 3.4 (CMake package Eigen3). "
      "On Debian/Ubuntu: apt-get install libeigen3-dev. Or use -o datamask/*:system_eigen=False "
      "to take eigen/3.4.0 from ConanCenter.")
  endif()
endif()
target_link_libraries(datamask::datamask INTERFACE Eigen3::Eigen)
