// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Greedy baselines: naive, lazy and stochastic greedy maximisation of the same f the
/// learner optimises (`objective_function`: same terms, scales and lambda).
///
/// Two entries:
/// - `greedy_select` scores candidates with incremental gains for the built-in terms (quality:
///   running sum; pairwise similarity: the running sum of unit rows; facility location: a running
///   maximum per reference item, the whole block as reference set; DiSF: rank-one updates of the
///   centred scatter matrix) and by evaluation for user objectives;
/// - `greedy_select_blackbox` only evaluates f: the gain of i is f(S + i) - f(S).
///
/// Every method returns the rows in the order picked and the gain of each pick; ties go to the
/// smaller item id; results are the same for a seed whatever the thread count.
///
/// Lazy greedy keeps stale gains in a priority queue and re-evaluates the top until the top is
/// fresh. It is exact (the same order as naive greedy) when every term's candidate-dependent
/// gain is non-increasing as the set grows: quality (mean or sum; the mean's gain is ranked by
/// (q_i - min q) / (|S| + 1), which only shrinks), facility location (submodular once the set is
/// non-empty; the first two rounds are evaluated in full because f(empty) = 0 can lie below the
/// value of a singleton under the cosine and dot kernels). Pairwise similarity and DiSF are not
/// submodular: there lazy greedy is a heuristic (each accepted gain is exact, the order may
/// differ from naive greedy). `greedy_lazy_is_exact(f)` says which case applies.
///
/// Stochastic greedy (Mirzasoleiman et al., "Lazier than lazy greedy", AAAI 2015) scores, in each
/// round, R = ceil((n / S) ln(1 / epsilon)) candidates drawn uniformly without replacement from
/// the items not yet picked, with Philox-4x32-10 keyed by the seed.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <queue>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "datamask/concepts.hpp"
#include "datamask/detail/parallel.hpp"
#include "datamask/error.hpp"
#include "datamask/objective_function.hpp"
#include "datamask/objectives/disf.hpp"
#include "datamask/objectives/facility.hpp"
#include "datamask/objectives/pairwise.hpp"
#include "datamask/rng/philox.hpp"
#include "datamask/types.hpp"

namespace datamask {

/// @brief Which greedy algorithm `greedy_select` runs.
enum class greedy_method {
  naive,      ///< score every remaining item in every round
  lazy,       ///< priority queue of stale gains (Minoux); exact for submodular f
  stochastic  ///< score R = ceil((n / S) ln(1 / epsilon)) random remaining items per round
};

/// @brief Settings of a greedy run.
struct greedy_options {
  greedy_method method = greedy_method::lazy;
  double epsilon = 0.1;    ///< stochastic greedy's epsilon, in (0, 1)
  std::uint64_t seed = 0;  ///< keys stochastic greedy's samples
  int threads = 0;         ///< 0: all available
  /// The rows the greedy may pick, e.g. those a quality prune kept; empty: every row. f, and
  /// facility location's reference set, still cover the whole block.
  std::vector<index_t> candidates;
};

/// @brief What a greedy run returns.
struct greedy_result {
  std::vector<index_t> rows;   ///< picked rows, in the order picked
  std::vector<double> gains;   ///< f(S_t) - f(S_{t-1}) of each pick, as the greedy computed it
  double objective = 0.0;      ///< f(empty) + sum of the gains
  index_t evaluations = 0;     ///< candidate gains computed (the cost measure of a greedy)
};

namespace detail::greedy {

inline constexpr index_t candidate_chunk = 64;  // fixed: results never depend on thread count
inline constexpr std::uint32_t stream_stochastic = 0x67726479u;  // "grdy"

template <class T>
using row_map = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>;
template <class T>
using rmat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Quality: F = sum q or mean q over the set. Ranked by the candidate-dependent part of the
/// gain, (q_i - min q) / (k + 1) for the mean (non-increasing in k), q_i for the sum.
struct quality_state {
  std::span<const double> q;
  bool mean = true;
  double qmin = 0.0;
  double sum = 0.0;
  index_t k = 0;

