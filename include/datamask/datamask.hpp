// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Everything a plain C++20 compiler can build: the CPU backend, the objectives, the
/// policies and the learner. The Thrust/CUDA backend has its own header.

#include "datamask/version.hpp"
#include "datamask/config.hpp"
#include "datamask/error.hpp"
#include "datamask/types.hpp"
#include "datamask/concepts.hpp"
#include "datamask/rng/philox.hpp"
#include "datamask/enum_names.hpp"
#include "datamask/options.hpp"
#include "datamask/settings.hpp"
#include "datamask/objectives/pairwise.hpp"
#include "datamask/objectives/facility.hpp"
#include "datamask/objectives/disf.hpp"
#include "datamask/objectives/mix.hpp"
#include "datamask/schedule/lr.hpp"
#include "datamask/policy/softmax.hpp"
#include "datamask/sampler/gumbel_top_k.hpp"
#include "datamask/backend/concept.hpp"
#include "datamask/backend/eigen.hpp"
#include "datamask/objective_function.hpp"
#include "datamask/certify.hpp"
#include "datamask/learner.hpp"
#include "datamask/select.hpp"
#include "datamask/greedy/greedy.hpp"
#include "datamask/continuous.hpp"
#include "datamask/executor/host.hpp"
#include "datamask/input_checks.hpp"
#include "datamask/kernels.hpp"
#include "datamask/knn/build.hpp"
#include "datamask/objectives/sparse_facility.hpp"
#include "datamask/pipeline.hpp"
#include "datamask/plan.hpp"

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
