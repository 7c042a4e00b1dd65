// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief DiSF: the dimensional-collapse objective (squared off-diagonal correlation), with
/// everything the backends and the greedy baselines need from it: host evaluation, the greedy
/// state (`incremental_objective`), the device evaluator (`device_evaluable`) and the relaxation
/// the continuous learner ascends (`relaxable_objective`), written once against an executor.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "datamask/core/concepts.hpp"
#include "datamask/core/config.hpp"
#include "datamask/core/detail/parallel.hpp"
#include "datamask/core/detail/row_map.hpp"
#include "datamask/core/error.hpp"
#include "datamask/objectives/detail/device_passes.hpp"
#include "datamask/exec/dense.hpp"
#include "datamask/exec/host.hpp"
#include "datamask/exec/ops.hpp"

#if __has_include(<unistd.h>)
#include <unistd.h>
#endif
#if __has_include(<sys/resource.h>)
#include <sys/resource.h>
#endif

namespace datamask {

namespace detail::disf_impl {

inline constexpr double epsilon = 1e-8;
inline constexpr double scale = 1e-4;

/// The memory this process may use, in bytes: the least of the machine's physical memory, its
/// address-space and data limits (ulimit -v / -d) and its cgroup's limit (a container's or a
/// Slurm job's, cgroup v2 memory.max); infinity where none is known.
inline double usable_memory_bytes() {
  double bytes = std::numeric_limits<double>::infinity();
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGE_SIZE)
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) bytes = static_cast<double>(pages) * static_cast<double>(page);
#endif
#if __has_include(<sys/resource.h>)
  for (const int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit lim {};
    if (::getrlimit(resource, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
      bytes = std::min(bytes, static_cast<double>(lim.rlim_cur));
    }
  }
#endif
  if (std::FILE* f = std::fopen("/sys/fs/cgroup/memory.max", "r")) {  // "max" when unlimited
    unsigned long long limit = 0;
    if (std::fscanf(f, "%llu", &limit) == 1) bytes = std::min(bytes, static_cast<double>(limit));
    std::fclose(f);
  }
  return bytes;
}

/// Refuses a d too large for this process (usable_memory_bytes) before `what` allocates the `matrices` d x d matrices
/// it needs (of `value_bytes`-byte entries; 8: double): every DiSF path but the small-subset Gram holds
/// some, and at d = 65,536 one double matrix is 32 GiB. Why a check and not a caught bad_alloc:
/// they are allocated in parallel regions and inside Eigen, and on an overcommitting system an
/// allocation larger than memory can succeed and the process be killed when it touches it.
/// @throws invalid_input naming the embeddings, d and the bytes needed
inline void check_d_memory(index_t d, index_t matrices, const char* what, double value_bytes = 8.0) {
  const double need = static_cast<double>(matrices) * value_bytes * static_cast<double>(d) * static_cast<double>(d);
  // Read once per process (a few system calls and a file): some callers score every subset.
  static const double have = usable_memory_bytes();
  if (need <= have) return;
  char text[160];
  std::snprintf(text, sizeof text, "%.0f bytes (%.1f GiB), more than this process may use (%.1f GiB)", need,
                need / 1073741824.0, have / 1073741824.0);
  throw invalid_input("embeddings", detail::concat("d = ", d, " is too large for DiSF: ", what, " needs ", matrices,
                                                   matrices == 1 ? " d x d matrix, " : " d x d matrices, ", text,
                                                   "; reduce d (project the embeddings) or drop DiSF"));
}

/// The change one row y = x - mu makes to the centred scatter M of a set of k rows with mean mu:
/// M' = M + beta y y^T, joining (beta = k / (k + 1), k + 1 rows after, variances over k) or
/// leaving (beta = -k / (k - 1), the mean moves too, k - 1 rows after, variances over k - 2).
/// With var'_a = M'_aa / divisor and w_a = 1 / (var'_a + 1e-8), sum_{a != b} C'_ab^2 =
/// (w^T (M o M) w + 2 beta (w o y)^T M (w o y) + beta^2 (sum_a w_a y_a^2)^2) / divisor^2 -
/// sum_a (var'_a w_a)^2: two products with d x d matrices per row (`changed_values`).
struct rank_one {
  double beta = 0.0;
  double divisor = 1.0;
  /// A row joins a set of k >= 1 rows.
  static rank_one joining(index_t k) {
    const auto kk = static_cast<double>(k);
    return {kk / (kk + 1.0), kk};
  }
  /// A row of a set of k >= 3 rows leaves it.
  static rank_one leaving(index_t k) {
    const auto kk = static_cast<double>(k);
    return {-kk / (kk - 1.0), kk - 2.0};
  }
  /// var'_a from M_aa and the row's y_a.
  DATAMASK_HOST_DEVICE double variance(double m_aa, double y_a) const { return (m_aa + beta * y_a * y_a) / divisor; }
};

/// `changed_values`' first pass, one (row, column) a call (index t d + a): w[t d + a] = w_a and
/// v[t d + a] = w_a y_a for row rows[t].
template <class T>
struct change_weights {
  matrix_view<const T> x;
  const index_t* rows;
  const double* mu;
  const double* diag;  ///< M's diagonal
  rank_one change;
  double* w;
  double* v;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const {
    const index_t d = x.cols;
    const index_t a = i % d;
    const double y = static_cast<double>(x(rows[i / d], a)) - mu[a];
    const double wa = 1.0 / (change.variance(diag[a], y) + epsilon);
    w[i] = wa;
    v[i] = wa * y;
  }
};

/// `changed_values`' last pass, one row a call: the term from t1 = w^T (M o M) w and
/// t2 = (w o y)^T M (w o y), times -scale.
template <class T>
struct changed_value {
  matrix_view<const T> x;
  const index_t* rows;
  const double* mu;
  const double* diag;
  rank_one change;
  const double* t1;
  const double* t2;
  double* val;
  DATAMASK_HOST_DEVICE void operator()(index_t t) const {
    double t3 = 0.0;     // sum_a w_a y_a^2
    double spread = 0.0;  // sum_a (var'_a w_a)^2
    for (index_t a = 0; a < x.cols; ++a) {
      const double y = static_cast<double>(x(rows[t], a)) - mu[a];
      const double var = change.variance(diag[a], y);
      const double wa = 1.0 / (var + epsilon);
      t3 += wa * y * y;
      spread += (var * wa) * (var * wa);
    }
    const double quad = t1[t] + 2.0 * change.beta * t2[t] + change.beta * change.beta * t3 * t3;
    val[t] = -scale * (quad / (change.divisor * change.divisor) - spread);
  }
};

/// The term after `change` (`rank_one`) of each of `count` rows of x: rows, mu (d), M's diagonal
/// (d), M and M o M (d x d, symmetric to rounding, read by rows) and val (count) in the
/// executor's memory. Per block of rows: the weights, two of the executor's quadratic forms (its
/// fastest d x d products: Eigen's on the host) and the values. Blocks of a fixed number of rows,
/// about 2^21 doubles (16 MiB) a matrix: blocks of 2^22 made a DiSF run at 10^5 x 128 1.5% slower
/// on the host, where each call's scratch is new memory; a device wants many rows at once. Each
/// row's value is its own: the same bits on any thread count.
template <class Exec, class T>
void changed_values(Exec& exec, matrix_view<const T> x, const index_t* rows, index_t count, const double* mu,
                    const double* diag, const double* m, const double* q, rank_one change, double* val) {
  if (count <= 0) return;
  const index_t d = x.cols;
  const index_t block = std::min(count, std::max<index_t>(512, (index_t{1} << 21) / d / 512 * 512));
  auto scope = exec.scope();
  double* w = scope.template scratch<double>(block * d);
  double* v = scope.template scratch<double>(block * d);
  double* t1 = scope.template scratch<double>(block);
  double* t2 = scope.template scratch<double>(block);
  double* zero = scope.template scratch<double>(d);
  scope.for_each(d, ops::fill{zero, 0.0});
  for (index_t r0 = 0; r0 < count; r0 += block) {
    const index_t nb = std::min(block, count - r0);
    scope.for_each(nb * d, change_weights<T>{x, rows + r0, mu, diag, change, w, v}, 8.0);
    scope.quadratic_forms(make_matrix_view(static_cast<const double*>(w), nb, d), zero, q, t1);
    scope.quadratic_forms(make_matrix_view(static_cast<const double*>(v), nb, d), zero, m, t2);
    scope.for_each(nb, changed_value<T>{x, rows + r0, mu, diag, change, t1, t2, val + r0},
                   10.0 * static_cast<double>(d));
  }
}

/// `changed_values` on the host, for Eigen's vectors and (symmetric) matrices, on this thread.
template <class T>
void changed_values(matrix_view<const T> x, const index_t* rows, index_t count, const Eigen::VectorXd& mu,
                    const Eigen::MatrixXd& m, const Eigen::MatrixXd& q, rank_one change, double* val) {
  host_executor exec(1);
  const Eigen::VectorXd diag = m.diagonal();
  changed_values(exec, x, rows, count, mu.data(), diag.data(), m.data(), q.data(), change, val);
}

/// The greedy state: the centred scatter M of S (k rows), its mean mu and M o M; a candidate's
/// value is `rank_one::joining`'s (two products with d x d matrices, 4 d^2 flops, in double), and
/// adding it the rank-one update itself. Candidates are scored in fixed chunks of 64 (a chunk's
/// products round alike whatever the thread count). Not submodular: no `diminishing_gains`.
template <class T>
struct state {
  static constexpr index_t chunk = 64;

