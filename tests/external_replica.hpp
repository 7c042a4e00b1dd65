// SPDX-License-Identifier: Apache-2.0
#pragma once
// Pairwise similarity as a user would give it at run time (datamask::external_objective): its
// score and its relaxation written from their definitions in double, for the tests that run it
// against the built-in objective.

#include <atomic>
#include <cmath>
#include <memory>
#include <span>
#include <vector>

#include <datamask/objectives/external.hpp>

namespace dmtest {

namespace dm = datamask;
using dm::index_t;

/// The unit row of row r in double (zero for a zero row).
inline std::vector<double> unit_row(dm::matrix_view<const float> x, index_t r) {
  std::vector<double> u(static_cast<std::size_t>(x.cols));
  double sq = 0.0;
  for (index_t j = 0; j < x.cols; ++j) sq += static_cast<double>(x.data[r * x.stride + j]) * x.data[r * x.stride + j];
  const double inv = sq > 0.0 ? 1.0 / std::sqrt(sq) : 0.0;
  for (index_t j = 0; j < x.cols; ++j) u[static_cast<std::size_t>(j)] = x.data[r * x.stride + j] * inv;
  return u;
}

/// Pairwise similarity from its definition (minus the mean cosine over ordered pairs) and its
/// relaxation (docs/method.md section 6), as a user would write them; `calls` counts score calls.
inline dm::external_objective pairwise_replica(const std::shared_ptr<std::atomic<int>>& calls,
                                               bool relax = true) {
  dm::external_objective o;
  o.label = "replica";
  o.score = [calls](const dm::batch_view<float>& b, std::span<double> out) {
    ++*calls;
    const auto x = b.embeddings;
    const auto subsets = b.subsets;
    const index_t k = subsets.cols;
    for (index_t g = 0; g < subsets.rows; ++g) {
      std::vector<double> s(static_cast<std::size_t>(x.cols), 0.0);
      double self = 0.0;
      for (index_t t = 0; t < k; ++t) {
        const auto u = unit_row(x, subsets.row(g)[t]);
        for (std::size_t j = 0; j < u.size(); ++j) {
          s[j] += u[j];
          self += u[j] * u[j];
        }
      }
      double sq = 0.0;
      for (double v : s) sq += v * v;
      out[static_cast<std::size_t>(g)] = k < 2 ? 0.0 : -(sq - self) / (static_cast<double>(k) * (k - 1));
    }
  };
  if (!relax) return o;
  o.relaxation = [](const dm::relax_view<float>& v, std::span<double> grad) {
    const auto x = v.embeddings;
    const auto p = v.p;
    const double total = v.total;
    std::vector<std::vector<double>> u;
    std::vector<double> s(static_cast<std::size_t>(x.cols), 0.0);
    double self = 0.0;
    for (index_t i = 0; i < x.rows; ++i) {
      u.push_back(unit_row(x, i));
      double c = 0.0;
      for (std::size_t j = 0; j < s.size(); ++j) {
        s[j] += p[static_cast<std::size_t>(i)] * u.back()[j];
        c += u.back()[j] * u.back()[j];
      }
      self += p[static_cast<std::size_t>(i)] * p[static_cast<std::size_t>(i)] * c;
    }
    const double norm = total * (total - 1.0);
    double sq = 0.0;
    for (double si : s) sq += si * si;
    for (index_t i = 0; i < x.rows; ++i) {
      double dot = 0.0, c = 0.0;
      for (std::size_t j = 0; j < s.size(); ++j) {
        dot += u[static_cast<std::size_t>(i)][j] * s[j];
        c += u[static_cast<std::size_t>(i)][j] * u[static_cast<std::size_t>(i)][j];
      }
      grad[static_cast<std::size_t>(i)] = -(2.0 * dot - 2.0 * p[static_cast<std::size_t>(i)] * c) / norm;
    }
    return -(sq - self) / norm;
  };
  return o;
}

}  // namespace dmtest
