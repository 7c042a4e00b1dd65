// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The host executor: the `executor` concept on this process's memory and OpenMP threads,
/// which the CPU backend (`eigen_backend`) supplies. Every pass a learner or a relaxation writes
/// against an executor runs here as it runs on a device, with the same functors and the same
/// fixed-tree `reduce`; the dense products use Eigen's blocked kernels instead of the generic
/// `for_each` forms (executor/dense.hpp), with the same definitions. A block of 16-bit elements
/// (core/half.hpp) is read as stored, each row widened to float in cache as a pass reaches it,
/// so its passes give the bits of the float32 block holding the same values.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "datamask/core/detail/parallel.hpp"
#include "datamask/core/detail/row_map.hpp"
#include "datamask/core/half.hpp"
#include "datamask/exec/dense.hpp"
#include "datamask/exec/detail/simd_rows.hpp"
#include "datamask/exec/reduce.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

/// @brief Rows from which the host executor's d x d products (`scatter`, `quadratic_forms`) run
/// in the embedding precision T instead of double. Why a threshold: products in float run at
/// about twice the double rate (half the memory traffic, twice the SIMD lanes), and at large n a
/// relaxation's ascent only needs the gradient's direction; but float rounding (relative 1e-7 per
/// entry) is far above the step of a central finite difference, so small blocks (gradient checks,
/// tiny selections) stay in double. The choice depends on n only: deterministic.
inline constexpr index_t float_product_rows = 4096;

namespace detail {
/// The one scheme of every pass over listed rows (rows anywhere in the block, which the hardware
/// cannot predict): the first `simd_rows::ahead` rows are requested before the pass, then row
/// t + ahead as row t is read. `kernel(x)` runs the pass through the SIMD kernels (which request
/// their rows themselves, spread over each row's lines) where they read T and the CPU has them
/// (a generic lambda: its body is compiled only for such T); else `row(t, x_{rows[t]})` for t in
/// list order.
template <class T, class Kernel, class Row>
void over_listed_rows(matrix_view<const T> x, const index_t* rows, index_t count, Kernel&& kernel, Row&& row) {
  constexpr index_t ahead = simd_rows::ahead;
  for (index_t t = 0; t < std::min(count, ahead); ++t) prefetch(x.row(rows[t]), x.cols);
  if constexpr (simd_rows::reads<T>) {
    if (simd_rows::available()) {
      kernel(x);
      return;
    }
  }
  for (index_t t = 0; t < count; ++t) {
    if (t + ahead < count) prefetch(x.row(rows[t + ahead]), x.cols);
    row(t, x.row(rows[t]));
  }
}
}  // namespace detail

/// @brief out[t] = x_{rows[t]} . s (`dense::lane_dot`, the host executor's `row_dots`) for the
/// `count` rows listed, on the calling thread, each requested from memory some rows before it is
/// read. Why: the greedy's gains read rows scattered over the block (a stochastic round's
/// sample), which the hardware cannot predict; waiting on each row in turn made half of a
/// stochastic-greedy run (benchmarks/RESULTS.md, "Rows read in the order of a list"). A float32
/// or 16-bit row is read with the executor's SIMD kernel where the CPU has it.
template <class T>
void row_dots_of(matrix_view<const T> x, const index_t* rows, index_t count, const double* s, double* out) {
  detail::over_listed_rows(
      x, rows, count, [&](auto xs) { detail::simd_rows::dots(xs, rows, count, s, out); },
      [&](index_t t, const T* r) { out[t] = dense::lane_dot(r, s, x.cols); });
}

