// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The continuous learner and its parts (docs/method.md section 6): one include for all of
/// continuous/ (the iterate, the step rules, the parameterisations, the ascent, the relaxation of
/// f, the swap polish and the learner).

#include "datamask/learners/continuous/ascent.hpp"
#include "datamask/learners/continuous/iterate.hpp"
#include "datamask/learners/continuous/learner.hpp"
#include "datamask/learners/continuous/polish.hpp"
#include "datamask/learners/continuous/projection.hpp"
#include "datamask/learners/continuous/relaxation.hpp"
#include "datamask/learners/continuous/update.hpp"