  void accumulate(std::span<const index_t> cands, std::span<double> out, double w) const {
    const double div = mean ? static_cast<double>(k + 1) : 1.0;
    const double shift = mean ? qmin : 0.0;
    for (std::size_t c = 0; c < cands.size(); ++c) out[c] += w * (q[cands[c]] - shift) / div;
  }
  [[nodiscard]] double common() const {
    if (!mean) return 0.0;
    if (k == 0) return qmin;
    return (qmin - sum / static_cast<double>(k)) / static_cast<double>(k + 1);
  }
  void add(index_t j) {
    sum += q[j];
    ++k;
  }
};

/// Pairwise similarity: with s = sum of the unit rows of S and P = ||s||^2 - sum ||u||^2 (the sum
/// of cosines over ordered pairs), F(S + i) = -(P + 2 s.u_i) / ((k + 1) k). Each pick is a
/// rank-one change of the Gram matrix, carried by the update of s; a gain costs one dot product.
template <class T>
struct pairwise_state {
  matrix_view<const T> x;
  std::span<const double> inv;
  Eigen::VectorXd s;
  double pairs = 0.0;
  index_t k = 0;
  int threads = 0;

  pairwise_state(matrix_view<const T> x_, std::span<const double> inv_, int th)
      : x(x_), inv(inv_), s(Eigen::VectorXd::Zero(x_.cols)), threads(th) {}

  [[nodiscard]] double dot(index_t i) const {
    return row_map<T>(x.row(i), x.cols).template cast<double>().dot(s) * inv[i];
  }
  [[nodiscard]] double value() const {
    return k < 2 ? 0.0 : -pairs / (static_cast<double>(k) * static_cast<double>(k - 1));
  }
  void accumulate(std::span<const index_t> cands, std::span<double> out, double w) const {
    if (k == 0) return;  // a singleton scores 0
    const double div = static_cast<double>(k + 1) * static_cast<double>(k);
    const auto nc = static_cast<index_t>(cands.size());
    parallel_for((nc + 255) / 256, nc > 256 ? threads : 1, [&](index_t b) {
      for (index_t c = b * 256; c < std::min(nc, (b + 1) * 256); ++c) {
        out[c] += w * (-2.0 * dot(cands[c]) / div);
      }
    });
  }
  [[nodiscard]] double common() const {
    if (k == 0) return 0.0;
    return -pairs / (static_cast<double>(k + 1) * static_cast<double>(k)) - value();
  }
  void add(index_t j) {
    pairs += 2.0 * dot(j);
    s += row_map<T>(x.row(j), x.cols).template cast<double>() * inv[j];
    ++k;
  }
};

/// Facility location over the whole block: best[v] = max_{j in S} sim(v, j), and the gain of i
/// is (1 / n) sum_v max(0, sim(v, i) - best[v]) (sum_v sim(v, i) / n for the first pick). Gains
/// of a chunk of candidates are one tiled product against the block with that sum as epilogue;
/// nothing of size n x n is ever held.
template <class T>
struct facility_state {
  facility_location fl;
  matrix_view<const T> x;   // what the dot products run on (unit rows for the cosine kernels)
  std::vector<T> unit;      // n x d unit rows, for the cosine kernels
  std::span<const double> sq;
  std::vector<double> best;
  index_t k = 0;
  int threads = 0;

  facility_state(const facility_location& f, matrix_view<const T> raw, std::span<const double> inv,
                 std::span<const double> sq_, int th)
      : fl(f), sq(sq_), best(static_cast<std::size_t>(raw.rows), 0.0), threads(th) {
    const index_t n = raw.rows;
    const index_t d = raw.cols;
    if (fl.kernel == similarity_kernel::cosine || fl.kernel == similarity_kernel::cosine2) {
      unit.resize(static_cast<std::size_t>(n * d));
      parallel_for((n + 1023) / 1024, threads, [&](index_t b) {
        for (index_t i = b * 1024; i < std::min(n, (b + 1) * 1024); ++i) {
          for (index_t j = 0; j < d; ++j) {
            unit[i * d + j] = static_cast<T>(static_cast<double>(raw(i, j)) * inv[i]);
          }
        }
      });
      x = matrix_view<const T>(unit.data(), n, d, d);
    } else {
      x = raw;
    }
  }

