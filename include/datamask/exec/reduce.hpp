// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The deterministic reduce every executor's `reduce` member is: a tree of fixed chunks,
/// written once against `for_each` and `download`, so that two executors (the host's, a
/// device's) and any thread count give the same bits.

#include <span>
#include <vector>

#include "datamask/core/config.hpp"
#include "datamask/core/types.hpp"

namespace datamask {

/// @brief Terms per chunk of `tree_reduce`: a constant, so the chunks, and with them the bits of
/// every sum, depend on n only, never on the thread count or the device.
inline constexpr index_t reduce_chunk = 256;

namespace detail {

/// out[k chunks + c] = init op term(k, c chunk) op ... op term(k, min(n, (c + 1) chunk) - 1),
/// in index order, for each sum k: thread idx = k chunks + c.
template <class Term, class Op>
struct chunk_fold {
  Term term;
  Op op;
  index_t n;
  index_t chunks;
  double init;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t idx) const {
    const index_t k = idx / chunks;
    const index_t c = idx % chunks;
    double a = init;
    const index_t end = (c + 1) * reduce_chunk < n ? (c + 1) * reduce_chunk : n;
    for (index_t i = c * reduce_chunk; i < end; ++i) a = op(a, term(k, i));
    out[idx] = a;
  }
};

/// values[k count + i], the terms of the levels above the first.
struct partial_at {
  const double* values;
  index_t count;
  DATAMASK_HOST_DEVICE double operator()(index_t k, index_t i) const { return values[k * count + i]; }
};

/// term(i) of a single reduction, as the only sum of a batch.
template <class Term>
struct only_sum {
  Term term;
  DATAMASK_HOST_DEVICE double operator()(index_t /*k*/, index_t i) const { return term(i); }
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

/// @brief `sums` reductions at once: out[k] = init op term(k, 0) op ... op term(k, n - 1), each
/// by `tree_reduce`'s tree, so each has the bits of `tree_reduce` of term(k, .); one pass per
/// level for all of them and one download. Why: on a GPU every `reduce` waits for the device
/// and brings its value back (benchmarks/GPU.md times it), so a
/// search that needs a sum per step is bound by round trips; it can ask for several at once.
/// @param partials `sums * tree_reduce_scratch(n)` doubles in the executor's memory
/// @param term callable `double(index_t k, index_t i)`
/// @param out `sums` values on the host
template <class Exec, class Term, class Op>
void tree_reduce_many(Exec& exec, double* partials, index_t n, index_t sums, Term term, Op op, double init,
                      std::span<double> out) {
  index_t m = n;
  const double* level = nullptr;
  const double work = static_cast<double>(reduce_chunk) * 4.0;
  while (m > reduce_chunk) {
    const index_t next = (m + reduce_chunk - 1) / reduce_chunk;
    if (level == nullptr) {
      exec.for_each(sums * next, detail::chunk_fold<Term, Op>{term, op, m, next, init, partials}, work);
    } else {
      exec.for_each(sums * next,
                    detail::chunk_fold<detail::partial_at, Op>{detail::partial_at{level, m}, op, m, next, init, partials},
                    work);
    }
    level = partials;
    partials += sums * next;
    m = next;
  }
  if (level == nullptr) {  // few terms: one chunk per sum, its value comes back
    exec.for_each(sums, detail::chunk_fold<Term, Op>{term, op, m, 1, init, partials}, 4.0 * static_cast<double>(m));
    level = partials;
    m = 1;
  }
  std::vector<double> host(static_cast<std::size_t>(sums * m));
  exec.download(level, std::span<double>(host));
  for (index_t k = 0; k < sums; ++k) {
    double a = init;
    for (index_t j = 0; j < m; ++j) a = op(a, host[static_cast<std::size_t>(k * m + j)]);
    out[static_cast<std::size_t>(k)] = a;
  }
}

/// @brief init op term(0) op ... op term(n - 1) through `exec`, as a tree: chunks of
/// `reduce_chunk` terms, each folded in index order by one call, then the chunks' results the same
/// way, until at most `reduce_chunk` remain, which are folded on the host in order. The same bits
/// on any thread count and any executor (a parallel reduce would regroup by the team size).
/// @param partials `tree_reduce_scratch(n)` doubles in the executor's memory
/// @param init the identity of `op`
template <class Exec, class Term, class Op>
double tree_reduce(Exec& exec, double* partials, index_t n, Term term, Op op, double init) {
  double out = init;
  tree_reduce_many(exec, partials, n, 1, detail::only_sum<Term>{term}, op, init, std::span<double>(&out, 1));
  return out;
}

}  // namespace datamask
