// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The settings and the result of a greedy run (greedy/greedy.hpp).

#include <cstdint>
#include <functional>
#include <vector>

#include "datamask/core/types.hpp"

namespace datamask {

/// @brief Which greedy algorithm `greedy_select` runs.
enum class greedy_method {
  naive,      ///< score every remaining item in every round
  lazy,       ///< stale gains as upper bounds (Minoux) where valid; the same picks as naive
  stochastic  ///< score R = ceil((n / S) ln(1 / epsilon)) random remaining items per round
};

/// @brief Settings of a greedy run.
struct greedy_options {
  greedy_method method = greedy_method::lazy;
  /// Stochastic greedy's epsilon, in (0, 1). 0.01 rather than the usual 0.1: markedly more of
  /// lazy greedy's gain for a little more time (benchmarks/RESULTS.md, "Dense facility location:
  /// what auto runs").
  double epsilon = 0.01;
  std::uint64_t seed = 0;  ///< keys stochastic greedy's samples
  int threads = 0;         ///< 0: all available
  /// The rows the greedy may pick, e.g. those a quality prune kept; empty: every row. f, and
  /// facility location's reference set, still cover the whole block.
  std::vector<index_t> candidates;
  /// Asked at the start of every round and, inside a round, between slices of candidates sized
  /// to take about a tenth of a second; returning true ends the run with the picks so far and
  /// `greedy_result::stopped` set. Empty: never stop. Called on the thread that runs the greedy.
  std::function<bool()> stop;
  /// Called after each pick with the number of rows picked so far (progress). Empty: never.
  /// Called on the thread that runs the greedy.
  std::function<void(index_t)> on_pick;
};

/// @brief What a greedy run returns.
struct greedy_result {
  std::vector<index_t> rows;   ///< picked rows, in the order picked
  std::vector<double> gains;   ///< f(S_t) - f(S_{t-1}) of each pick, as the greedy computed it
  double objective = 0.0;      ///< f(empty) + sum of the gains
  /// Candidate gains computed (the cost measure of a greedy). Lazy greedy on an f with terms that
  /// are not submodular re-scores those terms for every candidate in every round (cheap: one
  /// dot product for pairwise similarity) and counts only the full re-scores.
  index_t evaluations = 0;
  bool stopped = false;        ///< `greedy_options::stop` ended the run early: fewer rows than asked
};

}  // namespace datamask
