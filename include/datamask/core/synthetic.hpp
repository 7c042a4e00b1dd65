// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The one synthetic corpus generator of datamask: the `--demo` corpus of datamask-select,
/// the examples' corpus, the benchmarks' blocks and the tests' instances all come from here.
///
/// A corpus is `clusters` Gaussian clusters in R^d (centres standard normal), of Zipf-like or
/// equal sizes, each with its own spread; optionally a shared low-rank mixing correlates the
/// columns (as real embeddings' columns are). The quality score depends on the cluster, so that
/// quality-only selection piles into a few clusters and the diversity term visibly spreads the
/// selection. Every value is a pure function of (seed, row, column) through the counter-based
/// Philox generator, so a corpus is the same on every platform and thread count.

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include <datamask/core/options.hpp>
#include <datamask/core/philox.hpp>
#include <datamask/core/types.hpp>

namespace datamask {

/// @brief How rows are spread over the clusters.
enum class cluster_sizes {
  zipf,   ///< cluster c gets weight 1 / (c + 1): a few dense topics, many rare ones
  equal,  ///< every cluster equally likely
};

/// @brief How a row's quality depends on its cluster (plus Gaussian noise).
enum class quality_model {
  wave,     ///< 0.5 cos(0.7 c): good and bad clusters interleaved (the `--demo` corpus)
  by_size,  ///< 1 - c / clusters: the dense clusters are the good ones (the examples' corpus)
};

/// @brief The settings of `make_synthetic_corpus`; the defaults give datamask-select's `--demo`.
struct synthetic_options {
  index_t n = 20000;     ///< rows
  index_t d = 32;        ///< columns
  int clusters = 24;     ///< number of clusters, at least 1
  std::uint64_t seed = 0;
  cluster_sizes sizes = cluster_sizes::zipf;
  quality_model quality = quality_model::wave;
  double spread = 0.15;        ///< the standard deviation of a cluster around its centre ...
  double spread_step = 0.05;   ///< ... plus spread_step * (c mod 4)
  double quality_noise = 0.3;  ///< standard deviation of the quality noise
  index_t mixing_rank = 0;     ///< rank of the shared column mixing (0: none)
};

/// @brief A generated corpus: row-major embeddings, one quality score and the cluster per row.
struct synthetic_corpus {
  index_t n = 0;
  index_t d = 0;
  int clusters = 0;
  std::vector<float> embeddings;  ///< n x d, row-major
  std::vector<double> quality;    ///< one score per row
  std::vector<int> cluster;       ///< the cluster of each row

  /// @brief The corpus as the learner's input (views into this object, quality weight 1).
  [[nodiscard]] problem<float> view() const {
    problem<float> p;
    p.embeddings = make_matrix_view(embeddings.data(), n, d);
    p.quality.push_back(quality_column{std::span<const double>(quality), 1.0});
    return p;
  }
};

namespace detail {

/// A standard normal draw (Box-Muller) that is a pure function of (key, id, stream).
inline double synthetic_normal(rng::philox_key key, std::uint64_t id, std::uint32_t stream) {
  const double u1 = rng::uniform01(key, id, 1u, stream);
  const double u2 = rng::uniform01(key, id, 2u, stream);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.141592653589793 * u2);
}

/// The cluster of a row from a uniform draw u in [0, 1).
inline int synthetic_cluster(double u, const synthetic_options& o) {
  if (o.sizes == cluster_sizes::equal) return std::min(o.clusters - 1, static_cast<int>(u * o.clusters));
  double total = 0.0;
  for (int c = 0; c < o.clusters; ++c) total += 1.0 / (c + 1);
  int cl = 0;
  for (double acc = 0.0; cl < o.clusters - 1; ++cl) {
    acc += 1.0 / (cl + 1) / total;
    if (u < acc) break;
  }
  return cl;
}

}  // namespace detail

/// @brief Generates a synthetic corpus (see the file comment).
/// @param o the size, clusters, seed and shape; the defaults are datamask-select's `--demo`
/// @return the corpus, the same for the same options on every platform
[[nodiscard]] inline synthetic_corpus make_synthetic_corpus(const synthetic_options& o = {}) {
  synthetic_corpus k;
  k.n = o.n;
  k.d = o.d;
  k.clusters = o.clusters;
  const rng::philox_key key = rng::block_key(o.seed ^ 0xDE30ull, 0);
  const auto d = static_cast<std::size_t>(o.d);
  std::vector<double> centre(static_cast<std::size_t>(o.clusters) * d);
  for (std::size_t i = 0; i < centre.size(); ++i) centre[i] = detail::synthetic_normal(key, i, 7u);
  std::vector<double> mixing(static_cast<std::size_t>(o.mixing_rank) * d);
  for (std::size_t i = 0; i < mixing.size(); ++i) mixing[i] = 0.5 * detail::synthetic_normal(key, i, 17u);
  k.embeddings.resize(static_cast<std::size_t>(o.n) * d);
  k.quality.resize(static_cast<std::size_t>(o.n));
  k.cluster.resize(static_cast<std::size_t>(o.n));
  std::vector<double> z(static_cast<std::size_t>(o.mixing_rank));
  for (index_t r = 0; r < o.n; ++r) {
    const auto row = static_cast<std::uint64_t>(r);
    const int cl = detail::synthetic_cluster(rng::uniform01(key, row, 3u, 0u), o);
    k.cluster[static_cast<std::size_t>(r)] = cl;
    for (std::size_t a = 0; a < z.size(); ++a) z[a] = detail::synthetic_normal(key, row * z.size() + a, 19u);
    const double spread = o.spread + o.spread_step * (cl % 4);
    for (std::size_t j = 0; j < d; ++j) {
      double v = centre[static_cast<std::size_t>(cl) * d + j] +
                 spread * detail::synthetic_normal(key, row * d + j, 11u);
      for (std::size_t a = 0; a < z.size(); ++a) v += z[a] * mixing[a * d + j];
      k.embeddings[static_cast<std::size_t>(r) * d + j] = static_cast<float>(v);
    }
    const double base = o.quality == quality_model::wave ? 0.5 * std::cos(0.7 * cl)
                                                         : 1.0 - static_cast<double>(cl) / o.clusters;
    k.quality[static_cast<std::size_t>(r)] = base + o.quality_noise * detail::synthetic_normal(key, row, 13u);
  }
  return k;
}

}  // namespace datamask
