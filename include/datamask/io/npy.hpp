// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief NumPy `.npy` files: a strict header parser (format versions 1, 2 and 3), a read-only
/// memory-mapped view that converts rows on demand (float16 to float32 one block at a time),
/// and a writer.
///
/// Every error is an `invalid_input` whose input is the file name and whose message says what
/// was expected and what was found: "not a .npy file", "truncated: ...", "unsupported dtype".

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <optional>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "datamask/core/error.hpp"
#include "datamask/core/half.hpp"
#include "datamask/io/file.hpp"
#include "datamask/core/types.hpp"

#if __has_include(<sys/mman.h>) && __has_include(<unistd.h>)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define DATAMASK_IO_HAS_MMAP 1
#else
#define DATAMASK_IO_HAS_MMAP 0
#endif

namespace datamask::io {

/// @brief The element types the reader understands (little-endian only).
/// bfloat16 has no NumPy type: ml_dtypes' bfloat16 arrays are saved as 2-byte void ('<V2', '|V2'),
/// which this reader takes to be bfloat16.
enum class npy_dtype { float16, bfloat16, float32, float64, int32, int64, uint64 };

/// @brief A .npy file whose dtype no reader here supports. `descr()` is the dtype as its header
/// gives it, so that a caller can say what its input takes instead of every dtype read here
/// (embeddings take float32, float16 and bfloat16 only).
class unsupported_dtype : public invalid_input {
 public:
  unsupported_dtype(const std::string& file, std::string descr)
      : invalid_input(file, datamask::detail::concat(
                                "unsupported dtype '", descr, "'", (!descr.empty() && descr[0] == '>') ? " (big-endian)" : "",
                                "; expected little-endian float16, bfloat16 (<V2), float32, float64, int32, int64 "
                                "or uint64")),
        descr_(std::move(descr)) {}
  [[nodiscard]] const std::string& descr() const noexcept { return descr_; }

 private:
  std::string descr_;
};

/// @brief The size in bytes of one element.
[[nodiscard]] constexpr std::size_t npy_item_size(npy_dtype t) {
  switch (t) {
    case npy_dtype::float16:
    case npy_dtype::bfloat16: return 2;
    case npy_dtype::float32:
    case npy_dtype::int32: return 4;
    case npy_dtype::float64:
    case npy_dtype::int64:
    case npy_dtype::uint64: return 8;
  }
  return 0;
}

/// @brief The NumPy `descr` string of a dtype ("<f4", ...).
[[nodiscard]] constexpr std::string_view npy_descr(npy_dtype t) {
  switch (t) {
    case npy_dtype::float16: return "<f2";
    case npy_dtype::bfloat16: return "<V2";
    case npy_dtype::float32: return "<f4";
    case npy_dtype::float64: return "<f8";
    case npy_dtype::int32: return "<i4";
    case npy_dtype::int64: return "<i8";
    case npy_dtype::uint64: return "<u8";
  }
  return "";
}

[[nodiscard]] constexpr bool npy_is_float(npy_dtype t) {
  return t == npy_dtype::float16 || t == npy_dtype::bfloat16 || t == npy_dtype::float32 || t == npy_dtype::float64;
}
/// @brief How values of `t` are stored as embeddings (float32, float16, bfloat16); none for the
/// others (float64 and the integers).
[[nodiscard]] constexpr std::optional<element_kind> npy_element(npy_dtype t) {
  switch (t) {
    case npy_dtype::float32: return element_kind::float32;
    case npy_dtype::float16: return element_kind::float16;
    case npy_dtype::bfloat16: return element_kind::bfloat16;
    default: return std::nullopt;
  }
}
/// @brief Whether `t` is one of the integer types (int32, int64, uint64).
[[nodiscard]] constexpr bool npy_is_integer(npy_dtype t) { return !npy_is_float(t); }

/// @brief A parsed `.npy` header.
struct npy_header {
  int major = 1;                     ///< format version 1, 2 or 3
  npy_dtype dtype = npy_dtype::float32;
  std::vector<std::int64_t> shape;   ///< empty: a scalar
  std::size_t data_offset = 0;       ///< bytes before the array data
  std::uint64_t count = 1;           ///< elements: the product of `shape`