  matrix_view<const T> x;
  Eigen::VectorXd mu;
  Eigen::MatrixXd m;  // centred scatter
  Eigen::MatrixXd q;  // m o m
  double current = 0.0;
  index_t k = 0;
  int threads = 0;

  explicit state(const greedy_block<T>& b)
      : x(b.embeddings),
        mu(Eigen::VectorXd::Zero(b.embeddings.cols)),
        m(Eigen::MatrixXd::Zero(b.embeddings.cols, b.embeddings.cols)),
        q(Eigen::MatrixXd::Zero(b.embeddings.cols, b.embeddings.cols)),
        threads(b.threads) {}

  [[nodiscard]] Eigen::VectorXd row(index_t i) const {
    return detail::row_as<double>(x, i);
  }

  void chunk_values(const index_t* cands, index_t nc, double* val) const {
    changed_values(x, cands, nc, mu, m, q, rank_one::joining(k), val);
  }

  void accumulate(std::span<const index_t> cands, std::span<double> out, double w) const {
    if (k == 0) return;  // a singleton scores 0
    const auto nc = static_cast<index_t>(cands.size());
    // Work per chunk: two chunk x d x d products. Small rounds stay on this thread.
    detail::parallel_for((nc + chunk - 1) / chunk, threads, [&](index_t b) {
      const index_t c0 = b * chunk;
      const index_t n = std::min(chunk, nc - c0);
      std::vector<double> val(static_cast<std::size_t>(n));
      chunk_values(cands.data() + c0, n, val.data());
      for (index_t c = 0; c < n; ++c) out[c0 + c] += w * (val[c] - current);
    }, 4.0 * static_cast<double>(chunk) * static_cast<double>(x.cols) * static_cast<double>(x.cols));
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

/// Device pass 1: column mean and 1 / sqrt(unbiased var + eps) over the k rows of subset g
/// (index i = g d + j), both in double and in draw order, as on the host.
template <class T>
struct moments {
  batch_view<T> b;
  double* mean;
  double* inv_sd;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const {
    const index_t k = b.subsets.cols;
    const index_t* rows = b.subsets.row(i / b.embeddings.cols);
    const index_t j = i % b.embeddings.cols;
    double mu = 0.0;
    for (index_t t = 0; t < k; ++t) mu += static_cast<double>(b.embeddings(rows[t], j));
    mu /= static_cast<double>(k);
    double var = 0.0;
    for (index_t t = 0; t < k; ++t) {
      const double c = static_cast<double>(b.embeddings(rows[t], j)) - mu;
      var += c * c;
    }
    var /= static_cast<double>(k - 1);
    mean[i] = mu;
    inv_sd[i] = 1.0 / ::sqrt(var + epsilon);
  }
};

/// Device pass 2, the gather: z[(g k + t) d + j] = C((x[r_t, j] - mean) * inv_sd), C the block's
/// element type (float for a 16-bit block).
template <class T>
struct standardize {
  batch_view<T> b;
  const double* mean;
  const double* inv_sd;
  widened_t<T>* z;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const {
    const index_t d = b.embeddings.cols;
    const index_t gt = i / d;  // g k + t
    const index_t j = i % d;
    const index_t m = (gt / b.subsets.cols) * d + j;
    z[i] = static_cast<widened_t<T>>((static_cast<double>(b.embeddings(b.subsets.data[gt], j)) - mean[m]) * inv_sd[m]);
  }
};

/// Device pass 3, the rank-k update: one column b of the strictly lower triangle of subset g's
/// Z^T Z per call (index i = g d + b): partial[i] = sum_{a > b} (sum_t z_ta z_tb)^2.
template <class T>
struct column {
  const T* z;
  index_t k;
  index_t d;
  double* partial;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const {
    const index_t b = i % d;
    const T* zg = z + (i / d) * k * d;
    double off = 0.0;
    for (index_t a = b + 1; a < d; ++a) {
      double c = 0.0;
      for (index_t t = 0; t < k; ++t) c += static_cast<double>(zg[t * d + a]) * static_cast<double>(zg[t * d + b]);
      off += c * c;
    }
    partial[i] = off;
  }
};

/// mu = X^T p / W in place (W = `weight`): a division, as the unbiased statistics divide.
struct divide_by {
  double* values;
  double weight;
  DATAMASK_HOST_DEVICE void operator()(index_t j) const { values[j] /= weight; }
};

/// Column b of G = dF/dSigma (off-diagonal G_ab = -2 scale Sigma_ab / (v_a v_b), diagonal G_bb =
/// 2 scale sum_{a != b} Sigma_ab^2 / (v_a v_b^2), v_a = Sigma_aa + epsilon) and fcol[b] =
/// sum_{a != b} Sigma_ab^2 / (v_a v_b), F's column sums.
struct sigma_gradient {
  const double* sigma;
  index_t d;
  double* g;
  double* fcol;
  DATAMASK_HOST_DEVICE void operator()(index_t b) const {
    const double vb = sigma[b * d + b] + epsilon;
    double diag = 0.0;
    for (index_t a = 0; a < d; ++a) {
      if (a == b) continue;
      const double va = sigma[a * d + a] + epsilon;
      const double sab = sigma[a * d + b];
      diag += sab * sab / (va * vb);
      g[a * d + b] = -2.0 * scale * sab / (va * vb);
    }
    g[b * d + b] = 2.0 * scale * diag / vb;
    fcol[b] = diag;
  }
};

/// grad_i = (grad_i - <G, Sigma>) / (W - 1), from grad_i = (x_i - mu)^T G (x_i - mu).
struct relax_gradient {
  double* grad;
  double gs;
  double wm1;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const { grad[i] = (grad[i] - gs) / wm1; }
};

/// Every item's marginal (`disf::marginals`): F of the set less F without it (`changed_values`).
/// With Y the k centred rows (y_i = x_i - mean), the scatter M = Y^T Y and w0_a = 1 / (M_aa /
/// (k - 1) + 1e-8), F = -scale (w0^T (M o M) w0 / (k - 1)^2 - sum_a (M_aa w0_a / (k - 1))^2).
/// Sets of fewer than two items score 0.
template <class T>
double marginals(const subset_view<T>& s, std::span<double> out) {
  const index_t k = s.subset.size;
  const index_t d = s.embeddings.cols;
  std::fill(out.begin(), out.end(), 0.0);
  if (k < 2) return 0.0;
  check_d_memory(d, 3, "the marginal-gain pass");  // the scatter, its square, a symmetric copy
  const double kk = static_cast<double>(k);
  Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> y(k, d);
  for (index_t t = 0; t < k; ++t) {
    y.row(t) = detail::row_as<double>(s.embeddings, s.subset[t]).transpose();
  }
  const Eigen::VectorXd mean = y.colwise().sum().transpose() / kk;
  y.rowwise() -= mean.transpose();
  Eigen::MatrixXd m = Eigen::MatrixXd::Zero(d, d);
  m.selfadjointView<Eigen::Lower>().rankUpdate(y.transpose());
  m = m.selfadjointView<Eigen::Lower>();
  const Eigen::MatrixXd q = m.cwiseAbs2();
  const Eigen::ArrayXd var = m.diagonal().array() / (kk - 1.0);
  const Eigen::VectorXd w0 = (1.0 / (var + epsilon)).matrix();
  const double value = -scale * (w0.dot(q * w0) / ((kk - 1.0) * (kk - 1.0)) - (var * w0.array()).square().sum());
  if (k == 2) {  // without either item one row is left, which scores 0
    std::fill(out.begin(), out.end(), value);
    return value;
  }
  changed_values(s.embeddings, s.subset.data, k, mean, m, q, rank_one::leaving(k), out.data());
  for (index_t t = 0; t < k; ++t) out[static_cast<std::size_t>(t)] = value - out[static_cast<std::size_t>(t)];
  return value;
}

/// out[t] += weight (val[t] - value): a change of the term, weighed (`swaps::add_one_sided`).
struct add_change {
  double* out;
  const double* val;
  double value;
  double weight;
  DATAMASK_HOST_DEVICE void operator()(index_t t) const { out[t] += weight * (val[t] - value); }
};

/// DiSF: the scatter M = sum (x - c)(x - c)^T and m = sum (x - c) of the set, shifted by the
/// set's mean c at the start (the covariance does not depend on the shift; the shift avoids
/// cancellation); a swap is a rank-two change of M, and the term is recomputed from
/// Sigma = (M - m m^T / k) / (k - 1) in O(d^2).
template <class T>
struct swaps {
  subset_view<T> base;
  Eigen::VectorXd c;
  Eigen::MatrixXd mm;
  Eigen::VectorXd m;
  double k = 0.0;
  double value = 0.0;
  index_t d = 0;

  Eigen::VectorXd row(index_t i) const {
    return row_as<double>(base.embeddings, i) - c;
  }
  double score(const Eigen::MatrixXd& msc, const Eigen::VectorXd& msum) const {
    if (k < 2.0) return 0.0;
    Eigen::MatrixXd sigma = (msc - msum * msum.transpose() / k) / (k - 1.0);
    const Eigen::ArrayXd inv = 1.0 / (sigma.diagonal().array() + epsilon);
    const double all = (sigma.array().square() * (inv.matrix() * inv.matrix().transpose()).array()).sum();
    const double diag = (sigma.diagonal().array().square() * inv.square()).sum();
    return -scale * (all - diag);
  }
  /// The term after the change (row yr out, row ya in: a zero vector for no row) that leaves
  /// `kk` rows, in one pass over the lower triangle without temporaries: about d^2 / 2
  /// multiply-adds (a d x d temporary per pair made polish on DiSF cost seconds per round at
  /// d = 256).
  double swapped(const Eigen::VectorXd& yr, const Eigen::VectorXd& ya, double kk) const {
    if (kk < 2.0) return 0.0;
    thread_local Eigen::VectorXd ms;
    thread_local Eigen::VectorXd inv;
    ms = m - yr + ya;
    inv.resize(d);
    const double ik = 1.0 / kk;
    const double ik1 = 1.0 / (kk - 1.0);
    for (index_t a = 0; a < d; ++a) {
      const double s_aa = (mm(a, a) - yr(a) * yr(a) + ya(a) * ya(a) - ms(a) * ms(a) * ik) * ik1;
      inv(a) = 1.0 / (s_aa + epsilon);
    }
    // Multiplications only in the inner loop (no division), so the compiler vectorises it.
    const double* pr = yr.data();
    const double* pa = ya.data();
    const double* pm = ms.data();
    const double* pi = inv.data();
    double off = 0.0;
    for (index_t b = 0; b < d; ++b) {
      const double* col = mm.col(b).data();
      const double rb = pr[b];
      const double ab = pa[b];
      const double mb = pm[b] * ik;
      double acc = 0.0;
      for (index_t a = b + 1; a < d; ++a) {
        const double s_ab = (col[a] - pr[a] * rb + pa[a] * ab - pm[a] * mb) * ik1;
        acc += s_ab * s_ab * pi[a];
      }
      off += acc * pi[b];
    }
    return -scale * 2.0 * off;
  }
  swaps(const subset_view<T>& v, std::span<const index_t> sel)
      : base(v), k(static_cast<double>(sel.size())), d(v.embeddings.cols) {
    c = Eigen::VectorXd::Zero(d);
    for (index_t i : sel) c += row_as<double>(v.embeddings, i);
    c /= std::max(1.0, k);
    check_d_memory(d, 5, "the polish");  // the scatter, Sigma and a product in score; two in add_one_sided
    mm = Eigen::MatrixXd::Zero(d, d);
    m = Eigen::VectorXd::Zero(d);
    // Blocks of rows, one symmetric rank update each (one rank-one update per row ran at vector
    // speed: most of polish's time at S = 10^4, d = 256). Serial, blocks in order: deterministic.
    constexpr std::size_t block = 256;
    Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> y;
    for (std::size_t b0 = 0; b0 < sel.size(); b0 += block) {
      const auto cnt = static_cast<index_t>(std::min(block, sel.size() - b0));
      y.resize(cnt, d);
      for (index_t r = 0; r < cnt; ++r) y.row(r) = row(sel[b0 + static_cast<std::size_t>(r)]).transpose();
      mm.selfadjointView<Eigen::Lower>().rankUpdate(y.transpose());
      m += y.colwise().sum().transpose();
    }
    mm = mm.selfadjointView<Eigen::Lower>();
    value = score(mm, m);
  }
  void prepare(std::span<const index_t> /*removals*/, std::span<const index_t> /*additions*/) {}
  double delta(index_t r, index_t a) const {
    const Eigen::VectorXd yr = row(r);
    const Eigen::VectorXd ya = row(a);
    return swapped(yr, ya, k) - value;
  }
  /// The exact change of the term when row i leaves the selection (`inside`) or joins it
  /// (`ranked_swap_state`): the swap's formula with one side empty, O(d^2).
  double one_sided(index_t i, bool inside) const {
    const Eigen::VectorXd y = row(i);
    const Eigen::VectorXd none = Eigen::VectorXd::Zero(d);
    return (inside ? swapped(y, none, k - 1.0) : swapped(none, y, k + 1.0)) - value;
  }

  /// weight times `one_sided` of `count` rows on one side, added to out (`executor_ranked_swap_state`):
  /// x (the block), rows and out in the executor's memory. For a selection of 63 rows or more,
  /// `changed_values` on the scatter re-centred at the selection's mean: two products with d x d
  /// matrices per row on the executor (a device's, under CUDA: then only M, M o M and two
  /// d-vectors cross), instead of a d^2 / 2 loop per row on the host; the polish ranks every
  /// candidate, and that loop was half of a DiSF run's time at 10^5 x 128. Smaller selections,
  /// where that formula's terms cancel to fewer digits: `one_sided` on the host (on a device,
  /// the side's ids come down and its values go up: n values, for tiny selections only). The
  /// same values to rounding (both subtract the state's value, which for a large selection is
  /// thousands of times the change; the ranking reads these, each swap's gain is `delta`'s), the
  /// same bits on any thread count.
  template <class Exec>
  void add_one_sided(Exec& exec, matrix_view<const T> x, const index_t* rows, index_t count, bool inside,
                     double weight, double* out) const {
    if (count <= 0) return;
    auto scope = exec.scope();
    if (k < 63.0) {
      std::vector<index_t> ids(static_cast<std::size_t>(count));
      scope.download(rows, std::span<index_t>(ids));
      std::vector<double> change(ids.size());
      detail::parallel_for(count, base.threads, [&](index_t r) {
        change[static_cast<std::size_t>(r)] = one_sided(ids[static_cast<std::size_t>(r)], inside);
      }, static_cast<double>(d) * static_cast<double>(d));
      scope.for_each(count, ops::add_scaled{out, scope.upload(std::span<const double>(change)), weight});
      return;
    }
    const Eigen::VectorXd mu = c + m / k;  // the selection's mean, and its scatter about it
    const Eigen::MatrixXd centred = mm - m * m.transpose() / k;
    const Eigen::MatrixXd q = centred.cwiseAbs2();
    const Eigen::VectorXd diag = centred.diagonal();
    auto up = [&](const auto& values) {
      return static_cast<const double*>(
          scope.upload(std::span<const double>(values.data(), static_cast<std::size_t>(values.size()))));
    };
    double* val = scope.template scratch<double>(count);
    const auto rows_k = static_cast<index_t>(k);
    changed_values(scope, x, rows, count, up(mu), up(diag), up(centred), up(q),
                   inside ? rank_one::leaving(rows_k) : rank_one::joining(rows_k), val);
    scope.for_each(count, add_change{out, val, value, weight});
  }
  void apply(index_t r, index_t a) {
    const Eigen::VectorXd yr = row(r);
    const Eigen::VectorXd ya = row(a);
    mm += ya * ya.transpose() - yr * yr.transpose();
    m += ya - yr;
    value = score(mm, m);
  }
};

}  // namespace detail::disf_impl

/// @brief F_disf(U) = -(1 / 10^4) * sum_{a != b} C_ab^2 on the raw embeddings of the subset.
///
/// Each column of X_U (k x d) is standardised over the selected rows with the unbiased variance,
/// z = (x - mean) / sqrt(var + 1e-8); C = Z^T Z / (k - 1) is the d x d correlation. Cost
/// O(k d min(k, d)) per subset:
/// - 4 k <= d (small rollouts): sum_{a != b} (Z^T Z)_ab^2 = ||Z Z^T||_F^2 - sum_a (Z^T Z)_aa^2,
///   with the k x k Gram Z Z^T in double: k^2 d instead of k d^2 flops. The margin keeps the
///   float d x d update where the two costs are close (double flops are dearer).
/// - otherwise: one symmetric rank-k update of the d x d matrix Z^T Z in the embeddings'
///   precision, the squares summed in double.
/// A subset of fewer than two items scores 0. Models `incremental_objective` (rank-one updates
/// of the centred scatter), `marginal_objective`, `device_evaluable`, `relaxable_objective` and
/// `swappable_objective`.
struct disf {
  static constexpr std::string_view name = "disf";
  static constexpr double epsilon = detail::disf_impl::epsilon;
  static constexpr double scale = detail::disf_impl::scale;

