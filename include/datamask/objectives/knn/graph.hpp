// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The k-nearest-neighbour graph of a block, the input of sparse facility location
/// (objectives/sparse_facility.hpp): for every item v, the K items j with the largest sim(v, j)
/// under one of the similarity kernels (kernels.hpp), with those similarities. Built by
/// knn/build.hpp (exact or clustered), loaded from files by io/knn_graph.hpp, or made from a
/// caller's arrays (`make_knn_graph`).
///
/// Conventions (the same whether the graph is built, loaded or given):
/// - The item itself is a candidate like any other: under the cosine, cosine2 and rbf kernels it
///   is its own nearest neighbour (sim 1), so a graph of K neighbours holds v and K - 1 others,
///   and K = n holds every item: sparse facility location then equals dense facility location.
/// - Each row is sorted by similarity descending, ties to the smaller id: the order is total, so
///   the exact graph is unique and does not depend on tiles or threads.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "datamask/core/error.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

/// @brief K neighbours and their similarities per item (n x K, row-major), rows sorted by
/// similarity descending, ties to the smaller id, the item itself included (see the file
/// comment).
struct knn_graph {
  index_t n = 0;                ///< items (rows of the block)
  index_t k = 0;                ///< neighbours per item
  std::vector<index_t> ids;     ///< n x k neighbour rows
  std::vector<float> sims;      ///< n x k similarities
  std::string source;           ///< how the graph was made (reported by the program)
  /// An approximate graph's recall@K, estimated on a sample of rows (`knn_recall`); none for an
  /// exact graph or one given by the caller.
  std::optional<double> recall;

  [[nodiscard]] index_t neighbor(index_t v, index_t r) const { return ids[static_cast<std::size_t>(v * k + r)]; }
  [[nodiscard]] float similarity(index_t v, index_t r) const { return sims[static_cast<std::size_t>(v * k + r)]; }
  /// @brief Bytes held by the two arrays.
  [[nodiscard]] std::size_t bytes() const { return ids.size() * sizeof(index_t) + sims.size() * sizeof(float); }
};

/// @brief A graph's entries grouped by the item they list (`group_by_item`).
template <class Payload>
struct grouped_entries {
  std::vector<index_t> at;  ///< n + 1 offsets: item j's entries are entries[at[j] .. at[j + 1])
  std::vector<Payload> entries;
};

/// @brief The entries e = v K + r that `keep(e)` accepts, grouped by the item ids[e] they list
/// by a counting sort: each group by v ascending (the rows' order), each entry as `make(e)`.
/// One home for the greedy's transpose, the relaxation's grouping and the dual's pairs.
template <class Keep, class Make>
[[nodiscard]] auto group_by_item(const knn_graph& g, Keep&& keep, Make&& make) {
  grouped_entries<decltype(make(index_t{}))> out;
  out.at.assign(static_cast<std::size_t>(g.n) + 1, 0);
  const auto entries = static_cast<index_t>(g.ids.size());
  for (index_t e = 0; e < entries; ++e) {
    if (keep(e)) ++out.at[static_cast<std::size_t>(g.ids[static_cast<std::size_t>(e)]) + 1];
  }
  for (std::size_t j = 0; j < static_cast<std::size_t>(g.n); ++j) out.at[j + 1] += out.at[j];
  out.entries.resize(static_cast<std::size_t>(out.at.back()));
  std::vector<index_t> fill(out.at.begin(), out.at.end() - 1);
  for (index_t e = 0; e < entries; ++e) {
    if (!keep(e)) continue;
    const auto j = static_cast<std::size_t>(g.ids[static_cast<std::size_t>(e)]);
    out.entries[static_cast<std::size_t>(fill[j]++)] = make(e);
  }
  return out;
}

namespace detail::knn {

/// (similarity, row) ordered best first: larger similarity, then the smaller row.
struct better {
  bool operator()(const std::pair<double, index_t>& a, const std::pair<double, index_t>& b) const {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  }
};

}  // namespace detail::knn