/// @brief acc[j] += x_{rows[t], j} w[rows[t]] for the `count` rows listed, in list order (each
/// element's terms added in that order, a product then a sum, as `dense::column_sums` adds its
/// rows), on the calling thread, each row requested from memory some rows before it is read
/// (`row_dots_of`'s reasons: the rows of a selection lie anywhere in the block). For the host's
/// evaluation of a selection (pairwise similarity's sum of unit rows).
template <class T>
void row_sums_of(matrix_view<const T> x, const index_t* rows, index_t count, const double* w, double* acc) {
  detail::over_listed_rows(
      x, rows, count, [&](auto xs) { detail::simd_rows::sums(xs, rows, count, w, acc); },
      [&](index_t t, const T* r) {
        const double wt = w[rows[t]];
        for (index_t j = 0; j < x.cols; ++j) acc[j] += static_cast<double>(r[j]) * wt;
      });
}

/// @brief Runs an executor's passes on the host: `for_each` on up to `threads` OpenMP threads (0:
/// all; a pass too small to repay a parallel region runs on the calling thread), scratch and
/// uploads in host memory owned by the executor, `resident` and `download` as the host arrays
/// themselves. Not copyable: `scope()` gives an executor for a shorter-lived set of buffers.
class host_executor {
 public:
  explicit host_executor(int threads = 0) : threads_(threads) {}
  host_executor(const host_executor&) = delete;
  host_executor& operator=(const host_executor&) = delete;
  host_executor(host_executor&&) noexcept = default;
  host_executor& operator=(host_executor&&) noexcept = default;
  ~host_executor() = default;

  /// @brief The threads a pass may use (0: all).
  [[nodiscard]] int threads() const { return threads_; }

  /// @brief An executor with the same threads and buffers of its own, freed with it.
  [[nodiscard]] host_executor scope() const { return host_executor(threads_); }

  /// @brief f(i) for every i in [0, n), on up to `threads()` threads when n times
  /// `work_per_item` (operations) repays a parallel region.
  template <class F>
  void for_each(index_t n, F f, double work_per_item = 16.0) {
    // Consecutive items in blocks of about `block_work` operations: one dynamic dispatch per
    // block, not per item (a pass over 10^6 rows of a few operations each).
    const auto per = static_cast<index_t>(std::max(1.0, std::ceil(block_work / std::max(work_per_item, 1.0))));
    const index_t blocks = (n + per - 1) / per;
    detail::parallel_for(
        blocks, threads_,
        [&](index_t b) {
          for (index_t i = b * per; i < std::min(n, (b + 1) * per); ++i) f(i);
        },
        work_per_item * static_cast<double>(per));
  }

  /// @brief `n` uninitialised values, owned by the executor.
  template <class U>
  U* scratch(index_t n) {
    std::shared_ptr<U[]> buffer(new U[static_cast<std::size_t>(std::max<index_t>(n, 1))]);
    U* p = buffer.get();
    buffers_.push_back(std::move(buffer));
    return p;
  }
  /// @brief `host`'s values in a new buffer owned by the executor.
  template <class U>
  U* upload(std::span<const U> host) {
    U* p = scratch<U>(static_cast<index_t>(host.size()));
    std::copy(host.begin(), host.end(), p);
    return p;
  }
  /// @brief Host memory is the executor's memory: `host` itself.
  template <class U>
  const U* resident(std::span<const U> host, const std::shared_ptr<const void>& /*owner*/) {
    return host.data();
  }
  /// @brief Copies `host.size()` values at `from` into `host`.
  template <class U>
  void download(const U* from, std::span<U> host) {
    std::copy(from, from + host.size(), host.begin());
  }

  /// @brief init op term(0) op ... op term(n - 1), the fixed tree of `tree_reduce`.
  template <class Term, class Op>
  double reduce(index_t n, Term term, Op op, double init) {
    partials_.resize(static_cast<std::size_t>(tree_reduce_scratch(n)));
    return tree_reduce(*this, partials_.data(), n, term, op, init);
  }

  /// @brief The k in [0, n) with pred(k), ascending, into `out`; returns how many.
  template <class Pred>
  index_t keep_if(index_t n, Pred pred, index_t* out) {
    index_t count = 0;
    for (index_t k = 0; k < n; ++k) {
      if (pred(k)) out[count++] = k;
    }
    return count;
  }