  /// @brief shape[0], or 1 for a scalar.
  [[nodiscard]] std::int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  /// @brief The product of shape[1:], 1 for a 1-D array.
  [[nodiscard]] std::int64_t cols() const {
    std::int64_t c = 1;
    for (std::size_t i = 1; i < shape.size(); ++i) c *= shape[i];
    return c;
  }
};

namespace detail {

/// Reads the Python-literal dictionary of a .npy header: string keys; values that are strings,
/// True/False, or tuples of non-negative integers. Nothing else is accepted.
class npy_dict_parser {
 public:
  npy_dict_parser(std::string_view text, const std::string& file) : s_(text), file_(file) {}

  npy_header parse() {
    npy_header h;
    bool have_descr = false, have_order = false, have_shape = false;
    skip();
    sequence('{', '}', [&] {
      const std::string key = string_literal();
      skip();
      expect(':');
      skip();
      if (key == "descr") {
        h.dtype = dtype(string_literal());
        have_descr = true;
      } else if (key == "fortran_order") {
        if (boolean()) {
          fail("Fortran-ordered array; datamask reads C-ordered (row-major) arrays only: "
               "save it with numpy.ascontiguousarray");
        }
        have_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        have_shape = true;
      } else {
        fail(datamask::detail::concat("unexpected key '", key, "' in the header"));
      }
    });
    skip();
    if (i_ != s_.size()) fail("unexpected text after the header dictionary");
    if (!have_descr || !have_order || !have_shape) {
      fail("the header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw invalid_input(file_, "not a valid .npy file: " + what);
  }
  [[nodiscard]] char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) {
      fail(datamask::detail::concat("expected '", c, "' at byte ", i_, " of the header"));
    }
    ++i_;
  }
  /// `open item, item, ... close` (a trailing comma and an empty sequence allowed): calls
  /// `item()` at each item's first non-blank character.
  template <class Item>
  void sequence(char open, char close, Item item) {
    expect(open);
    for (;;) {
      skip();
      if (peek() == close) break;
      item();
      skip();
      if (peek() != ',') break;
      ++i_;
    }
    expect(close);
  }
  std::string string_literal() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string in the header");
    ++i_;
    const std::size_t start = i_;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\') fail("escapes are not expected in the header");
      ++i_;
    }
    if (i_ >= s_.size()) fail("unterminated string in the header");
    std::string out(s_.substr(start, i_ - start));
    ++i_;
    return out;
  }
  bool boolean() {
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      return true;
    }
    if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      return false;
    }
    fail("'fortran_order' must be True or False");
  }
  std::vector<std::int64_t> tuple() {
    std::vector<std::int64_t> out;
    sequence('(', ')', [&] {
      if (peek() < '0' || peek() > '9') fail("the shape must be a tuple of non-negative integers");
      std::int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        const int digit = peek() - '0';
        if (v > (std::numeric_limits<std::int64_t>::max() - digit) / 10) fail("a dimension overflows");
        v = v * 10 + digit;
        ++i_;
      }
      if (peek() == 'L') ++i_;  // Python 2 longs
      out.push_back(v);
      if (out.size() > 32) fail("more than 32 dimensions");
    });
    return out;
  }
  npy_dtype dtype(const std::string& d) const {
    // '<' little-endian, '=' native (little-endian on every platform datamask supports), '|'
    // not applicable: only meaningful for one-byte types, which are not supported anyway.
    if (d.size() >= 2 && (d[0] == '<' || d[0] == '=')) {
      const std::string_view t = std::string_view(d).substr(1);
      if (t == "f2" || t == "e") return npy_dtype::float16;
      if (t == "f4" || t == "f") return npy_dtype::float32;
      if (t == "f8" || t == "d") return npy_dtype::float64;
      if (t == "i4") return npy_dtype::int32;
      if (t == "i8") return npy_dtype::int64;
      if (t == "u8") return npy_dtype::uint64;
    }
    if (d == "<V2" || d == "|V2" || d == "=V2") return npy_dtype::bfloat16;
    throw unsupported_dtype(file_, d);
  }

  std::string_view s_;
  std::size_t i_ = 0;
  const std::string& file_;
};

}  // namespace detail