/// @brief Checks the shapes of a graph's two arrays for a block of n items: each 2-D with n rows
/// and K >= 1 columns, the same K. The names name the arrays in errors (files' paths, or
/// arguments). Returns K.
/// @throws invalid_input naming the array and what is wrong
inline index_t check_knn_shapes(const std::string& ids_name, std::span<const std::int64_t> ids_shape,
                                const std::string& sims_name, std::span<const std::int64_t> sims_shape, index_t n) {
  for (const auto& [name, shape] : {std::pair{&ids_name, ids_shape}, std::pair{&sims_name, sims_shape}}) {
    DATAMASK_EXPECTS(shape.size() == 2, *name, "expected a 2-D array (n x K), found ", shape.size(), " dimension",
                     shape.size() == 1 ? "" : "s");
    DATAMASK_EXPECTS(shape[0] == n, *name, "has ", shape[0], " rows, expected ", n, " (one per item of the block)");
    DATAMASK_EXPECTS(shape[1] >= 1, *name, "has 0 columns; expected K >= 1 neighbours per item");
  }
  DATAMASK_EXPECTS(sims_shape[1] == ids_shape[1], sims_name, "has shape ", sims_shape[0], " x ", sims_shape[1],
                   ", but ", ids_name, " has ", ids_shape[0], " x ", ids_shape[1], "; the two must match");
  return static_cast<index_t>(ids_shape[1]);
}

/// @brief A graph from the rows a pipeline made (n x K neighbour ids and similarities,
/// row-major, their shapes checked by `check_knn_shapes`): checks the values and sorts each row by
/// similarity descending, ties to the smaller id. Rows should list the item itself (see the file
/// comment); nothing requires it. `ids_name` and `sims_name` name the two arrays in errors.
/// @throws invalid_input naming the array and the entry: an id outside [0, n) or repeated in a
/// row, a non-finite similarity or one beyond the float range
[[nodiscard]] inline knn_graph make_knn_graph(std::span<const std::int64_t> ids, std::span<const double> sims,
                                              index_t n, index_t k, const std::string& ids_name,
                                              const std::string& sims_name, std::string source) {
  const auto entries = static_cast<std::size_t>(n) * static_cast<std::size_t>(k);
  if (ids.size() != entries || sims.size() != entries) {
    throw std::logic_error("make_knn_graph: the arrays do not hold n x K entries");  // shapes are checked first
  }
  knn_graph g;
  g.n = n;
  g.k = k;
  g.ids.resize(entries);
  g.sims.resize(entries);
  std::vector<std::pair<double, index_t>> row(static_cast<std::size_t>(k));
  std::vector<char> listed(static_cast<std::size_t>(n), 0);  // the ids of the current row: O(K) per row
  for (index_t v = 0; v < n; ++v) {
    for (index_t r = 0; r < k; ++r) {
      const auto at = static_cast<std::size_t>(v * k + r);
      DATAMASK_EXPECTS(ids[at] >= 0 && ids[at] < n, ids_name, "row ", v, ", column ", r, " holds id ", ids[at],
                       ", outside [0, ", n, ")");
      DATAMASK_EXPECTS(std::isfinite(sims[at]), sims_name, "row ", v, ", column ", r, " is ",
                       std::isnan(sims[at]) ? "NaN" : "infinite", "; every similarity must be finite");
      DATAMASK_EXPECTS(std::isfinite(static_cast<float>(sims[at])), sims_name, "row ", v, ", column ", r, " is ",
                       sims[at], ", beyond the float range the graph stores");
      row[static_cast<std::size_t>(r)] = {static_cast<double>(static_cast<float>(sims[at])),
                                          static_cast<index_t>(ids[at])};
    }
    std::sort(row.begin(), row.end(), detail::knn::better{});
    for (index_t r = 0; r < k; ++r) {
      const auto at = static_cast<std::size_t>(v * k + r);
      g.ids[at] = row[static_cast<std::size_t>(r)].second;
      g.sims[at] = static_cast<float>(row[static_cast<std::size_t>(r)].first);
      char& seen = listed[static_cast<std::size_t>(g.ids[at])];
      DATAMASK_EXPECTS(!seen, ids_name, "row ", v, " lists id ", g.ids[at], " twice; neighbours must be distinct");
      seen = 1;
    }
    for (index_t r = 0; r < k; ++r) listed[static_cast<std::size_t>(g.ids[static_cast<std::size_t>(v * k + r)])] = 0;
  }
  g.source = std::move(source);
  return g;
}

}  // namespace datamask
