# SPDX-License-Identifier: Apache-2.0
#
# Install rules and the CMake package config for datamask::datamask. Included from the top
# CMakeLists.txt when DATAMASK_INSTALL is ON.
#
# The library is header-only and architecture-independent, so the package config goes under
# the data directory (share/cmake/datamask) and its version file is ARCH_INDEPENDENT: one
# installed tree serves 32- and 64-bit consumers alike. The program component's static libraries
# (tools/datamask-select/CMakeLists.txt) are the exception: that component links only on the
# architecture that built it.
include(CMakePackageConfigHelpers)

set(DATAMASK_INSTALL_CMAKEDIR "${CMAKE_INSTALL_DATADIR}/cmake/datamask"
    CACHE STRING "Where the datamask CMake package config is installed, relative to the prefix")
mark_as_advanced(DATAMASK_INSTALL_CMAKEDIR)

install(TARGETS datamask EXPORT datamaskTargets)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/datamask"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")

install(EXPORT datamaskTargets
        NAMESPACE datamask::
        DESTINATION "${DATAMASK_INSTALL_CMAKEDIR}")

# The Thrust components (targets made by datamask_thrust.cmake, included before this file), each
# in its own export set so that the package config loads it only when asked for.
if(DATAMASK_THRUST_OMP)
  install(TARGETS datamask_thrust_omp EXPORT datamaskThrustOmpTargets)
  install(EXPORT datamaskThrustOmpTargets NAMESPACE datamask::
          FILE datamask-thrust_omp-targets.cmake DESTINATION "${DATAMASK_INSTALL_CMAKEDIR}")
endif()
if(DATAMASK_ENABLE_CUDA)
  install(TARGETS datamask_cuda EXPORT datamaskCudaTargets)
  install(EXPORT datamaskCudaTargets NAMESPACE datamask::
          FILE datamask-cuda-targets.cmake DESTINATION "${DATAMASK_INSTALL_CMAKEDIR}")
endif()

# The config hints the consumer's find_package(Thrust) at the Thrust this build used (Thrust_DIR,
# set by datamask_thrust.cmake), then at the usual toolkit locations.
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/datamaskConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/datamaskConfig.cmake"
  INSTALL_DESTINATION "${DATAMASK_INSTALL_CMAKEDIR}"
  NO_SET_AND_CHECK_MACRO)
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/datamaskConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMajorVersion
  ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/datamaskConfig.cmake"
              "${PROJECT_BINARY_DIR}/datamaskConfigVersion.cmake"
        DESTINATION "${DATAMASK_INSTALL_CMAKEDIR}")