  /// @brief Its cost per item (`costed_objective`): 2 d^2 for a greedy gain (two products with
  /// d x d matrices) and 2 d^2 for the relaxation (the weighted scatter and the quadratic form;
  /// the scatter skips rows with p = 0, counted here as at the uniform start).
  static constexpr item_costs costs_per_item(index_t dims, index_t /*neighbors*/) {
    const auto d = static_cast<double>(dims);
    return {2.0 * d * d, 2.0 * d * d};
  }

  /// @brief Scores one subset.
  template <class T>
  [[nodiscard]] double operator()(const subset_view<T>& s) const {
    using C = widened_t<T>;  // the product's precision: T, float for a 16-bit block
    using mat = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const index_t k = s.subset.size;
    if (k < 2) return 0.0;
    const index_t d = s.embeddings.cols;
    Eigen::VectorXd mean = Eigen::VectorXd::Zero(d);
    for (index_t i : s.subset) {
      mean += detail::row_as<double>(s.embeddings, i);
    }
    mean /= static_cast<double>(k);
    Eigen::VectorXd var = Eigen::VectorXd::Zero(d);
    for (index_t i : s.subset) {
      var += (detail::row_as<double>(s.embeddings, i) - mean).cwiseAbs2();
    }
    var /= static_cast<double>(k - 1);
    const Eigen::VectorXd inv_sd = (var.array() + epsilon).rsqrt().matrix();
    const double km1 = static_cast<double>(k - 1);
    if (4 * k <= d) {
      Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> zd(k, d);
      index_t r = 0;
      for (index_t i : s.subset) {
        zd.row(r++) = ((detail::row_as<double>(s.embeddings, i) - mean).cwiseProduct(inv_sd)).transpose();
      }
      Eigen::MatrixXd gram = Eigen::MatrixXd::Zero(k, k);
      gram.selfadjointView<Eigen::Lower>().rankUpdate(zd);
      double frob = 0.0;  // ||Z Z^T||_F^2 = ||Z^T Z||_F^2
      for (index_t j = 0; j < k; ++j) {
        frob += gram(j, j) * gram(j, j);
        for (index_t i = j + 1; i < k; ++i) frob += 2.0 * gram(i, j) * gram(i, j);
      }
      const double diag = zd.colwise().squaredNorm().squaredNorm();  // sum_a (Z^T Z)_aa^2
      return -scale * std::max(0.0, frob - diag) / (km1 * km1);
    }
    detail::disf_impl::check_d_memory(d, 1, "scoring a subset of more than d / 4 items", sizeof(C));
    mat z(k, d);
    index_t r = 0;
    for (index_t i : s.subset) {
      z.row(r++) = ((detail::row_as<double>(s.embeddings, i) - mean).cwiseProduct(inv_sd)).transpose().template cast<C>();
    }
    Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic> c = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic>::Zero(d, d);
    c.template selfadjointView<Eigen::Lower>().rankUpdate(z.transpose());
    double off = 0.0;
    for (index_t b = 0; b < d; ++b) {
      for (index_t a = b + 1; a < d; ++a) {
        const double v = static_cast<double>(c(a, b));
        off += v * v;
      }
    }
    return -scale * 2.0 * off / (km1 * km1);
  }

