// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Device functors behind backend/thrust.hpp. Not API.
///
/// Every functor is trivially copyable, holds raw device pointers and has a
/// `DATAMASK_HOST_DEVICE` call operator, so the same code runs as a CUDA kernel body under
/// nvcc and as an OpenMP loop body under g++ (THRUST_DEVICE_SYSTEM_OMP). Sums that decide
/// rewards or logits run sequentially inside one functor call, in the same order as the CPU
/// backend, so the two backends agree bit for bit wherever the maths library agrees.

#include <cmath>
#include <cstdint>

#include <cuda/std/bit>

#include "datamask/core/config.hpp"
#include "datamask/core/detail/chunked_sum.hpp"
#include "datamask/core/detail/sorted_search.hpp"
#include "datamask/core/philox.hpp"
#include "datamask/core/types.hpp"

namespace datamask::detail::thrust_impl {

/// A double mapped to an unsigned integer whose ascending order is the descending order of the
/// doubles (finite values; -0.0 is folded onto +0.0 so that it ties with it, as in the CPU
/// comparison).
DATAMASK_HOST_DEVICE inline std::uint64_t descending_bits(double x) {
  const auto b = ::cuda::std::bit_cast<std::uint64_t>(x + 0.0);
  const std::uint64_t ascending = (b >> 63) != 0u ? ~b : (b | (std::uint64_t{1} << 63));
  return ~ascending;
}

/// u = uniform01(key, id of row, step, stream).
struct uniform_of_row {
  const id_t* ids;
  rng::philox_key key;
  std::uint32_t step;
  std::uint32_t stream;
  DATAMASK_HOST_DEVICE double operator()(index_t row) const {
    return rng::uniform01(key, ids[row], step, stream);
  }
};

struct id_of_row {
  const id_t* ids;
  DATAMASK_HOST_DEVICE id_t operator()(index_t row) const { return ids[row]; }
};

struct not_above {
  double threshold;
  DATAMASK_HOST_DEVICE bool operator()(double u) const { return u <= threshold; }
};

/// Flat rollout entry e = g * m + j (j: position in the active rows sorted by id): writes the
/// descending-order bits of logit + Gumbel noise, and e itself as the sort payload.
struct gumbel_key {
  const double* logits;
  const index_t* rows_by_id;
  const id_t* ids;
  rng::philox_key key;
  std::uint32_t step;
  std::uint32_t first_stream;
  index_t m;
  std::uint64_t* bits;
  DATAMASK_HOST_DEVICE void operator()(index_t e) const {
    const index_t g = e / m;
    const index_t r = rows_by_id[e - g * m];
    const auto stream = static_cast<std::uint32_t>(first_stream + static_cast<std::uint32_t>(g));
    bits[e] = descending_bits(logits[r] + rng::gumbel(key, ids[r], step, stream));
  }
};

struct rollout_of_entry {
  index_t m;
  DATAMASK_HOST_DEVICE std::uint32_t operator()(index_t e) const {
    return static_cast<std::uint32_t>(e / m);
  }
};

/// out[g * k + t] = the row of the t-th entry of rollout g after the segmented sort.
struct take_top {
  const index_t* sorted_entries;
  const index_t* rows_by_id;
  index_t m;
  index_t k;
  index_t* out;
  DATAMASK_HOST_DEVICE void operator()(index_t i) const {
    const index_t g = i / k;
    const index_t t = i - g * k;
    const index_t e = sorted_entries[g * m + t];
    out[i] = rows_by_id[e - g * m];
  }
};

/// part[g nc + c]: chunk c of subset g's gathered values (core/detail/chunked_sum.hpp; with one
/// chunk, the subset's sum).
struct gather_chunk {
  const double* values;
  const index_t* subsets;
  index_t k;
  index_t nc;
  DATAMASK_HOST_DEVICE double operator()(index_t i) const {
    return chunk_sum(k, i % nc, gathered_at{values, subsets + (i / nc) * k});
  }
};

/// key[r], the sort key of row r, with -0 as +0 (a radix sort tells them apart, the read-out
/// order does not).
struct key_of {
  const double* key;
  DATAMASK_HOST_DEVICE double operator()(index_t r) const { return key[r] == 0.0 ? 0.0 : key[r]; }
};

}  // namespace datamask::detail::thrust_impl