  /// @brief `dense::column_sums` in the same chunks: the SIMD kernel where the CPU has it (float32
  /// and 16-bit blocks), else Eigen's vectorised row updates.
  template <class T>
  void column_sums(matrix_view<const T> x, const double* w, double* out) {
    const index_t n = x.rows;
    const index_t d = x.cols;
    const index_t rows = dense::chunk_rows(n, dense::column_chunks);
    const index_t chunks = (n + rows - 1) / rows;
    Eigen::MatrixXd part = Eigen::MatrixXd::Zero(d, chunks);
    for_each(chunks, [&](index_t c) {
      if constexpr (detail::simd_rows::reads<T>) {
        if (detail::simd_rows::available()) {
          detail::simd_rows::accumulate(x, c * rows, std::min(n, (c + 1) * rows), w, part.col(c).data());
          return;
        }
      }
      row_buffer<T> buf(d);
      for (index_t i = c * rows; i < std::min(n, (c + 1) * rows); ++i) {
        if (w[i] != 0.0) part.col(c) += row(x, i, buf).template cast<double>() * w[i];
      }
    }, static_cast<double>(rows * d));
    Eigen::Map<Eigen::VectorXd> total(out, d);
    total.setZero();
    for (index_t c = 0; c < chunks; ++c) total += part.col(c);
  }

  /// @brief `dense::row_dots` (the same four-lane dot), rows in chunks over the threads (the SIMD
  /// kernel where the CPU has it, for float32 and 16-bit blocks).
  template <class T>
  void row_dots(matrix_view<const T> x, const double* s, double* out) {
    if constexpr (detail::simd_rows::reads<T>) {
      const index_t d = x.cols;
      const index_t blocks = (x.rows + block_rows - 1) / block_rows;
      for_each(blocks, [&](index_t bi) {
        const index_t first = bi * block_rows;
        const index_t end = std::min(x.rows, first + block_rows);
        if (detail::simd_rows::available()) {
          detail::simd_rows::dots(x, first, end, s, out);
          return;
        }
        row_buffer<T> buf(d);
        for (index_t i = first; i < end; ++i) {
          out[i] = dense::lane_dot(row(x, i, buf).data(), s, d);
        }
      }, 2.0 * static_cast<double>(block_rows * d));
    } else {
      dense::row_dots(*this, x, s, out);
    }
  }

  /// @brief `dense::scatter` as one symmetric rank update per block of rows (in T, float for a
  /// 16-bit T, from `float_product_rows` rows on, else in double), accumulated in double per
  /// chunk.
  template <class T>
  void scatter(matrix_view<const T> x, const double* mu, const double* w, double* sigma) {
    if (x.rows >= float_product_rows) {
      scatter_in<widened_t<T>>(x, mu, w, sigma);
    } else {
      scatter_in<double>(x, mu, w, sigma);
    }
  }

  /// @brief `dense::quadratic_forms` as one (block x d) (d x d) product per block of rows (in T,
  /// float for a 16-bit T, from `float_product_rows` rows on, else in double).
  template <class T>
  void quadratic_forms(matrix_view<const T> x, const double* mu, const double* g, double* out) {
    if (x.rows >= float_product_rows) {
      quadratic_forms_in<widened_t<T>>(x, mu, g, out);
    } else {
      quadratic_forms_in<double>(x, mu, g, out);
    }
  }

 private:
  /// Rows per block of the d x d products: 512 rows x 256 columns of float is 512 KiB, about an
  /// L2 cache. A fixed number, so the blocks' partials do not depend on the thread count.
  static constexpr index_t block_rows = 512;
  /// Operations per block of `for_each`: enough to repay a dynamic dispatch many times over,
  /// small enough to balance a pass over a few thousand rows on the threads.
  static constexpr double block_work = 32768.0;

  /// Room for one row widened to float: d floats for a 16-bit block, none otherwise.
  template <class T>
  struct row_buffer {
    explicit row_buffer(index_t d) : values(half_precision<T> ? static_cast<std::size_t>(d) : 0) {}
    std::vector<float> values;
  };