  [[nodiscard]] double sim(double dot, index_t v, index_t c) const {
    switch (fl.kernel) {
      case similarity_kernel::cosine:
      case similarity_kernel::dot:
        return dot;
      case similarity_kernel::cosine2:
        return dot * dot;
      case similarity_kernel::rbf:
        return std::exp(-fl.gamma * std::max(0.0, sq[v] + sq[c] - 2.0 * dot));
    }
    return 0.0;
  }

  [[nodiscard]] auto block(index_t r0, index_t rows) const {
    using map = Eigen::Map<const rmat<T>, 0, Eigen::OuterStride<>>;
    return map(x.row(r0), rows, x.cols, Eigen::OuterStride<>(x.stride));
  }

  /// Candidates per kernel call. Every call computes exactly this many columns (missing ones are
  /// zero), and each dot product is summed over the d columns in order, so a candidate's gain is
  /// bit-identical whatever chunk it is scored in: naive and lazy greedy then break exact ties
  /// (frequent in facility location: two items that cover each other) the same way.
  static constexpr index_t width = 32;
  static constexpr index_t row_block = 4;

  /// Sum over the reference set of the gain contributions of `nc` <= width candidates.
  void chunk_gains(const index_t* cands, index_t nc, double* acc) const {
    const index_t n = x.rows;
    const index_t d = x.cols;
    std::vector<T> xct(static_cast<std::size_t>(d * width), T(0));  // d x width
    for (index_t c = 0; c < nc; ++c) {
      const T* r = x.row(cands[c]);
      for (index_t j = 0; j < d; ++j) xct[j * width + c] = r[j];
    }
    const std::vector<T> zero(static_cast<std::size_t>(d), T(0));
    std::fill(acc, acc + nc, 0.0);
    alignas(64) T dots[row_block][width];
    for (index_t v0 = 0; v0 < n; v0 += row_block) {
      const index_t t = std::min(row_block, n - v0);
      const T* a[row_block];
      for (index_t r = 0; r < row_block; ++r) a[r] = r < t ? x.row(v0 + r) : zero.data();
      for (index_t r = 0; r < row_block; ++r)
        for (index_t c = 0; c < width; ++c) dots[r][c] = T(0);
      for (index_t j = 0; j < d; ++j) {
        const T* b = xct.data() + j * width;
        const T a0 = a[0][j], a1 = a[1][j], a2 = a[2][j], a3 = a[3][j];
        for (index_t c = 0; c < width; ++c) {
          dots[0][c] += a0 * b[c];
          dots[1][c] += a1 * b[c];
          dots[2][c] += a2 * b[c];
          dots[3][c] += a3 * b[c];
        }
      }
      for (index_t r = 0; r < t; ++r) {
        const index_t v = v0 + r;
        for (index_t c = 0; c < nc; ++c) {
          const double s = sim(static_cast<double>(dots[r][c]), v, cands[c]);
          acc[c] += k == 0 ? s : std::max(0.0, s - best[v]);
        }
      }
    }
  }

  [[nodiscard]] static constexpr index_t lazy_batch() { return width; }