  /// @brief The greedy state over a block (see `incremental_objective`).
  template <class T>
  [[nodiscard]] detail::disf_impl::state<T> greedy_state(const greedy_block<T>& b) const {
    detail::disf_impl::check_d_memory(b.embeddings.cols, 2, "the greedy state");  // the scatter, its square
    return detail::disf_impl::state<T>(b);
  }

  /// @brief Exact swap gains on a selection (`swappable_objective`): a swap is a rank-two
  /// change of the selection's scatter, its gain O(d^2).
  template <class T>
  [[nodiscard]] detail::disf_impl::swaps<T> swap_state(const subset_view<T>& block,
                                                       std::span<const index_t> selection) const {
    return detail::disf_impl::swaps<T>(block, selection);
  }

  /// @brief Scores G subsets through a backend's executor (see `device_evaluable`), in chunks
  /// of subsets whose standardised rows (chunk x k x d) stay below about 2^26 values.
  template <class Exec, class T>
  void evaluate_device(Exec& exec, const batch_view<T>& b, double* out) const {
    namespace di = detail::disf_impl;
    if (detail::device_passes::zero_when(b.subsets.cols < 2, exec, b, out)) return;
    const index_t g_count = b.subsets.rows;
    const index_t k = b.subsets.cols;
    const index_t d = b.embeddings.cols;
    const double km1 = static_cast<double>(k - 1);
    const index_t chunk = std::clamp<index_t>((index_t{1} << 26) / std::max<index_t>(1, k * d), 1, g_count);
    double* mean = exec.template scratch<double>(chunk * d);
    double* inv_sd = exec.template scratch<double>(chunk * d);
    widened_t<T>* z = exec.template scratch<widened_t<T>>(chunk * k * d);
    double* partial = exec.template scratch<double>(chunk * d);
    for (index_t g0 = 0; g0 < g_count; g0 += chunk) {
      const index_t cg = std::min(chunk, g_count - g0);
      batch_view<T> part = b;  // subsets g0 .. g0 + cg (dense rows: the backend packs G x k)
      part.subsets = matrix_view<const index_t>(b.subsets.row(g0), cg, k);
      exec.for_each(cg * d, di::moments<T>{part, mean, inv_sd});
      exec.for_each(cg * k * d, di::standardize<T>{part, mean, inv_sd, z});
      exec.for_each(cg * d, di::column<widened_t<T>>{z, k, d, partial});
      // -scale 2 sum_b partial / (k - 1)^2, the host's order of operations.
      exec.for_each(cg, detail::device_passes::scaled_row_sum{partial, d, -scale * 2.0, km1 * km1, out + g0});
    }
  }

