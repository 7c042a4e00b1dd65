// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The fixed-chunk sums the relaxations share (pairwise similarity's, DiSF's): row
/// chunks whose number depends on n only, each summed in row order on one thread, the chunks
/// added in chunk order, so a relaxation gives the same bits whatever the thread count.

#include <algorithm>
#include <span>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "datamask/detail/parallel.hpp"
#include "datamask/types.hpp"

namespace datamask {

namespace detail::relax {

/// Rows per chunk: at least `min_rows`, and at most `max_chunks` chunks. Depends on n only.
inline index_t chunk_rows(index_t n, index_t max_chunks, index_t min_rows = 1024) {
  return std::max<index_t>(min_rows, (n + max_chunks - 1) / max_chunks);
}

template <class T>
using row_map = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>;

/// sum_i w(i) x_i (a d-vector) and sum_i a(i), over the rows with p_i != 0, in fixed chunks
/// summed in chunk order.
template <class T, class W, class A>
std::pair<Eigen::VectorXd, double> weighted_sum(const matrix_view<const T>& x, std::span<const double> p,
                                                int threads, W&& w, A&& a) {
  const index_t n = x.rows;
  const index_t d = x.cols;
  const index_t rows = chunk_rows(n, 64);
  const index_t chunks = (n + rows - 1) / rows;
  Eigen::MatrixXd vpart = Eigen::MatrixXd::Zero(d, chunks);
  std::vector<double> spart(static_cast<std::size_t>(chunks), 0.0);
  parallel_for(chunks, threads, [&](index_t c) {
    for (index_t i = c * rows; i < std::min(n, (c + 1) * rows); ++i) {
      if (p[i] == 0.0) continue;
      vpart.col(c) += row_map<T>(x.row(i), d).template cast<double>() * w(i);
      spart[static_cast<std::size_t>(c)] += a(i);
    }
  });
  std::pair<Eigen::VectorXd, double> out{Eigen::VectorXd::Zero(d), 0.0};
  for (index_t c = 0; c < chunks; ++c) {
    out.first += vpart.col(c);
    out.second += spart[static_cast<std::size_t>(c)];
  }
  return out;
}

}  // namespace detail::relax

}  // namespace datamask