/// @brief Parses the header at the start of `bytes`, a prefix of a file of `file_size` bytes
/// (`bytes` may be the whole file), and checks that the file holds exactly the array data the
/// header promises.
/// @param name the file name used in error messages
/// @throws invalid_input naming `name`: bad magic, unknown version, malformed header,
/// unsupported dtype, Fortran order, truncated data, trailing bytes, overflowing shape.
[[nodiscard]] inline npy_header parse_npy_header(std::span<const unsigned char> bytes,
                                                 std::uint64_t file_size, const std::string& name) {
  static constexpr unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (bytes.size() < 10 || std::memcmp(bytes.data(), magic, 6) != 0) {
    throw invalid_input(name, "not a .npy file (the file does not start with \\x93NUMPY)");
  }
  npy_header h;
  h.major = bytes[6];
  std::size_t len = 0;
  std::size_t pre = 0;
  if (h.major == 1) {
    len = static_cast<std::size_t>(bytes[8]) | (static_cast<std::size_t>(bytes[9]) << 8);
    pre = 10;
  } else if (h.major == 2 || h.major == 3) {
    if (bytes.size() < 12) throw invalid_input(name, "truncated .npy header");
    len = static_cast<std::size_t>(bytes[8]) | (static_cast<std::size_t>(bytes[9]) << 8) |
          (static_cast<std::size_t>(bytes[10]) << 16) | (static_cast<std::size_t>(bytes[11]) << 24);
    pre = 12;
  } else {
    throw invalid_input(name, datamask::detail::concat("unsupported .npy format version ", h.major,
                                                      ".", int{bytes[7]}, "; expected 1, 2 or 3"));
  }
  constexpr std::size_t max_header = std::size_t{1} << 20;
  if (len > max_header) {
    throw invalid_input(name, datamask::detail::concat(".npy header of ", len,
                                                      " bytes is implausibly long"));
  }
  if (bytes.size() < pre + len) {
    throw invalid_input(name, datamask::detail::concat("truncated: the .npy header needs ", pre + len,
                                                      " bytes, the file has ", bytes.size()));
  }
  std::string_view text(reinterpret_cast<const char*>(bytes.data() + pre), len);
  // The header ends with '\n' and may be padded with spaces; version 3 allows UTF-8, which a
  // header of the three keys never needs.
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) {
    text.remove_suffix(1);
  }
  const npy_header parsed = detail::npy_dict_parser(text, name).parse();
  h.dtype = parsed.dtype;
  h.shape = parsed.shape;
  h.data_offset = pre + len;
  const std::uint64_t item = npy_item_size(h.dtype);
  // The product of the non-zero dimensions must fit (rows() and cols() are computed from them
  // even when another dimension is 0 and the array is empty).
  std::uint64_t nonzero = 1;
  bool empty = false;
  for (std::int64_t dim : h.shape) {
    const auto u = static_cast<std::uint64_t>(dim);
    if (u == 0) {
      empty = true;
      continue;
    }
    if (nonzero > (std::uint64_t{1} << 62) / item / u) {
      throw invalid_input(name, "the shape's element count overflows");
    }
    nonzero *= u;
  }
  const std::uint64_t count = empty ? 0 : nonzero;
  h.count = count;
  const std::uint64_t need = count * item;
  const std::uint64_t have = file_size - std::min<std::uint64_t>(file_size, h.data_offset);
  if (have < need) {
    throw invalid_input(name, datamask::detail::concat("truncated: the header promises ", need,
                                                      " bytes of data, the file holds ", have));
  }
  if (have > need) {
    throw invalid_input(name, datamask::detail::concat("has ", have - need,
                                                      " bytes after the array data the header "
                                                      "describes (", need, " bytes)"));
  }
  return h;
}

