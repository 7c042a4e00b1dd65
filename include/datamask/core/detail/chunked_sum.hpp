// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The order of a sum over a subset's rows (a long one: a read-out of 10^5 rows) that
/// the backends' gathered sums (`gather_sum`) and f's quality term keep: fixed chunks of
/// `subset_chunk` positions, each summed in position order from 0, the chunk sums added in chunk
/// order from 0.
///
/// Why chunks: a device sums each chunk on its own thread (a subset of 10^5 rows gives ~100
/// threads per value instead of one thread waiting on 10^5 dependent loads), and the host sums
/// in the same order, so both give the same bits. A subset of at most `subset_chunk` rows (every
/// rollout of a typical run) is one chunk: the plain loop's order.

#include "datamask/core/config.hpp"
#include "datamask/core/types.hpp"

namespace datamask::detail {

/// Positions per chunk of a subset sum.
inline constexpr index_t subset_chunk = 1024;

/// The chunks of a subset of k positions (at least 1).
DATAMASK_HOST_DEVICE inline index_t subset_chunks(index_t k) {
  return k <= subset_chunk ? 1 : (k + subset_chunk - 1) / subset_chunk;
}

/// The value of position t of a subset: values[rows[t]].
struct gathered_at {
  const double* values;
  const index_t* rows;
  DATAMASK_HOST_DEVICE double operator()(index_t t) const { return values[rows[t]]; }
};

/// term(t) summed in position order over chunk c of k positions, from 0. (Term: a functor
/// callable on a device, as `gathered_at`.)
template <class Term>
DATAMASK_HOST_DEVICE double chunk_sum(index_t k, index_t c, const Term& term) {
  const index_t end = (c + 1) * subset_chunk < k ? (c + 1) * subset_chunk : k;
  double acc = 0.0;
  for (index_t t = c * subset_chunk; t < end; ++t) acc += term(t);
  return acc;
}

/// term(0) + ... + term(k - 1) in the chunked order: the chunk sums added in order from 0.
template <class Term>
DATAMASK_HOST_DEVICE double chunked_sum(index_t k, const Term& term) {
  double acc = 0.0;
  for (index_t c = 0; c < subset_chunks(k); ++c) acc += chunk_sum(k, c, term);
  return acc;
}

/// Totals of chunk sums laid out part[(g nc + c) width + j] (subset g, chunk c, value j of
/// `width` per subset): out[g width + j], the chunks added in order from 0 (one call per value).
struct chunk_totals {
  const double* part;
  index_t nc;
  index_t width;
  double* out;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const {
    const index_t g = i / width;
    const index_t j = i % width;
    double acc = 0.0;
    for (index_t c = 0; c < nc; ++c) acc += part[(g * nc + c) * width + j];
    out[i] = acc;
  }
};

}  // namespace datamask::detail