  /// @brief d(s) and every item's marginal d(s) - d(s without it) (`marginal_objective`):
  /// one scatter and a rank-one downdate per item, O(k d^2) in double; the formula is at
  /// `detail::disf_impl::marginals`.
  template <class T>
  double marginals(const subset_view<T>& s, std::span<double> out) const {
    return detail::disf_impl::marginals(s, out);
  }

  /// @brief The relaxation of DiSF on p-weighted column statistics (docs/method.md section 6, the
  /// `relaxable_objective` capability): with W = sum p, mu = X^T p / W,
  /// Sigma = sum_i p_i (x_i - mu)(x_i - mu)^T / (W - 1) and v_a = Sigma_aa + 1e-8,
  ///   F(p) = -(1 / 10^4) sum_{a != b} Sigma_ab^2 / (v_a v_b),
  ///   dF/dp_i = ((x_i - mu)^T G (x_i - mu) - <G, Sigma>) / (W - 1),
  /// G = dF/dSigma (`detail::disf_impl::sigma_gradient`). At integral p, Sigma is the unbiased
  /// covariance of the set and Sigma_ab^2 / (v_a v_b) its squared correlation C_ab^2: F_disf
  /// exactly. W is sum p (not v.total), so the gradient is that of F on the whole box.
  /// Through `exec`: W by `reduce`, X^T p by `column_sums`, Sigma by `scatter` (the rows with
  /// p_i > 0), G and F in O(d^2), the gradient by `quadratic_forms`: O(n d^2). W <= 1 gives F = 0
  /// and a zero gradient, as the objective scores sets of fewer than two items.
  template <class Exec, class T>
  double relax(Exec& exec, const relax_view<T>& v, double* grad) const {
    namespace di = detail::disf_impl;
    const index_t n = v.embeddings.rows;
    const index_t d = v.embeddings.cols;
    const double* p = v.p.data();
    auto scope = exec.scope();
    const double wsum = scope.reduce(n, ops::read{p}, ops::plus{}, 0.0);
    if (!(wsum > 1.0)) {
      exec.for_each(n, ops::fill{grad, 0.0});
      return 0.0;
    }
    const double wm1 = wsum - 1.0;
    // A d x d partial per chunk of the scatter and two per thread (executor/host.hpp), then
    // Sigma, G and their copies in the product's precision.
    di::check_d_memory(d, dense::scatter_chunks + 2 * detail::resolve_threads(v.threads) + 4, "the relaxation");
    double* mu = scope.template scratch<double>(d);
    double* sigma = scope.template scratch<double>(d * d);
    double* g = scope.template scratch<double>(d * d);
    double* fcol = scope.template scratch<double>(d);
    scope.column_sums(v.embeddings, p, mu);
    scope.for_each(d, di::divide_by{mu, wsum});
    scope.scatter(v.embeddings, mu, p, sigma);
    scope.for_each(d * d, di::divide_by{sigma, wm1});
    scope.for_each(d, di::sigma_gradient{sigma, d, g, fcol}, 4.0 * static_cast<double>(d));
    const double f = scope.reduce(d, ops::read{fcol}, ops::plus{}, 0.0);
    const double gs = scope.reduce(d * d, ops::product{g, sigma}, ops::plus{}, 0.0);
    scope.quadratic_forms(v.embeddings, mu, g, grad);
    scope.for_each(n, di::relax_gradient{grad, gs, wm1});
    return -scale * f;
  }
};

}  // namespace datamask