/// @brief A `.npy` file opened read-only: memory-mapped where the platform allows it (nothing
/// is read until it is used), read into memory otherwise. Move-only.
class npy_file {
 public:
  npy_file() = default;

  /// @brief Opens and validates `path`.
  /// @throws invalid_input naming `path` when it cannot be opened or is not a valid .npy file.
  explicit npy_file(std::string path) : path_(std::move(path)) { open(); }

  npy_file(const npy_file&) = delete;
  npy_file& operator=(const npy_file&) = delete;
  npy_file(npy_file&& o) noexcept { swap(o); }
  npy_file& operator=(npy_file&& o) noexcept {
    npy_file tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  ~npy_file() { close(); }

  /// @brief Wraps bytes already in memory (a fuzzer's input, a test); `name` is used in errors.
  static npy_file from_bytes(std::vector<unsigned char> bytes, std::string name) {
    npy_file f;
    f.path_ = std::move(name);
    f.owned_ = std::move(bytes);
    f.bytes_ = f.owned_.data();
    f.size_ = f.owned_.size();
    f.header_ = parse_npy_header(std::span<const unsigned char>(f.bytes_, f.size_), f.size_, f.path_);
    return f;
  }

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const npy_header& header() const { return header_; }
  [[nodiscard]] npy_dtype dtype() const { return header_.dtype; }
  [[nodiscard]] index_t rows() const { return header_.rows(); }
  [[nodiscard]] index_t cols() const { return header_.cols(); }
  /// @brief The raw bytes of the array data.
  [[nodiscard]] std::span<const unsigned char> data_bytes() const {
    return {bytes_ + header_.data_offset, static_cast<std::size_t>(header_.count * npy_item_size(header_.dtype))};
  }
  /// @brief The whole file.
  [[nodiscard]] std::span<const unsigned char> file_bytes() const { return {bytes_, size_}; }

  /// @brief A zero-copy float32 view of rows [first, first + count) when the data is float32
  /// and suitably aligned; an empty view otherwise.
  [[nodiscard]] matrix_view<const float> float_view(index_t first, index_t count) const {
    const unsigned char* p = bytes_ + header_.data_offset;
    if (header_.dtype != npy_dtype::float32 ||
        reinterpret_cast<std::uintptr_t>(p) % alignof(float) != 0) {
      return {};
    }
    return {reinterpret_cast<const float*>(p) + first * cols(), count, cols()};
  }

  /// @brief Says that the file's bytes [offset, offset + length) will be read in order: the
  /// kernel reads them ahead (the mapping otherwise reads only the pages touched).
  void advise_reading(std::size_t offset, std::size_t length) const {
#if DATAMASK_IO_HAS_MMAP
    if (map_ == nullptr || length == 0) return;
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t lo = offset / page * page, hi = std::min(size_, offset + length);
    if (hi <= lo) return;
    (void)::madvise(static_cast<unsigned char*>(map_) + lo, hi - lo, MADV_SEQUENTIAL);
    (void)::madvise(static_cast<unsigned char*>(map_) + lo, hi - lo, MADV_WILLNEED);
#else
    (void)offset;
    (void)length;
#endif
  }
  /// @brief advise_reading for the data of elements [first, first + count).
  void advise_elements(index_t first, index_t count) const {
    const auto item = static_cast<std::size_t>(npy_item_size(header_.dtype));
    advise_reading(static_cast<std::size_t>(header_.data_offset) + static_cast<std::size_t>(first) * item,
                   static_cast<std::size_t>(count) * item);
  }

  /// @brief Copies rows [first, first + count) as float32 into `out` (count x cols), converting
  /// from float16 or float64. @throws invalid_input for an integer dtype.
  void read_rows(index_t first, index_t count, float* out) const {
    const std::size_t n = static_cast<std::size_t>(count * cols());
    const std::size_t off = static_cast<std::size_t>(first * cols());
    read_elements(off, n, out);
  }

  /// @brief Copies row `r` (cols values) as float32 into `out`.
  void read_row(index_t r, float* out) const { read_rows(r, 1, out); }

  /// @brief Elements [first, first + count) as double (float dtypes only); count < 0: to the
  /// end. Reads (from the mapped file) those elements' bytes only.
  [[nodiscard]] std::vector<double> read_doubles(index_t first = 0, index_t count = -1) const {
    std::vector<double> out(static_cast<std::size_t>(count < 0 ? header_.count - static_cast<std::uint64_t>(first) : count));
    const unsigned char* p = bytes_ + header_.data_offset;
    require_float();
    advise_elements(first, static_cast<index_t>(out.size()));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = element_as_double(p, static_cast<std::size_t>(first) + i);
    return out;
  }

  /// @brief All elements as 64-bit integers (int32, int64, uint64 reinterpreted).
  /// @throws invalid_input for a float dtype.
  /// Elements [first, first + count) (count < 0: to the end), reading those elements' bytes only.
  /// `T`: std::int64_t, or std::uint64_t for the same bits (ids kept in their own type, no copy).
  template <class T = std::int64_t>
  [[nodiscard]] std::vector<T> read_int64(index_t first = 0, index_t count = -1) const {
    static_assert(std::is_integral_v<T> && sizeof(T) == 8, "read_int64: 64-bit integers");
    if (npy_is_float(header_.dtype)) {
      throw invalid_input(path_, datamask::detail::concat("unsupported dtype '", npy_descr(header_.dtype),
                                                         "' for ids; expected int64 (or int32, uint64)"));
    }
    std::vector<T> out(static_cast<std::size_t>(count < 0 ? header_.count - static_cast<std::uint64_t>(first) : count));
    advise_elements(first, static_cast<index_t>(out.size()));
    const unsigned char* p = bytes_ + header_.data_offset + static_cast<std::size_t>(first) * npy_item_size(header_.dtype);
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (header_.dtype == npy_dtype::int32) {
        std::int32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        out[i] = static_cast<T>(static_cast<std::int64_t>(v));
      } else {
        std::memcpy(&out[i], p + 8 * i, 8);
      }
    }
    return out;
  }

