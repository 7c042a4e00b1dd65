// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The checks of a corpus's inputs (finite embeddings, finite scores, one score per row,
/// unique ids): one home for the library, datamask-select and the Python module, with the same
/// messages.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <datamask/core/error.hpp>
#include <datamask/core/detail/parallel.hpp>
#include <datamask/core/half.hpp>
#include <datamask/core/types.hpp>

namespace datamask {

/// @brief Throws invalid_input naming `name` at the first value of a row-major array of `kind`
/// (float32, float16 or bfloat16) of `cols` columns that is NaN or infinite; reads the raw bits
/// (no conversion), in parallel chunks. `first_row`: the row `bytes` starts at, for a part of an
/// array (the message names rows of the whole array).
inline void check_finite_values(const std::string& name, std::span<const unsigned char> bytes, element_kind kind,
                                index_t cols, int threads, index_t first_row = 0) {
  const std::size_t item = element_bytes(kind);
  // The exponent and mantissa bits of a 16-bit kind (an exponent of all ones: infinite or NaN).
  const std::uint16_t exp16 = kind == element_kind::bfloat16 ? 0x7F80u : 0x7C00u;
  const std::uint16_t mant16 = kind == element_kind::bfloat16 ? 0x007Fu : 0x03FFu;
  const std::size_t count = bytes.size() / item;
  constexpr std::size_t chunk = std::size_t{1} << 18;
  const auto chunks = static_cast<index_t>((count + chunk - 1) / chunk);
  std::vector<std::int64_t> bad(static_cast<std::size_t>(chunks), -1);
  std::vector<char> nan(static_cast<std::size_t>(chunks), 0);
  ::datamask::detail::parallel_for(chunks, threads, [&](index_t c) {
    const std::size_t lo = static_cast<std::size_t>(c) * chunk;
    const std::size_t hi = std::min(count, lo + chunk);
    for (std::size_t i = lo; i < hi; ++i) {
      bool finite = true;
      bool is_nan = false;
      if (item == 2) {
        std::uint16_t w;
        std::memcpy(&w, bytes.data() + 2 * i, 2);
        finite = (w & exp16) != exp16;
        is_nan = (w & mant16) != 0;
      } else {
        std::uint32_t w;
        std::memcpy(&w, bytes.data() + 4 * i, 4);
        finite = (w & 0x7F800000u) != 0x7F800000u;
        is_nan = (w & 0x007FFFFFu) != 0;
      }
      if (!finite) {
        bad[static_cast<std::size_t>(c)] = static_cast<std::int64_t>(i);
        nan[static_cast<std::size_t>(c)] = is_nan ? 1 : 0;
        return;
      }
    }
  });
  for (std::size_t c = 0; c < bad.size(); ++c) {
    const std::int64_t b = bad[c];
    if (b < 0) continue;
    throw invalid_input(name, ::datamask::detail::concat("row ", first_row + b / cols, ", column ", b % cols, " is ",
                                             nan[c] != 0 ? "NaN" : "infinite", "; every value must be finite"));
  }
}

/// @brief Throws invalid_input naming `name` unless a column of `rows` values has one per row
/// of the corpus (`n`, the rows of `rows_of`).
inline void check_row_count(const std::string& name, std::size_t rows, index_t n, const std::string& rows_of) {
  if (static_cast<index_t>(rows) != n) {
    throw invalid_input(name, ::datamask::detail::concat("has ", rows, " rows, expected ", n, " (the rows of ", rows_of, ")"));
  }
}

/// @brief Throws invalid_input naming `name` at the first score that is NaN or infinite (`v`
/// holds rows from `first_row` on).
inline void check_finite_scores(const std::string& name, std::span<const double> v, index_t first_row = 0) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) {
      throw invalid_input(name, ::datamask::detail::concat("score at row ", first_row + static_cast<index_t>(i), " is ", std::isnan(v[i]) ? "NaN" : "infinite",
                                               "; every score must be finite"));
    }
  }
}

/// @brief An id in decimal as its input holds it: 64 bits read from uint64 (`is_unsigned`) or
/// from int64 (negative ids stay negative).
[[nodiscard]] inline std::string id_text(id_t bits, bool is_unsigned) {
  return is_unsigned ? std::to_string(bits) : std::to_string(static_cast<std::int64_t>(bits));
}

/// @brief Throws invalid_input naming `name` at an id given twice (the smallest such id as
/// unsigned bits, at its first two rows), written as id_text writes it (`ids` holds rows from
/// `first_row` on).
inline void check_unique_ids(const std::string& name, std::span<const id_t> ids, bool is_unsigned = true,
                             index_t first_row = 0) {
  std::vector<index_t> order(ids.size());
  std::iota(order.begin(), order.end(), index_t{0});
  const auto at = [&](index_t r) { return ids[static_cast<std::size_t>(r)]; };
  std::sort(order.begin(), order.end(), [&](index_t a, index_t b) { return at(a) != at(b) ? at(a) < at(b) : a < b; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (at(order[i]) == at(order[i - 1])) {
      throw invalid_input(name, ::datamask::detail::concat("duplicate id ", id_text(at(order[i]), is_unsigned),
                                                           " at rows ", first_row + order[i - 1], " and ", first_row + order[i]));
    }
  }
}

}  // namespace datamask
