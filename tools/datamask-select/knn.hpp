// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: facility location on a kNN graph (--neighbors K, --graph PREFIX). The library
// (datamask/run/block_select.hpp) builds each block's graph before optimising it; a graph the user's
// pipeline wrote is loaded here, once. Each graph's time and size go to the progress output, and
// K, the graph's origin, time and size to each block's record and so to the report (outputs.hpp).

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <datamask/io/knn_graph.hpp>
#include <datamask/objectives/sparse_facility.hpp>
#include <datamask/frontend/request.hpp>

#include "args.hpp"

namespace dmselect {

/// The run's loaded graph (--graph) and the seconds loading it took.
struct knn_run {
  std::shared_ptr<const datamask::knn_graph> loaded;
  double seconds = 0.0;
};

/// Prints a graph's size and time, and a clustered graph's estimated recall, with a hint when it
/// is low (unless --quiet).
inline void note_graph(const config& c, const datamask::knn_graph& g, double seconds, const std::string& what) {
  if (c.quiet) return;
  std::fprintf(stderr, "kNN graph%s: %lld items x K = %lld, %.1f MiB, %s in %.2f s", what.c_str(),
               static_cast<long long>(g.n), static_cast<long long>(g.k),
               static_cast<double>(g.bytes()) / (1024.0 * 1024.0), c.graph.empty() ? "built" : "loaded", seconds);
  if (g.recall) std::fprintf(stderr, ", estimated recall@K %.2f", *g.recall);
  std::fprintf(stderr, "\n");
  if (g.recall && *g.recall < dmfront::low_knn_recall) {
    std::fprintf(stderr,
                 "%s: warning: the clustered kNN graph%s finds %.0f%% of each item's %lld nearest neighbours "
                 "(estimated); facility location on it misses the rest. Raise --knn-probes (clusters compared per "
                 "cluster) or give --knn-build exact (slower)\n",
                 c.program.c_str(), what.c_str(), 100.0 * *g.recall, static_cast<long long>(g.k));
  }
}

/// --graph: loads and checks the graph of the corpus (n rows). Its rows are corpus rows, so the
/// corpus must be one block. Without --graph: nothing.
/// @throws usage_error for several blocks; datamask::invalid_input naming the file for a bad graph
inline knn_run load_graph_option(const config& c, index_t n, std::size_t blocks) {
  knn_run k;
  if (c.graph.empty()) return k;
  try {
    dmfront::check_given_graph(n, blocks, program_spelling());
  } catch (const datamask::invalid_input& e) {
    throw usage_error(e.what());
  }
  const auto t0 = std::chrono::steady_clock::now();
  k.loaded = std::make_shared<const datamask::knn_graph>(datamask::load_knn_graph(c.graph, n));
  k.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  note_graph(c, *k.loaded, k.seconds, "");
  return k;
}

}  // namespace dmselect