 private:
  void require_float() const {
    if (!npy_is_float(header_.dtype)) {
      throw invalid_input(path_, datamask::detail::concat("unsupported dtype '", npy_descr(header_.dtype),
                                                         "'; expected float32, float16 or bfloat16 (or float64)"));
    }
  }
  [[nodiscard]] double element_as_double(const unsigned char* p, std::size_t i) const {
    switch (header_.dtype) {
      case npy_dtype::float16: {
        std::uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        return half_to_float(h);
      }
      case npy_dtype::bfloat16: {
        std::uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        return bfloat16_to_float(h);
      }
      case npy_dtype::float32: {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        return f;
      }
      case npy_dtype::float64: {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        return d;
      }
      default: return 0.0;
    }
  }
  void read_elements(std::size_t off, std::size_t n, float* out) const {
    require_float();
    const unsigned char* p = bytes_ + header_.data_offset;
    if (const auto kind = npy_element(header_.dtype)) {
      widen(p + element_bytes(*kind) * off, *kind, n, out);
    } else {
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(element_as_double(p, off + i));
    }
  }

  void open() {
#if DATAMASK_IO_HAS_MMAP
    fd_ = open_regular_file(path_);
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      const int err = errno;
      close();
      throw invalid_input(path_, datamask::detail::concat("cannot open: ", std::strerror(err)));
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
      if (m == MAP_FAILED) {
        const int err = errno;
        close();
        throw invalid_input(path_, datamask::detail::concat("cannot map: ", std::strerror(err)));
      }
      map_ = m;
      bytes_ = static_cast<const unsigned char*>(m);
      // A page fault reads that page, not the read-around window (8 MiB on some disks): opening a
      // thousand files to read their headers, or gathering a sample's rows, reads what it uses.
      // What is read whole is announced (advise_reading).
      (void)::madvise(m, size_, MADV_RANDOM);
    }
#else
    const std::string all = read_file(path_);
    owned_.assign(all.begin(), all.end());
    bytes_ = owned_.data();
    size_ = owned_.size();
#endif
    try {
      header_ = parse_npy_header(std::span<const unsigned char>(bytes_, size_), size_, path_);
    } catch (...) {
      close();
      throw;
    }
  }
  void close() noexcept {
#if DATAMASK_IO_HAS_MMAP
    if (map_ != nullptr) ::munmap(map_, size_);
    if (fd_ >= 0) ::close(fd_);
    map_ = nullptr;
    fd_ = -1;
#endif
  }
  void swap(npy_file& o) noexcept {
    std::swap(path_, o.path_);
    std::swap(header_, o.header_);
    std::swap(owned_, o.owned_);
    std::swap(bytes_, o.bytes_);
    std::swap(size_, o.size_);
#if DATAMASK_IO_HAS_MMAP
    std::swap(map_, o.map_);
    std::swap(fd_, o.fd_);
#endif
  }

  std::string path_;
  npy_header header_;
  std::vector<unsigned char> owned_;
  const unsigned char* bytes_ = nullptr;
  std::size_t size_ = 0;