  void accumulate(std::span<const index_t> cands, std::span<double> out, double w) const {
    const auto nc = static_cast<index_t>(cands.size());
    const double inv_n = 1.0 / static_cast<double>(x.rows);
    parallel_for((nc + width - 1) / width, threads, [&](index_t b) {
      const index_t c0 = b * width;
      const index_t m = std::min(width, nc - c0);
      std::vector<double> acc(static_cast<std::size_t>(m));
      chunk_gains(cands.data() + c0, m, acc.data());
      for (index_t c = 0; c < m; ++c) out[c0 + c] += w * acc[c] * inv_n;
    });
  }
  [[nodiscard]] double common() const { return 0.0; }
  void add(index_t j) {
    const index_t n = x.rows;
    const Eigen::Matrix<T, Eigen::Dynamic, 1> xj = block(j, 1).transpose();
    parallel_for((n + 4095) / 4096, threads, [&](index_t b) {
      const index_t r0 = b * 4096;
      const index_t t = std::min<index_t>(4096, n - r0);
      const Eigen::Matrix<T, Eigen::Dynamic, 1> dots = block(r0, t) * xj;
      for (index_t r = 0; r < t; ++r) {
        const double s = sim(static_cast<double>(dots(r)), r0 + r, j);
        best[r0 + r] = k == 0 ? s : std::max(best[r0 + r], s);
      }
    });
    ++k;
  }
};

/// DiSF: with M the centred scatter of S (k rows) and mean mu, adding row x with y = x - mu
/// gives M' = M + beta y y^T, beta = k / (k + 1) (a rank-one update). With var'_a = M'_aa / k and
/// w_a = 1 / (var'_a + 1e-8), sum_{a != b} C'_ab^2 = (w^T (M o M) w + 2 beta (w o y)^T M (w o y)
/// + beta^2 (sum_a w_a y_a^2)^2) / k^2 - sum_a (var'_a w_a)^2: two products with d x d matrices
/// per candidate (4 d^2 flops), batched over candidates as matrix products, all in double.
template <class T>
struct disf_state {
  matrix_view<const T> x;
  Eigen::VectorXd mu;
  Eigen::MatrixXd m;   // centred scatter
  Eigen::MatrixXd q;   // m o m
  double current = 0.0;
  index_t k = 0;
  int threads = 0;

  disf_state(matrix_view<const T> x_, int th)
      : x(x_),
        mu(Eigen::VectorXd::Zero(x_.cols)),
        m(Eigen::MatrixXd::Zero(x_.cols, x_.cols)),
        q(Eigen::MatrixXd::Zero(x_.cols, x_.cols)),
        threads(th) {}

  [[nodiscard]] Eigen::VectorXd row(index_t i) const {
    return row_map<T>(x.row(i), x.cols).template cast<double>();
  }

  void chunk_values(const index_t* cands, index_t nc, double* val) const {
    const index_t d = x.cols;
    const double kk = static_cast<double>(k);
    const double beta = kk / (kk + 1.0);
    Eigen::MatrixXd y(nc, d);
    for (index_t c = 0; c < nc; ++c) y.row(c) = (row(cands[c]) - mu).transpose();
    const Eigen::ArrayXd diag = m.diagonal().array();
    Eigen::MatrixXd w(nc, d);
    Eigen::MatrixXd v(nc, d);
    for (index_t c = 0; c < nc; ++c) {
      const Eigen::ArrayXd var = (diag + beta * y.row(c).transpose().array().square()) / kk;
      const Eigen::ArrayXd wc = 1.0 / (var + disf::epsilon);
      w.row(c) = wc.matrix().transpose();
      v.row(c) = (wc * y.row(c).transpose().array()).matrix().transpose();
      val[c] = 0.0;
      // the diagonal, and the last term
      const double t3 = (wc * y.row(c).transpose().array().square()).sum();
      val[c] = beta * beta * t3 * t3 / (kk * kk) - (var * wc).square().sum();
    }
    const Eigen::MatrixXd wq = w * q;
    const Eigen::MatrixXd vm = v * m;
    for (index_t c = 0; c < nc; ++c) {
      const double t1 = wq.row(c).dot(w.row(c));
      const double t2 = vm.row(c).dot(v.row(c));
      val[c] = -disf::scale * ((t1 + 2.0 * beta * t2) / (kk * kk) + val[c]);
    }
  }

