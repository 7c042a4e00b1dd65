// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Vocabulary types: non-owning views valid on host and device.

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "datamask/core/config.hpp"

namespace datamask {

/// @brief Signed index type for rows, items and counts.
using index_t = std::int64_t;

/// @brief A stable 64-bit item id.
using id_t = std::uint64_t;

/// @brief A trivially copyable view of a row-major matrix: `rows` x `cols` with a row stride
/// (in elements). Valid on host and device; it owns nothing.
/// @tparam T the element type, `const`-qualified for read-only views.
template <class T>
struct matrix_view {
  T* data = nullptr;
  index_t rows = 0;
  index_t cols = 0;
  index_t stride = 0;  ///< elements between the starts of consecutive rows

  constexpr matrix_view() = default;  // defaulted: host and device already
  DATAMASK_HOST_DEVICE constexpr matrix_view(T* d, index_t r, index_t c, index_t s)
      : data(d), rows(r), cols(c), stride(s) {}
  /// Dense rows: stride == cols.
  DATAMASK_HOST_DEVICE constexpr matrix_view(T* d, index_t r, index_t c)
      : data(d), rows(r), cols(c), stride(c) {}
  /// A mutable view converts to a read-only one.
  template <class U>
    requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>)
  DATAMASK_HOST_DEVICE constexpr matrix_view(const matrix_view<U>& o)  // NOLINT(implicit)
      : data(o.data), rows(o.rows), cols(o.cols), stride(o.stride) {}

  DATAMASK_HOST_DEVICE constexpr T* row(index_t i) const { return data + i * stride; }
  DATAMASK_HOST_DEVICE constexpr T& operator()(index_t i, index_t j) const {
    return data[i * stride + j];
  }
  [[nodiscard]] DATAMASK_HOST_DEVICE constexpr bool empty() const { return rows == 0 || cols == 0; }
};

/// @brief A trivially copyable view of a contiguous array of row indices (a set of items).
struct index_view {
  const index_t* data = nullptr;
  index_t size = 0;

  constexpr index_view() = default;  // defaulted: host and device already
  DATAMASK_HOST_DEVICE constexpr index_view(const index_t* d, index_t n) : data(d), size(n) {}
  index_view(std::span<const index_t> s)  // NOLINT(implicit)
      : data(s.data()), size(static_cast<index_t>(s.size())) {}
  DATAMASK_HOST_DEVICE constexpr index_t operator[](index_t i) const { return data[i]; }
  DATAMASK_HOST_DEVICE constexpr const index_t* begin() const { return data; }
  DATAMASK_HOST_DEVICE constexpr const index_t* end() const { return data + size; }
};

/// @brief Makes a read-only matrix view of a dense row-major buffer.
template <class T>
constexpr matrix_view<const T> make_matrix_view(const T* data, index_t rows, index_t cols) {
  return {data, rows, cols, cols};
}

static_assert(std::is_trivially_copyable_v<matrix_view<const float>>);
static_assert(std::is_trivially_copyable_v<index_view>);

}  // namespace datamask