  /// Row i of x as Eigen reads it: the block's own memory, or a 16-bit row widened into `buf`.
  template <class T>
  static auto row(matrix_view<const T> x, index_t i, row_buffer<T>& buf) {
    if constexpr (half_precision<T>) {
      widen(x.row(i), x.cols, buf.values.data());
      return Eigen::Map<const Eigen::VectorXf>(buf.values.data(), x.cols);
    } else {
      return Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(x.row(i), x.cols);
    }
  }

  template <class C, class T>
  void scatter_in(matrix_view<const T> x, const double* mu, const double* w, double* sigma) {
    using cmat = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const index_t n = x.rows;
    const index_t d = x.cols;
    const index_t rows = dense::chunk_rows(n, dense::scatter_chunks);
    const index_t chunks = (n + rows - 1) / rows;
    const Eigen::Matrix<C, Eigen::Dynamic, 1> muc = Eigen::Map<const Eigen::VectorXd>(mu, d).template cast<C>();
    std::vector<Eigen::MatrixXd> spart(static_cast<std::size_t>(chunks));
    for_each(chunks, [&](index_t c) {
      Eigen::MatrixXd acc = Eigen::MatrixXd::Zero(d, d);
      Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic> part(d, d);
      cmat y(block_rows, d);
      row_buffer<T> buf(d);
      index_t cnt = 0;
      auto flush = [&] {
        if (cnt == 0) return;
        part.setZero();
        part.template selfadjointView<Eigen::Lower>().rankUpdate(y.topRows(cnt).transpose());
        acc.template triangularView<Eigen::Lower>() += part.template cast<double>();
        cnt = 0;
      };
      for (index_t i = c * rows; i < std::min(n, (c + 1) * rows); ++i) {
        if (!(w[i] > 0.0)) continue;
        y.row(cnt) = (row(x, i, buf).template cast<C>() - muc).transpose() * static_cast<C>(std::sqrt(w[i]));
        if (++cnt == block_rows) flush();
      }
      flush();
      spart[static_cast<std::size_t>(c)] = std::move(acc);
    }, static_cast<double>(rows * d * d));
    Eigen::Map<Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> out(sigma, d, d);
    Eigen::MatrixXd total = Eigen::MatrixXd::Zero(d, d);
    for (index_t c = 0; c < chunks; ++c) total += spart[static_cast<std::size_t>(c)];
    out = total.selfadjointView<Eigen::Lower>();
  }

  template <class C, class T>
  void quadratic_forms_in(matrix_view<const T> x, const double* mu, const double* g, double* out) {
    using cmat = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const index_t n = x.rows;
    const index_t d = x.cols;
    const Eigen::Matrix<C, Eigen::Dynamic, 1> muc = Eigen::Map<const Eigen::VectorXd>(mu, d).template cast<C>();
    const Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> gd(g, d, d);
    // G as it is in double (no d x d copy per call: DiSF's greedy gains call this per 64 rows).
    const auto gc = [&] {
      if constexpr (std::is_same_v<C, double>) {
        return gd;
      } else {
        return cmat(gd.template cast<C>());
      }
    }();
    const index_t blocks = (n + block_rows - 1) / block_rows;
    for_each(blocks, [&](index_t bi) {
      const index_t r0 = bi * block_rows;
      const index_t r1 = std::min(n, r0 + block_rows);
      cmat y(r1 - r0, d);
      row_buffer<T> buf(d);
      for (index_t i = r0; i < r1; ++i) y.row(i - r0) = (row(x, i, buf).template cast<C>() - muc).transpose();
      cmat z(r1 - r0, d);
      z.noalias() = y * gc;
      for (index_t i = r0; i < r1; ++i) out[i] = static_cast<double>(y.row(i - r0).dot(z.row(i - r0)));
    }, static_cast<double>(block_rows * d * d));
  }

  int threads_ = 0;
  std::vector<std::shared_ptr<void>> buffers_;
  std::vector<double> partials_;  ///< `reduce`'s tree, reused
};

}  // namespace datamask