  void accumulate(std::span<const index_t> cands, std::span<double> out, double w) const {
    if (k == 0) return;  // a singleton scores 0
    const auto nc = static_cast<index_t>(cands.size());
    parallel_for((nc + candidate_chunk - 1) / candidate_chunk, threads, [&](index_t b) {
      const index_t c0 = b * candidate_chunk;
      const index_t n = std::min(candidate_chunk, nc - c0);
      std::vector<double> val(static_cast<std::size_t>(n));
      chunk_values(cands.data() + c0, n, val.data());
      for (index_t c = 0; c < n; ++c) out[c0 + c] += w * (val[c] - current);
    });
  }
  [[nodiscard]] double common() const { return 0.0; }
  void add(index_t j) {
    if (k >= 1) {
      double val = 0.0;
      chunk_values(&j, 1, &val);
      current = val;
    }
    const Eigen::VectorXd y = row(j) - mu;
    const double kk = static_cast<double>(k);
    m.noalias() += (kk / (kk + 1.0)) * y * y.transpose();
    mu += y / (kk + 1.0);
    q = m.cwiseAbs2();
    ++k;
  }
};

/// A user objective: gains by evaluating the objective on S + i (reference set: the block).
template <class T, class D>
struct evaluated_state {
  const D* objective;
  matrix_view<const T> x;
  std::span<const double> inv;
  std::span<const double> sq;
  std::vector<index_t> all;
  std::vector<index_t> rows;
  double current = 0.0;
  int threads = 0;

  evaluated_state(const D& o, matrix_view<const T> x_, std::span<const double> inv_,
                  std::span<const double> sq_, int th)
      : objective(&o), x(x_), inv(inv_), sq(sq_), all(static_cast<std::size_t>(x_.rows)), threads(th) {
    std::iota(all.begin(), all.end(), index_t{0});
    current = eval(rows);
  }
  [[nodiscard]] double eval(const std::vector<index_t>& r) const {
    const subset_view<T> s{x, inv.data(), sq.data(), index_view(std::span<const index_t>(r)),
                           index_view(std::span<const index_t>(all))};
    return static_cast<double>((*objective)(s));
  }
  void accumulate(std::span<const index_t> cands, std::span<double> out, double w) const {
    parallel_for(static_cast<index_t>(cands.size()), threads, [&](index_t c) {
      std::vector<index_t> r(rows);
      r.push_back(cands[c]);
      out[c] += w * (eval(r) - current);
    });
  }
  [[nodiscard]] double common() const { return 0.0; }
  void add(index_t j) {
    rows.push_back(j);
    current = eval(rows);
  }
};

template <class T, class D>
struct state_for {
  using type = evaluated_state<T, D>;
};
template <class T>
struct state_for<T, pairwise_similarity> {
  using type = pairwise_state<T>;
};
template <class T>
struct state_for<T, facility_location> {
  using type = facility_state<T>;
};
template <class T>
struct state_for<T, disf> {
  using type = disf_state<T>;
};

template <class T, class D>
auto make_state(const D& objective, matrix_view<const T> x, std::span<const double> inv,
                std::span<const double> sq, int threads) {
  if constexpr (std::is_same_v<D, pairwise_similarity>) {
    return pairwise_state<T>(x, inv, threads);
  } else if constexpr (std::is_same_v<D, facility_location>) {
    return facility_state<T>(objective, x, inv, sq, threads);
  } else if constexpr (std::is_same_v<D, disf>) {
    return disf_state<T>(x, threads);
  } else {
    return evaluated_state<T, D>(objective, x, inv, sq, threads);
  }
}

template <class T, class Mix>
struct structured_scorer;

/// f's gains from the per-term incremental states: priority_i (candidate-dependent) plus a
/// common part, gain_i = priority_i + common().
template <class T, class... Ds>
struct structured_scorer<T, diversity_mix<Ds...>> {
  std::optional<quality_state> quality;
  double quality_w = 0.0;
  std::tuple<std::optional<typename state_for<T, Ds>::type>...> states;
  std::array<double, sizeof...(Ds)> w{};

