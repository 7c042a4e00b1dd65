# SPDX-License-Identifier: Apache-2.0
#
# Conan build module (see conanfile.py): included by the CMakeDeps-generated
# datamask-config.cmake after it has created datamask::datamask. Adds the requirement that
# the project's own exported target carries and Conan's cpp_info has no field for.
target_compile_features(datamask::datamask INTERFACE cxx_std_20)
