// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Everything a plain C++20 compiler can build: the CPU backend, the objectives, the
/// policies and the learner. The Thrust/CUDA backend has its own header.

#include "datamask/version.hpp"
#include "datamask/core/config.hpp"
#include "datamask/core/error.hpp"
#include "datamask/core/types.hpp"
#include "datamask/core/half.hpp"
#include "datamask/core/concepts.hpp"
#include "datamask/core/philox.hpp"
#include "datamask/core/enum_names.hpp"
#include "datamask/core/options.hpp"
#include "datamask/learners/settings.hpp"
#include "datamask/objectives/pairwise.hpp"
#include "datamask/objectives/facility.hpp"
#include "datamask/objectives/disf.hpp"
#include "datamask/objectives/mix.hpp"
#include "datamask/learners/schedule.hpp"
#include "datamask/learners/pg/softmax.hpp"
#include "datamask/learners/pg/gumbel_top_k.hpp"
#include "datamask/exec/backend/concept.hpp"
#include "datamask/exec/backend/eigen.hpp"
#include "datamask/objectives/function.hpp"
#include "datamask/objectives/certify.hpp"
#include "datamask/learners/pg/learner.hpp"
#include "datamask/learners/pg/select.hpp"
#include "datamask/learners/select.hpp"
#include "datamask/learners/greedy/greedy.hpp"
#include "datamask/learners/continuous.hpp"
#include "datamask/exec/host.hpp"
#include "datamask/core/input_checks.hpp"
#include "datamask/core/kernels.hpp"
#include "datamask/objectives/knn/build.hpp"
#include "datamask/objectives/sparse_facility.hpp"

namespace datamask {
static_assert(diversity_objective<pairwise_similarity, float>);
static_assert(diversity_objective<facility_location, float>);
static_assert(diversity_objective<disf, float>);
static_assert(diversity_objective<pairwise_similarity, double>);
static_assert(diversity_objective<facility_location, double>);
static_assert(diversity_objective<disf, double>);
static_assert(relaxable_objective<pairwise_similarity, float>);
static_assert(relaxable_objective<disf, float>);
static_assert(!relaxable_objective<facility_location, float>);
static_assert(mask_policy<softmax_policy, eigen_backend>);
static_assert(rollout_sampler<gumbel_top_k_sampler, eigen_backend>);
}  // namespace datamask