  template <class D>
  structured_scorer(const objective_function<T, D>& f, int threads) {
    const auto& terms = f.terms();
    if (f.has_quality_term()) {
      const auto q = f.quality();
      quality.emplace();
      quality->q = q;
      quality->mean = f.aggregate() == quality_aggregate::mean;
      quality->qmin = q.empty() ? 0.0 : *std::min_element(q.begin(), q.end());
      quality_w = terms[0].weight / terms[0].scale;
    }
    const auto slots = f.term_slots();
    f.mix().for_each([&](auto i, const auto& objective, double /*v*/) {
      constexpr std::size_t I = decltype(i)::value;
      if (slots[I] < 0) return;
      std::get<I>(states).emplace(make_state<T>(objective, f.embeddings(), f.inv_norms(),
                                                f.sq_norms(), threads));
      w[I] = terms[static_cast<std::size_t>(slots[I])].weight /
             terms[static_cast<std::size_t>(slots[I])].scale;
    });
  }

  void priorities(std::span<const index_t> cands, std::span<double> out) const {
    std::fill(out.begin(), out.end(), 0.0);
    if (quality) quality->accumulate(cands, out, quality_w);
    each([&](const auto& s, double wi) { s.accumulate(cands, out, wi); });
  }
  [[nodiscard]] double common() const {
    double c = quality ? quality_w * quality->common() : 0.0;
    each([&](const auto& s, double wi) { c += wi * s.common(); });
    return c;
  }
  void add(index_t j) {
    if (quality) quality->add(j);
    each_mut([&](auto& s) { s.add(j); });
  }
  [[nodiscard]] double empty_value() const { return 0.0; }
  /// Stale entries lazy greedy re-scores at once: a facility-location kernel call costs the
  /// same for 1 or `width` candidates.
  [[nodiscard]] index_t lazy_batch() const {
    index_t b = 1;
    each([&](const auto& st, double) {
      if constexpr (requires { st.lazy_batch(); }) b = std::max(b, st.lazy_batch());
    });
    return b;
  }

 private:
  template <class F>
  void each(F&& fn) const {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((std::get<I>(states) ? fn(*std::get<I>(states), w[I]) : void()), ...);
    }(std::index_sequence_for<Ds...>{});
  }
  template <class F>
  void each_mut(F&& fn) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((std::get<I>(states) ? fn(*std::get<I>(states)) : void()), ...);
    }(std::index_sequence_for<Ds...>{});
  }
};

/// f as a black box: gain_i = f(S + i) - f(S).
template <class F>
struct blackbox_scorer {
  const F* f;
  std::vector<index_t> rows;
  double current = 0.0;
  int threads = 0;

  blackbox_scorer(const F& fn, int th) : f(&fn), threads(th) { current = (*f)(rows); }
  void priorities(std::span<const index_t> cands, std::span<double> out) const {
    parallel_for(static_cast<index_t>(cands.size()), threads, [&](index_t c) {
      std::vector<index_t> r(rows);
      r.push_back(cands[c]);
      out[c] = (*f)(std::span<const index_t>(r)) - current;
    });
  }
  [[nodiscard]] double common() const { return 0.0; }
  void add(index_t j) {
    rows.push_back(j);
    current = (*f)(std::span<const index_t>(rows));
  }
  [[nodiscard]] double empty_value() const {
    return (*f)(std::span<const index_t>());
  }
  [[nodiscard]] index_t lazy_batch() const { return 1; }
};

