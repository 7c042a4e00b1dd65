// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Device passes several objectives' evaluators share (`device_evaluable`). Not API.
///
/// Trivially copyable functors with `DATAMASK_HOST_DEVICE` call operators, for an executor's
/// `for_each`; they know nothing of Thrust.

#include <span>
#include <vector>

#include "datamask/concepts.hpp"
#include "datamask/config.hpp"
#include "datamask/detail/sorted_search.hpp"
#include "datamask/objectives/detail/relax_sums.hpp"
#include "datamask/types.hpp"

namespace datamask::detail::device_passes {

/// out[i] = value.
struct fill {
  double* out;
  double value;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const { out[i] = value; }
};

/// out[g] = (scale * sum_a values[g count + a]) / divisor, the sum in index order (the host's
/// order, so the two agree bit for bit).
struct scaled_row_sum {
  const double* values;
  index_t count;
  double scale;
  double divisor;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t g) const {
    double s = 0.0;
    for (index_t a = 0; a < count; ++a) s += values[g * count + a];
    out[g] = scale * s / divisor;
  }
};

/// out[g k, (g + 1) k) = row g of the G x k `rows`, ascending, so that membership in a row is a
/// binary search (`contains`). Heapsort in place: O(k log k) per row, no allocation.
struct sorted_rows {
  matrix_view<const index_t> rows;
  index_t* out;
  DATAMASK_HOST_DEVICE void operator()(index_t g) const {
    const index_t k = rows.cols;
    index_t* a = out + g * k;
    for (index_t t = 0; t < k; ++t) a[t] = rows(g, t);
    for (index_t root = k / 2 - 1; root >= 0; --root) sift_down(a, root, k);
    for (index_t end = k - 1; end > 0; --end) {
      const index_t top = a[0];
      a[0] = a[end];
      a[end] = top;
      sift_down(a, 0, end);
    }
  }
  /// Restores the max-heap below `root` in a[0, end).
  DATAMASK_HOST_DEVICE static void sift_down(index_t* a, index_t root, index_t end) {
    for (index_t child = 2 * root + 1; child < end; child = 2 * root + 1) {
      if (child + 1 < end && a[child] < a[child + 1]) ++child;
      if (!(a[root] < a[child])) return;
      const index_t t = a[root];
      a[root] = a[child];
      a[child] = t;
      root = child;
    }
  }
};

/// Whether `x` is among the `count` ascending values at `sorted`: O(log count).
DATAMASK_HOST_DEVICE inline bool contains(const index_t* sorted, index_t count, index_t x) {
  const index_t at = detail::lower_bound(sorted, count, x);
  return at < count && sorted[at] == x;
}

/// Rows per chunk of `fold`: a constant, so the chunks, and with them the bits of every sum,
/// depend on n only, never on the thread count or the device.
inline constexpr index_t fold_chunk = 256;

struct plus_op {
  DATAMASK_HOST_DEVICE double operator()(double a, double b) const { return a + b; }
};
struct max_op {
  DATAMASK_HOST_DEVICE double operator()(double a, double b) const { return a < b ? b : a; }
};
struct min_op {
  DATAMASK_HOST_DEVICE double operator()(double a, double b) const { return b < a ? b : a; }
};

/// values[i], as a term of `fold`.
struct read {
  const double* values;
  DATAMASK_HOST_DEVICE double operator()(index_t i) const { return values[i]; }
};

/// out[c] = init op term(c rows) op ... op term(min(n, (c + 1) rows) - 1), in index order.
template <class Term, class Op>
struct chunk_fold {
  Term term;
  Op op;
  index_t n;
  double init;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t c) const {
    double a = init;
    const index_t end = (c + 1) * fold_chunk < n ? (c + 1) * fold_chunk : n;
    for (index_t i = c * fold_chunk; i < end; ++i) a = op(a, term(i));
    out[c] = a;
  }
};

/// How many partial results `fold` keeps for n terms (every level of its tree).
inline index_t fold_scratch(index_t n) {
  index_t total = 0;
  for (index_t m = n; m > fold_chunk;) {
    m = (m + fold_chunk - 1) / fold_chunk;
    total += m;
  }
  return total + 1;
}

