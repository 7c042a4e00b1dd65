// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Numeric CSV columns: one value per row and column, comma-separated, an optional header
/// line of names. Errors name the file, the line and the column.

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "datamask/error.hpp"
#include "datamask/io/file.hpp"

namespace datamask::io {

/// @brief The columns of a numeric CSV file.
struct csv_table {
  std::vector<std::string> names;            ///< header names; "column 1", ... without a header
  std::vector<std::vector<double>> columns;  ///< columns[c][row]
};

namespace detail {
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}
inline std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    out.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos
                                                                          : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}
/// Parses a whole field as a double; false if it is not a number.
inline bool parse_double(std::string_view f, double& out) {
  if (f.empty()) return false;
  const std::string s(f);
  char* end = nullptr;
  errno = 0;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && errno != ERANGE;
}
}  // namespace detail

/// @brief Reads a numeric CSV file. The first line is a header when any of its fields is not a
/// number. Every row must have the header's number of fields; blank lines are skipped.
/// NaN and infinite values are parsed; the caller decides whether they are allowed.
/// @param text the file's contents; `path` names it in errors
/// @throws invalid_input naming `path` for a ragged row or a non-numeric field.
[[nodiscard]] inline csv_table parse_csv(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  csv_table t;
  std::string line;
  std::size_t line_no = 0;
  std::size_t width = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (detail::trim(line).empty()) continue;
    const auto fields = detail::split(line);
    if (width == 0) {
      width = fields.size();
      t.columns.resize(width);
      bool header = false;
      double v = 0.0;
      for (auto f : fields) header = header || !detail::parse_double(f, v);
      if (header) {
        for (auto f : fields) t.names.emplace_back(f);
        continue;
      }
      for (std::size_t c = 0; c < width; ++c) t.names.push_back("column " + std::to_string(c + 1));
    }
    if (fields.size() != width) {
      throw invalid_input(path, datamask::detail::concat("line ", line_no, " has ", fields.size(),
                                                        " fields, expected ", width));
    }
    for (std::size_t c = 0; c < width; ++c) {
      double v = 0.0;
      if (!detail::parse_double(fields[c], v)) {
        throw invalid_input(path, datamask::detail::concat("line ", line_no, ", column ", c + 1,
                                                          ": '", fields[c], "' is not a number"));
      }
      t.columns[c].push_back(v);
    }
  }
  if (width == 0) throw invalid_input(path, "empty CSV file");
  return t;
}

/// @brief Reads and parses the numeric CSV file `path` (see `parse_csv`).
/// @throws invalid_input naming `path` for a missing file or one that is not a regular file, a
/// ragged row or a non-numeric field.
[[nodiscard]] inline csv_table read_csv(const std::string& path) { return parse_csv(read_file(path), path); }

}  // namespace datamask::io
