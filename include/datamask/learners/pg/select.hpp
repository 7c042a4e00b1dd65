// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief `datamask::learner<>`: the policy-gradient learner on the default backend.
///
/// Why a header of its own: learner.hpp names only the backend concept; choosing a concrete
/// backend (backend/default.hpp: Eigen, or Thrust under nvcc) happens here, where a user who
/// does not name one asks for the default. `datamask::select` (learners/select.hpp) runs it when
/// named or chosen.

#include "datamask/exec/backend/default.hpp"
#include "datamask/learners/pg/learner.hpp"

namespace datamask {

/// @brief The policy-gradient learner with the default backend and policies:
/// `datamask::learner<>(settings).select(problem, objective)`; name a backend to choose another
/// (`learner<thrust_backend>`). See `basic_learner`.
template <backend Backend = default_backend, class Policy = softmax_policy,
          lr_scheduler Scheduler = linear_lr, class Sampler = gumbel_top_k_sampler>
using learner = basic_learner<Backend, Policy, Scheduler, Sampler>;

}  // namespace datamask
