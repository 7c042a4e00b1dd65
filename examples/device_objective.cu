// SPDX-License-Identifier: Apache-2.0
// The CUDA build of device_objective.cpp (one source, two device systems).
#include "device_objective.cpp"
