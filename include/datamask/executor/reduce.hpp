// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The deterministic reduce every executor's `reduce` member is: a tree of fixed chunks,
/// written once against `for_each` and `download`, so that two executors (the host's, a
/// device's) and any thread count give the same bits.

#include <span>
#include <vector>

#include "datamask/config.hpp"
#include "datamask/types.hpp"

namespace datamask {

/// @brief Terms per chunk of `tree_reduce`: a constant, so the chunks, and with them the bits of
/// every sum, depend on n only, never on the thread count or the device.
inline constexpr index_t reduce_chunk = 256;

namespace detail {

/// out[c] = init op term(c chunk) op ... op term(min(n, (c + 1) chunk) - 1), in index order.
template <class Term, class Op>
struct chunk_fold {
  Term term;
  Op op;
  index_t n;
  double init;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t c) const {
    double a = init;
    const index_t end = (c + 1) * reduce_chunk < n ? (c + 1) * reduce_chunk : n;
    for (index_t i = c * reduce_chunk; i < end; ++i) a = op(a, term(i));
    out[c] = a;
  }
};

/// values[i], the term of the levels above the first.
struct partial_at {
  const double* values;
  DATAMASK_HOST_DEVICE double operator()(index_t i) const { return values[i]; }
};

}  // namespace detail

/// @brief How many doubles of scratch `tree_reduce` needs for n terms (every level of its tree).
[[nodiscard]] inline index_t tree_reduce_scratch(index_t n) {
  index_t total = 0;
  for (index_t m = n; m > reduce_chunk;) {
    m = (m + reduce_chunk - 1) / reduce_chunk;
    total += m;
  }
  return total + 1;
}

/// @brief init op term(0) op ... op term(n - 1) through `exec`, as a tree: chunks of
/// `reduce_chunk` terms, each folded in index order by one call, then the chunks' results the same
/// way, until at most `reduce_chunk` remain, which are folded on the host in order. The same bits
/// on any thread count and any executor (a parallel reduce would regroup by the team size).
/// @param partials `tree_reduce_scratch(n)` doubles in the executor's memory
/// @param init the identity of `op`
template <class Exec, class Term, class Op>
double tree_reduce(Exec& exec, double* partials, index_t n, Term term, Op op, double init) {
  index_t m = n;
  const double* level = nullptr;
  while (m > reduce_chunk) {
    const index_t next = (m + reduce_chunk - 1) / reduce_chunk;
    const double work = static_cast<double>(reduce_chunk) * 4.0;
    if (level == nullptr) {
      exec.for_each(next, detail::chunk_fold<Term, Op>{term, op, m, init, partials}, work);
    } else {
      exec.for_each(next, detail::chunk_fold<detail::partial_at, Op>{detail::partial_at{level}, op, m, init, partials},
                    work);
    }
    level = partials;
    partials += next;
    m = next;
  }
  std::vector<double> host(static_cast<std::size_t>(m));
  if (level == nullptr) {  // few terms: one chunk, its value comes back
    exec.for_each(1, detail::chunk_fold<Term, Op>{term, op, m, init, partials}, 4.0 * static_cast<double>(m));
    host.resize(1);
    level = partials;
  }
  exec.download(level, std::span<double>(host));
  double a = init;
  for (double v : host) a = op(a, v);
  return a;
}

}  // namespace datamask