#if DATAMASK_IO_HAS_MMAP
  void* map_ = nullptr;
  int fd_ = -1;
#endif
};

/// @brief What one kind of .npy input takes, as its refusals say it: its name ("embeddings"),
/// the dtypes it takes in words ("float32 (<f4) or float16 (<f2)") and the test of a dtype.
struct npy_input {
  const char* what;
  const char* expected;
  bool (*takes)(npy_dtype);
};

/// @brief Opens a .npy input of kind `in`; a dtype it does not take, whether this reader knows it
/// or not, is refused naming what the input takes (not every dtype the reader knows).
/// @throws invalid_input naming `path`
[[nodiscard]] inline npy_file open_npy(const std::string& path, const npy_input& in) {
  const auto refuse = [&](std::string_view descr) {
    return invalid_input(path, datamask::detail::concat("unsupported dtype '", descr, "'",
                                                       descr.starts_with('>') ? " (big-endian)" : "", " for ", in.what,
                                                       "; expected ", in.expected));
  };
  try {
    npy_file f(path);
    if (!in.takes(f.dtype())) throw refuse(npy_descr(f.dtype()));
    return f;
  } catch (const unsupported_dtype& e) {
    throw refuse(e.descr());
  }
}

/// @brief The bytes of a version-1 `.npy` file holding `data` with `shape` (header padded so the
/// data starts at a multiple of 64 bytes, as NumPy writes it).
[[nodiscard]] inline std::string npy_bytes(npy_dtype dtype, std::span<const std::int64_t> shape,
                                           std::span<const unsigned char> data) {
  std::string dict = "{'descr': '" + std::string(npy_descr(dtype)) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += ",";
    if (i + 1 < shape.size()) dict += " ";
  }
  dict += "), }";
  std::size_t total = 10 + dict.size() + 1;
  const std::size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xFF);
  out += static_cast<char>((dict.size() >> 8) & 0xFF);
  out += dict;
  out.append(reinterpret_cast<const char*>(data.data()), data.size());
  return out;
}

/// @brief The bytes of a `.npy` file of a typed array.
template <class T>
[[nodiscard]] std::string npy_bytes(std::span<const T> values, std::span<const std::int64_t> shape) {
  npy_dtype t{};
  if constexpr (std::is_same_v<T, float>) t = npy_dtype::float32;
  else if constexpr (std::is_same_v<T, double>) t = npy_dtype::float64;
  else if constexpr (std::is_same_v<T, std::int64_t>) t = npy_dtype::int64;
  else if constexpr (std::is_same_v<T, std::uint64_t>) t = npy_dtype::uint64;
  else if constexpr (std::is_same_v<T, std::int32_t>) t = npy_dtype::int32;
  else if constexpr (std::is_same_v<T, std::uint16_t> || std::is_same_v<T, float16>) t = npy_dtype::float16;
  else if constexpr (std::is_same_v<T, bfloat16>) t = npy_dtype::bfloat16;
  else static_assert(sizeof(T) == 0, "datamask::io::npy_bytes: unsupported element type");
  return npy_bytes(t, shape,
                   std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(values.data()),
                                                  values.size_bytes()));
}

}  // namespace datamask::io
