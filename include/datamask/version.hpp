// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The library version: the one place CMake and Conan read it from.

#define DATAMASK_VERSION_MAJOR 0
#define DATAMASK_VERSION_MINOR 1
#define DATAMASK_VERSION_PATCH 0

/// Encoded as MAJOR * 10000 + MINOR * 100 + PATCH.
#define DATAMASK_VERSION (DATAMASK_VERSION_MAJOR * 10000 + DATAMASK_VERSION_MINOR * 100 + DATAMASK_VERSION_PATCH)

namespace datamask {
/// @brief The version as a string, "MAJOR.MINOR.PATCH".
inline constexpr const char* version_string = "0.1.0";
}  // namespace datamask