/// The three greedy loops over any scorer.
template <class Scorer>
greedy_result run(Scorer& scorer, index_t n, std::span<const id_t> ids, index_t count,
                  const greedy_options& opt) {
  std::vector<index_t> remaining;
  if (opt.candidates.empty()) {
    remaining.resize(static_cast<std::size_t>(n));
    std::iota(remaining.begin(), remaining.end(), index_t{0});
  } else {
    remaining = datamask::detail::sorted_distinct_rows(opt.candidates, n, "candidates");
  }
  const auto pool = static_cast<index_t>(remaining.size());
  DATAMASK_EXPECTS(count >= 1 && count <= pool, "count", "must be in [1, ", pool, "]",
                   opt.candidates.empty() ? "" : " (the number of candidates)", ", found ", count);
  DATAMASK_EXPECTS(opt.threads >= 0, "threads", "must be >= 0 (0: all), found ", opt.threads);
  DATAMASK_EXPECTS(opt.method != greedy_method::stochastic ||
                       (std::isfinite(opt.epsilon) && opt.epsilon > 0.0 && opt.epsilon < 1.0),
                   "epsilon", "must be in (0, 1), found ", opt.epsilon);
  greedy_result res;
  res.rows.reserve(static_cast<std::size_t>(count));
  res.gains.reserve(static_cast<std::size_t>(count));
  res.objective = scorer.empty_value();
  auto better = [&](double a, index_t ra, double b, index_t rb) {
    return a != b ? a > b : ids[ra] < ids[rb];
  };
  auto pick = [&](index_t j, double priority) {
    const double gain = priority + scorer.common();
    res.rows.push_back(j);
    res.gains.push_back(gain);
    res.objective += gain;
    scorer.add(j);
  };

  std::vector<double> p;
  // One full round: score all remaining items, pick the best; returns the scores.
  auto full_round = [&]() {
    p.resize(remaining.size());
    scorer.priorities(remaining, p);
    res.evaluations += static_cast<index_t>(remaining.size());
    std::size_t b = 0;
    for (std::size_t c = 1; c < remaining.size(); ++c) {
      if (better(p[c], remaining[c], p[b], remaining[b])) b = c;
    }
    const index_t j = remaining[b];
    const double pj = p[b];
    remaining.erase(remaining.begin() + static_cast<std::ptrdiff_t>(b));
    p.erase(p.begin() + static_cast<std::ptrdiff_t>(b));
    pick(j, pj);
  };

  switch (opt.method) {
    case greedy_method::naive: {
      for (index_t t = 0; t < count; ++t) full_round();
      break;
    }
    case greedy_method::lazy: {
      full_round();
      if (count == 1) break;
      full_round();  // stale gains from here on are upper bounds (see the file comment)
      struct entry {
        double key;
        index_t row;
        index_t round;
      };
      auto cmp = [&](const entry& a, const entry& b) { return better(b.key, b.row, a.key, a.row); };
      std::vector<entry> init;
      init.reserve(remaining.size());
      for (std::size_t c = 0; c < remaining.size(); ++c) init.push_back({p[c], remaining[c], 1});
      std::priority_queue<entry, std::vector<entry>, decltype(cmp)> heap(cmp, std::move(init));
      remaining.clear();
      remaining.shrink_to_fit();
      const auto batch = static_cast<std::size_t>(std::max<index_t>(1, scorer.lazy_batch()));
      std::vector<index_t> stale;
      std::vector<double> fresh;
      for (index_t t = 2; t < count; ++t) {
        for (;;) {
          if (heap.top().round == t) {
            pick(heap.top().row, heap.top().key);
            heap.pop();
            break;
          }
          // Re-score the top stale entries (one, or a kernel's worth).
          stale.clear();
          while (stale.size() < batch && !heap.empty() && heap.top().round != t) {
            stale.push_back(heap.top().row);
            heap.pop();
          }
          fresh.resize(stale.size());
          scorer.priorities(stale, fresh);
          res.evaluations += static_cast<index_t>(stale.size());
          for (std::size_t c = 0; c < stale.size(); ++c) heap.push({fresh[c], stale[c], t});
        }
      }
      break;
    }
    case greedy_method::stochastic: {
      const double r_real = std::ceil(static_cast<double>(pool) / static_cast<double>(count) *
                                      std::log(1.0 / opt.epsilon));
      const auto r_size = static_cast<index_t>(std::max(1.0, r_real));
      const rng::philox_key key = rng::block_key(opt.seed, stream_stochastic);
      std::vector<char> taken(static_cast<std::size_t>(pool), 0);
      std::vector<index_t> sample_pos;
      std::vector<index_t> sample;
      for (index_t t = 0; t < count; ++t) {
        const auto rem = static_cast<index_t>(remaining.size());
        sample_pos.clear();
        if (r_size >= rem) {
          sample_pos.resize(static_cast<std::size_t>(rem));
          std::iota(sample_pos.begin(), sample_pos.end(), index_t{0});
        } else {
          // Uniform draws without replacement by rejection: draw number u of round t.
          for (std::uint64_t u = 0; static_cast<index_t>(sample_pos.size()) < r_size; ++u) {
            const double x = rng::uniform01(key, u, static_cast<std::uint32_t>(t), stream_stochastic);
            const auto pos = std::min(rem - 1, static_cast<index_t>(x * static_cast<double>(rem)));
            if (taken[pos]) continue;
            taken[pos] = 1;
            sample_pos.push_back(pos);
          }
          for (index_t pos : sample_pos) taken[pos] = 0;
        }
        sample.resize(sample_pos.size());
        for (std::size_t c = 0; c < sample_pos.size(); ++c) sample[c] = remaining[sample_pos[c]];
        p.resize(sample.size());
        scorer.priorities(sample, p);
        res.evaluations += static_cast<index_t>(sample.size());
        std::size_t b = 0;
        for (std::size_t c = 1; c < sample.size(); ++c) {
          if (better(p[c], sample[c], p[b], sample[b])) b = c;
        }
        const index_t j = sample[b];
        const double pj = p[b];
        // Swap-remove: the layout of `remaining` depends only on the picks, so draws are
        // reproducible for a seed.
        remaining[sample_pos[b]] = remaining.back();
        remaining.pop_back();
        pick(j, pj);
      }
      break;
    }
  }
  return res;
}

}  // namespace detail::greedy

