// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: facility location on a kNN graph (--neighbors K, --graph PREFIX). The graph
// of each block is built (exact, datamask/knn/graph.hpp) just before the block is optimised, or
// loaded once from the files the user's pipeline wrote; its time and size go to the progress
// output, and K, the graph's origin, time and size to the report's configuration.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include <datamask/knn/graph.hpp>
#include <datamask/objectives/sparse_facility.hpp>

#include "args.hpp"

namespace dmselect {

/// The run's graphs: the loaded one (--graph), and what building or loading them cost.
struct knn_run {
  std::shared_ptr<const datamask::knn_graph> loaded;
  double seconds = 0.0;         // building or loading, all blocks
  std::size_t largest = 0;      // bytes of the largest graph held
  index_t neighbors = 0;        // K of the last graph (a block smaller than --neighbors caps it)
  std::string source;           // how the graphs were made
};

namespace detail {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline void note_graph(knn_run& k, const config& c, const datamask::knn_graph& g, double seconds,
                       const std::string& what) {
  k.seconds += seconds;
  k.largest = std::max(k.largest, g.bytes());
  k.neighbors = g.k;
  k.source = g.source;
  if (!c.quiet) {
    std::fprintf(stderr, "kNN graph%s: %lld items x K = %lld, %.1f MiB, %s in %.2f s\n", what.c_str(),
                 static_cast<long long>(g.n), static_cast<long long>(g.k),
                 static_cast<double>(g.bytes()) / (1024.0 * 1024.0), c.graph.empty() ? "built" : "loaded", seconds);
  }
}

}  // namespace detail

/// --graph: loads and checks the graph of the corpus (n rows). Its rows are corpus rows, so the
/// corpus must be one block. Without --graph: nothing.
/// @throws usage_error for several blocks; datamask::invalid_input naming the file for a bad graph
inline knn_run load_graph_option(const config& c, index_t n, std::size_t blocks) {
  knn_run k;
  if (c.graph.empty()) return k;
  if (blocks != 1) {
    throw usage_error("--graph: the graph's rows are the corpus rows, so it needs the corpus in one block; the " +
                      std::to_string(n) + " items form " + std::to_string(blocks) +
                      " blocks (set --block-size to at least " + std::to_string(n) + ")");
  }
  const auto t0 = std::chrono::steady_clock::now();
  k.loaded = std::make_shared<const datamask::knn_graph>(datamask::load_knn_graph(c.graph, n));
  detail::note_graph(k, c, *k.loaded, detail::seconds_since(t0), "");
  return k;
}

/// The diversity mix for block `b` (problem `p`): `mix` itself without a graph option; else a copy
/// whose sparse facility term holds the loaded graph, or (--neighbors) the exact graph of this
/// block under --kernel, K capped at the block's size.
template <class Mix>
[[nodiscard]] Mix block_mix(const Mix& mix, const config& c, knn_run& k, const datamask::problem<float>& p, index_t b) {
  if (c.neighbors == 0 && c.graph.empty()) return mix;
  Mix out = mix;
  auto& sparse = std::get<datamask::sparse_facility_location>(out.objectives);
  if (k.loaded) {
    sparse.graph = k.loaded;
    return out;
  }
  datamask::knn_settings s;
  s.neighbors = std::min(c.neighbors, p.embeddings.rows);
  s.kernel = c.learn.kernel;
  s.gamma = c.learn.gamma;
  s.threads = c.run.threads;
  const auto t0 = std::chrono::steady_clock::now();
  auto g = std::make_shared<const datamask::knn_graph>(datamask::build_knn_graph(p, s, c.run.normalized));
  detail::note_graph(k, c, *g, detail::seconds_since(t0), " of block " + std::to_string(b));
  sparse.graph = std::move(g);
  return out;
}

/// The report's record of the graphs: K, how they were made, time and the largest one's size.
inline nlohmann::ordered_json graph_json(const knn_run& k) {
  nlohmann::ordered_json j;
  j["neighbors"] = k.neighbors;
  j["source"] = k.source;
  j["seconds"] = k.seconds;
  j["bytes"] = k.largest;
  return j;
}

}  // namespace dmselect
