// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The one protocol of every optimizer of a block: the policy-gradient learner
/// (`basic_learner`), the continuous learner (`basic_continuous_learner`) and the greedy
/// baselines (`basic_greedy_learner`) each select with
/// `opt.select(problem, diversity, hooks, resume, prepared)`, reporting their steps, asking
/// whether to stop, handing out snapshots and continuing one through the same types. A caller
/// that runs any of them (the run layer's `select_block`) writes its progress, stop, checkpoint
/// and resume once.

#include <functional>
#include <span>
#include <vector>

#include "datamask/core/options.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

/// @brief What an optimizer of a block calls back. Every member may be empty; none changes the
/// selection.
struct optimizer_hooks {
  /// The learners: after each policy-gradient step or continuous iteration (the continuous
  /// learner's record: reward_mean = reward_max = the relaxed f before the step).
  std::function<void(const step_record&)> on_step;
  /// The greedy baselines: after each pick, with the number of rows picked so far.
  std::function<void(index_t)> on_pick;
  /// Asked after every step, iteration or pick (the greedies also about every 0.1 s inside a
  /// pick); true ends the run: the result says `stopped_early` (a greedy's holds its picks so far).
  std::function<bool()> stop;
  /// The learners: a snapshot every this many steps or iterations (0: only when stopped).
  index_t snapshot_every = 0;
  /// The learners: the step or iteration done, the learner's state (policy gradient: its logits,
  /// one per row; continuous: `continuous_iterate::pack()`) and its best selection so far (the
  /// best rollout; the best tracked read-out), every `snapshot_every` and at the stop.
  std::function<void(index_t, std::span<const double>, const best_rollout&)> on_snapshot;
};

/// @brief Where a learner continues: a snapshot's step or iteration, state and best selection,
/// and the records of the steps done (the continuous learner's iterate carries their relaxed
/// values). The result is that of the uninterrupted run. The greedies have no state to continue.
struct resume_point {
  index_t step = 0;
  std::vector<double> state;
  best_rollout best;
  std::vector<step_record> history;
};

}  // namespace datamask
