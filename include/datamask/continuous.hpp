// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The continuous learner and its parts (docs/method.md section 6): one include for all of
/// continuous/ (the iterate, the step rules, the parameterisations, the ascent, the relaxation of
/// f, the swap polish and the learner).

#include "datamask/continuous/ascent.hpp"
#include "datamask/continuous/iterate.hpp"
#include "datamask/continuous/learner.hpp"
#include "datamask/continuous/polish.hpp"
#include "datamask/continuous/projection.hpp"
#include "datamask/continuous/relaxation.hpp"
#include "datamask/continuous/update.hpp"
