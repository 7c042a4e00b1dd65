// SPDX-License-Identifier: Apache-2.0
#pragma once

// Shared test helpers: a portable random source (the standard distributions are
// implementation-defined, so tests draw through their own conversions), random blocks, and
// straightforward double-precision reference implementations written from docs/method.md.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <datamask/datamask.hpp>

namespace dmtest {

using datamask::index_t;

/// mt19937_64 is fully specified by the standard; the conversions below are ours.
struct rng {
  std::mt19937_64 g;
  explicit rng(std::uint64_t seed) : g(seed) {}
  double uniform() { return (static_cast<double>(g() >> 11) + 0.5) * 0x1.0p-53; }
  double normal() {
    const double u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  index_t below(index_t n) { return static_cast<index_t>(g() % static_cast<std::uint64_t>(n)); }
  /// k distinct values of [0, n), in random order.
  std::vector<index_t> distinct(index_t n, index_t k) {
    std::vector<index_t> all(static_cast<std::size_t>(n));
    std::iota(all.begin(), all.end(), index_t{0});
    for (index_t i = 0; i < k; ++i) std::swap(all[i], all[i + below(n - i)]);
    all.resize(static_cast<std::size_t>(k));
    return all;
  }
};

/// n x d row-major, N(0, 1) plus a per-column offset so that cosines are not all near 0.
template <class T>
std::vector<T> random_embeddings(index_t n, index_t d, std::uint64_t seed) {
  rng r(seed);
  std::vector<double> offset(static_cast<std::size_t>(d));
  for (auto& o : offset) o = 0.7 * r.normal();
  std::vector<T> x(static_cast<std::size_t>(n * d));
  for (index_t i = 0; i < n; ++i) {
    for (index_t j = 0; j < d; ++j) x[i * d + j] = static_cast<T>(r.normal() + offset[j]);
  }
  return x;
}

inline std::vector<double> random_quality(index_t n, std::uint64_t seed) {
  rng r(seed);
  std::vector<double> q(static_cast<std::size_t>(n));
  for (auto& v : q) v = r.normal();
  return q;
}

/// A random float block (`random_embeddings`, one quality column from `seed + 1`), rows as ids.
struct float_block {
  index_t n = 0;
  index_t d = 0;
  std::vector<float> x;
  std::vector<double> q;
  [[nodiscard]] datamask::problem<float> problem() const {
    datamask::problem<float> p;
    p.embeddings = datamask::make_matrix_view(x.data(), n, d);
    p.quality.push_back({std::span<const double>(q), 1.0});
    return p;
  }
};

inline float_block random_block(index_t n, index_t d, std::uint64_t seed) {
  return float_block{n, d, random_embeddings<float>(n, d, seed), random_quality(n, seed + 1)};
}

// ---- references, in double, from the formulas of docs/method.md --------------------------------

template <class T>
double dot(const std::vector<T>& x, index_t d, index_t a, index_t b) {
  double s = 0.0;
  for (index_t j = 0; j < d; ++j) s += static_cast<double>(x[a * d + j]) * static_cast<double>(x[b * d + j]);
  return s;
}

template <class T>
double cosine(const std::vector<T>& x, index_t d, index_t a, index_t b) {
  return dot(x, d, a, b) / std::sqrt(dot(x, d, a, a) * dot(x, d, b, b));
}

/// F_pws(U) = -(1/(k(k-1))) sum over ordered pairs i != j of cos(e_i, e_j).
template <class T>
double ref_pws(const std::vector<T>& x, index_t d, const std::vector<index_t>& u) {
  const auto k = static_cast<index_t>(u.size());
  if (k < 2) return 0.0;
  double s = 0.0;
  for (index_t i = 0; i < k; ++i) {
    for (index_t j = 0; j < k; ++j) {
      if (i != j) s += cosine(x, d, u[i], u[j]);
    }
  }
  return -s / (static_cast<double>(k) * static_cast<double>(k - 1));
}

template <class T>
double ref_sim(const std::vector<T>& x, index_t d, index_t a, index_t b,
               datamask::similarity_kernel kernel, double gamma) {
  switch (kernel) {
    case datamask::similarity_kernel::cosine: return cosine(x, d, a, b);
    case datamask::similarity_kernel::cosine2: {
      const double c = cosine(x, d, a, b);
      return c * c;
    }
    case datamask::similarity_kernel::dot: return dot(x, d, a, b);
    case datamask::similarity_kernel::rbf: {
      double s = 0.0;
      for (index_t j = 0; j < d; ++j) {
        const double diff = static_cast<double>(x[a * d + j]) - static_cast<double>(x[b * d + j]);
        s += diff * diff;
      }
      return std::exp(-gamma * s);
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

/// F_fl(U) = (1/|V|) sum_{v in V} max_{j in U} sim(e_v, e_j).
template <class T>
double ref_fl(const std::vector<T>& x, index_t d, const std::vector<index_t>& u,
              const std::vector<index_t>& v, datamask::similarity_kernel kernel, double gamma) {
  double total = 0.0;
  for (index_t r : v) {
    double best = -std::numeric_limits<double>::infinity();
    for (index_t j : u) best = std::max(best, ref_sim(x, d, r, j, kernel, gamma));
    total += best;
  }
  return total / static_cast<double>(v.size());
}

/// DiSF: standardise each column over the subset (unbiased variance, +1e-8), C = Z^T Z / (k-1),
/// F = -(1/10^4) sum_{a != b} C_ab^2, with the explicit d x d matrix.
template <class T>
double ref_disf(const std::vector<T>& x, index_t d, const std::vector<index_t>& u) {
  const auto k = static_cast<index_t>(u.size());
  std::vector<double> z(static_cast<std::size_t>(k * d));
  for (index_t c = 0; c < d; ++c) {
    double mean = 0.0;
    for (index_t i = 0; i < k; ++i) mean += static_cast<double>(x[u[i] * d + c]);
    mean /= static_cast<double>(k);
    double var = 0.0;
    for (index_t i = 0; i < k; ++i) {
      const double e = static_cast<double>(x[u[i] * d + c]) - mean;
      var += e * e;
    }
    var /= static_cast<double>(k - 1);
    for (index_t i = 0; i < k; ++i) {
      z[i * d + c] = (static_cast<double>(x[u[i] * d + c]) - mean) / std::sqrt(var + 1e-8);
    }
  }
  std::vector<double> corr(static_cast<std::size_t>(d * d), 0.0);
  for (index_t a = 0; a < d; ++a) {
    for (index_t b = 0; b < d; ++b) {
      double s = 0.0;
      for (index_t i = 0; i < k; ++i) s += z[i * d + a] * z[i * d + b];
      corr[a * d + b] = s / static_cast<double>(k - 1);
    }
  }
  double off = 0.0;
  for (index_t a = 0; a < d; ++a) {
    for (index_t b = 0; b < d; ++b) {
      if (a != b) off += corr[a * d + b] * corr[a * d + b];
    }
  }
  return -1e-4 * off;
}

inline double ref_quality_mean(const std::vector<double>& q, const std::vector<index_t>& u) {
  double s = 0.0;
  for (index_t i : u) s += q[i];
  return s / static_cast<double>(u.size());
}

/// All k-subsets of [0, n) in lexicographic order.
inline std::vector<std::vector<index_t>> all_subsets(index_t n, index_t k) {
  std::vector<std::vector<index_t>> out;
  std::vector<index_t> c(static_cast<std::size_t>(k));
  std::iota(c.begin(), c.end(), index_t{0});
  while (true) {
    out.push_back(c);
    index_t i = k - 1;
    while (i >= 0 && c[i] == n - k + i) --i;
    if (i < 0) break;
    ++c[i];
    for (index_t j = i + 1; j < k; ++j) c[j] = c[j - 1] + 1;
  }
  return out;
}

/// 1/||e_i|| and ||e_i||^2 in double, as subset_view documents them.
template <class T>
void norms(const std::vector<T>& x, index_t n, index_t d, std::vector<double>& inv,
           std::vector<double>& sq) {
  inv.resize(static_cast<std::size_t>(n));
  sq.resize(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) {
    sq[i] = dot(x, d, i, i);
    inv[i] = 1.0 / std::sqrt(sq[i]);
  }
}

}  // namespace dmtest

namespace dmtest {

/// Five active items inside a block of eight rows, with scattered 64-bit ids; the three inactive
/// rows get huge logits, so any leak of an inactive row into a draw or a normaliser shows.
struct pl_block {
  index_t rows = 8;
  std::vector<index_t> active = {1, 2, 4, 6, 7};
  std::vector<datamask::id_t> ids;
  std::vector<double> logits;
  std::vector<float> x;  // a dummy 8 x 1 embedding matrix: the sampler only reads ids
  std::vector<double> ones;
  datamask::eigen_backend b;
  datamask::eigen_backend::dataset<float> ds;

  explicit pl_block(std::uint64_t seed, double spread = 1.0) {
    rng r(seed);
    for (index_t i = 0; i < rows; ++i) {
      ids.push_back((r.g() >> 8) + static_cast<datamask::id_t>(i));  // distinct: different low bits unlikely equal
      logits.push_back(50.0);
      x.push_back(1.0f);
      ones.push_back(1.0);
    }
    for (index_t a : active) logits[a] = spread * r.normal();
    ds = b.make_dataset(datamask::make_matrix_view(x.data(), rows, 1), std::span<const double>(ones),
                        std::span<const double>(ones), std::span<const datamask::id_t>(ids));
  }
  index_t m() const { return static_cast<index_t>(active.size()); }
  /// softmax of the active logits, in `active` order, in double.
  std::vector<double> probs(const std::vector<double>& l) const {
    double mx = -1e300;
    for (index_t a : active) mx = std::max(mx, l[a]);
    std::vector<double> p;
    double z = 0.0;
    for (index_t a : active) {
      p.push_back(std::exp(l[a] - mx));
      z += p.back();
    }
    for (double& v : p) v /= z;
    return p;
  }
  index_t slot(index_t row) const {
    return static_cast<index_t>(std::find(active.begin(), active.end(), row) - active.begin());
  }
};

/// Calls fn(order, probability) for every ordered draw of k distinct slots from the
/// Plackett-Luce distribution with probabilities p: P(order) = prod_t p_{o_t} / (1 - sum_{s<t} p_{o_s}).
template <class Fn>
void for_each_ordered_draw(const std::vector<double>& p, index_t k, Fn&& fn) {
  std::vector<index_t> order;
  std::vector<char> used(p.size(), 0);
  auto rec = [&](auto&& self, double prob, double rest) -> void {
    if (static_cast<index_t>(order.size()) == k) {
      fn(order, prob);
      return;
    }
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (used[i]) continue;
      used[i] = 1;
      order.push_back(static_cast<index_t>(i));
      self(self, prob * p[i] / rest, rest - p[i]);
      order.pop_back();
      used[i] = 0;
    }
  };
  rec(rec, 1.0, 1.0);
}

/// A bit mask of the slots of a draw: the key of its unordered set.
inline unsigned set_key(const std::vector<index_t>& slots) {
  unsigned s = 0;
  for (index_t i : slots) s |= 1u << i;
  return s;
}

}  // namespace dmtest
