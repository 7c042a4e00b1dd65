// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief A kNN graph (knn/graph.hpp) read from the two .npy files a pipeline wrote.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "datamask/core/error.hpp"
#include "datamask/io/npy.hpp"
#include "datamask/objectives/knn/graph.hpp"

namespace datamask {

/// @brief The two files a graph is read from: PREFIX.ids.npy (integer, n x K neighbour rows)
/// and PREFIX.sims.npy (float, n x K similarities).
[[nodiscard]] inline std::pair<std::string, std::string> knn_graph_files(const std::string& prefix) {
  return {prefix + ".ids.npy", prefix + ".sims.npy"};
}

/// @brief Reads a graph a pipeline wrote (see `knn_graph_files`) for a block of n items, checks
/// it and sorts its rows (`make_knn_graph`).
/// @throws invalid_input naming the file and the problem: not a .npy file, a wrong dtype, not
/// 2-D, rows other than n, shapes that differ, an id outside [0, n) or repeated in a row, a
/// non-finite similarity or one beyond the float range
[[nodiscard]] inline knn_graph load_knn_graph(const std::string& prefix, index_t n) {
  const auto [ids_path, sims_path] = knn_graph_files(prefix);
  const io::npy_file fi = io::open_npy(ids_path, {"graph ids", "int64 (or int32, uint64)", &io::npy_is_integer});
  const io::npy_file fs = io::open_npy(sims_path, {"graph similarities", "float32, float64, float16 or bfloat16",
                                                   &io::npy_is_float});
  const index_t k = check_knn_shapes(fi.path(), fi.header().shape, fs.path(), fs.header().shape, n);
  const std::vector<std::int64_t> ids = fi.read_int64();
  const std::vector<double> sims = fs.read_doubles();
  return make_knn_graph(ids, sims, n, k, fi.path(), fs.path(),
                        detail::concat("loaded from ", ids_path, " and ", sims_path, ", K = ", k));
}

}  // namespace datamask