/// init op term(0) op ... op term(n - 1) through an executor, as a tree of fixed chunks of
/// `fold_chunk` terms, each folded in index order by one thread, the levels until at most
/// `fold_chunk` partials remain, then those on the host in order: the same bits on any thread
/// count (a parallel reduce regroups by the team size). `partials` holds `fold_scratch(n)`
/// doubles in the executor's memory; one double of the result (or at most `fold_chunk` partials)
/// crosses to the host. `init` must be the identity of `op`.
template <class Exec, class Term, class Op>
double fold(Exec& exec, double* partials, index_t n, Term term, Op op, double init) {
  index_t m = n;
  const double* level = nullptr;
  while (m > fold_chunk) {
    const index_t next = (m + fold_chunk - 1) / fold_chunk;
    if (level == nullptr) {
      exec.for_each(next, chunk_fold<Term, Op>{term, op, m, init, partials});
    } else {
      exec.for_each(next, chunk_fold<read, Op>{read{level}, op, m, init, partials});
    }
    level = partials;
    partials += next;
    m = next;
  }
  std::vector<double> host(static_cast<std::size_t>(m));
  if (level == nullptr) {  // few terms: one chunk on the device, its value comes back
    exec.for_each(1, chunk_fold<Term, Op>{term, op, m, init, partials});
    host.resize(1);
    level = partials;
  }
  exec.download(level, std::span<double>(host));
  double a = init;
  for (double v : host) a = op(a, v);
  return a;
}

/// `weighted_sum`'s pass 1: part[c (d + 1) + j] = sum over the rows i of chunk c with p_i != 0
/// of x_ij w(i) (j < d) and of a(i) (j = d), in row order.
template <class T, class W, class A>
struct weighted_column_chunk {
  matrix_view<const T> x;
  const double* p;
  W w;
  A a;
  index_t rows;  ///< rows per chunk
  double* part;
  DATAMASK_HOST_DEVICE void operator()(index_t idx) const {
    const index_t d = x.cols;
    const index_t c = idx / (d + 1);
    const index_t j = idx % (d + 1);
    const index_t end = (c + 1) * rows < x.rows ? (c + 1) * rows : x.rows;
    double acc = 0.0;
    for (index_t i = c * rows; i < end; ++i) {
      if (p[i] == 0.0) continue;
      acc += j < d ? static_cast<double>(x(i, j)) * w(i) : a(i);
    }
    part[idx] = acc;
  }
};

/// tot[j] = sum_c part[c width + j], chunks in order.
struct column_totals {
  const double* part;
  index_t chunks;
  index_t width;
  double* tot;
  DATAMASK_HOST_DEVICE void operator()(index_t j) const {
    double acc = 0.0;
    for (index_t c = 0; c < chunks; ++c) acc += part[c * width + j];
    tot[j] = acc;
  }
};

/// `detail::relax::weighted_sum` through an executor: sum_i w(i) x_i (d values) and sum_i a(i)
/// over the rows with p_i != 0, in the host's chunks and order, so the d + 1 totals are the
/// host's bits. Returns them in executor scratch of d + 1 + `extra` doubles (the extra ones
/// for the caller). One thread per (chunk, column): coalesced reads of a row on a GPU.
template <class Exec, class T, class W, class A>
double* weighted_sum(Exec& exec, const matrix_view<const T>& x, const double* p, W w, A a, index_t extra) {
  const index_t d = x.cols;
  const index_t rows = relax::chunk_rows(x.rows, 64);
  const index_t chunks = (x.rows + rows - 1) / rows;
  double* part = exec.template scratch<double>(chunks * (d + 1));
  double* tot = exec.template scratch<double>(d + 1 + extra);
  exec.for_each(chunks * (d + 1), weighted_column_chunk<T, W, A>{x, p, w, a, rows, part});
  exec.for_each(d + 1, column_totals{part, chunks, d + 1, tot});
  return tot;
}

/// The value of a subset too small to score (fewer rows than an objective needs) is 0: writes
/// it for all G subsets of `b` and returns true when `empty`, else does nothing.
template <class Exec, class T>
bool zero_when(bool empty, Exec& exec, const batch_view<T>& b, double* out) {
  if (empty) exec.for_each(b.subsets.rows, fill{out, 0.0});
  return empty;
}

}  // namespace datamask::detail::device_passes