/// @brief Whether lazy greedy gives exactly naive greedy's order on f: true when every term with
/// a positive weight is quality or facility location (their ranked gains never grow).
template <class T, class D>
[[nodiscard]] bool greedy_lazy_is_exact(const objective_function<T, D>& f) {
  bool exact = true;
  const auto slots = f.term_slots();
  f.mix().for_each([&](auto i, const auto& objective, double /*w*/) {
    using O = std::remove_cvref_t<decltype(objective)>;
    if (slots[decltype(i)::value] >= 0 && !std::is_same_v<O, facility_location>) exact = false;
  });
  return exact;
}

/// @brief Greedy maximisation of f with incremental gains for the built-in terms (quality,
/// pairwise similarity, facility location with the whole block as reference set, DiSF) and
/// gains by evaluation for user objectives.
/// @param f the objective (set its scales from `learner<>::calibrate` to optimise a run's f)
/// @param count S, the number of items to pick, in [1, n]
/// @throws invalid_input for a bad count, epsilon or thread count.
template <class T, class D>
[[nodiscard]] greedy_result greedy_select(const objective_function<T, D>& f, index_t count,
                                          const greedy_options& opt = {}) {
  detail::greedy::structured_scorer<T, typename objective_function<T, D>::mix_type> scorer(
      f, opt.threads);
  return detail::greedy::run(scorer, f.size(), f.ids(), count, opt);
}

/// @brief Greedy maximisation of f treated as evaluation-only: the gain of i is f(S + i) - f(S),
/// each an evaluation of f on the whole set (the black-box case, and the cost model of the
/// reference DiSF greedy). Same methods, ties and determinism as `greedy_select`.
template <class T, class D>
[[nodiscard]] greedy_result greedy_select_blackbox(const objective_function<T, D>& f,
                                                   index_t count, const greedy_options& opt = {}) {
  detail::greedy::blackbox_scorer<objective_function<T, D>> scorer(f, opt.threads);
  return detail::greedy::run(scorer, f.size(), f.ids(), count, opt);
}

}  // namespace datamask
