// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Numeric CSV columns: one value per row and column, comma-separated (RFC 4180 quoting
/// allowed), an optional header line of names. Errors name the file, the line and the column.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "datamask/core/error.hpp"
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
/// How a record split: whole, or a quoted field still open at the end of its text (RFC 4180: a
/// quoted field may hold line breaks; the record goes on on the next line), or text after a
/// closing quote.
enum class record_state { whole, open_quote, text_after_quote };

/// Splits one CSV record into fields (RFC 4180): comma-separated, each bare (spaces around it
/// dropped) or quoted ("..." with "" for a quote inside; spaces around the quotes dropped).
inline record_state split(std::string_view rec, std::vector<std::string>& out) {
  out.clear();
  std::size_t i = 0;
  const auto blank = [&](std::size_t at) { return at < rec.size() && (rec[at] == ' ' || rec[at] == '\t' || rec[at] == '\r'); };
  for (;;) {
    while (blank(i)) ++i;
    std::string field;
    if (i < rec.size() && rec[i] == '"') {
      for (++i;; ++i) {
        if (i >= rec.size()) return record_state::open_quote;
        if (rec[i] == '"' && (i + 1 >= rec.size() || rec[i + 1] != '"')) break;
        if (rec[i] == '"') ++i;  // "" inside quotes: one quote
        field += rec[i];
      }
      ++i;  // the closing quote
      while (blank(i)) ++i;
      if (i < rec.size() && rec[i] != ',') return record_state::text_after_quote;
    } else {
      const std::size_t comma = std::min(rec.find(',', i), rec.size());
      field = trim(rec.substr(i, comma - i));
      i = comma;
    }
    out.push_back(std::move(field));
    if (i >= rec.size()) return record_state::whole;
    ++i;  // the comma
  }
}
/// Parses a whole field (spaces around it aside) as a double; false if it is not a number. A
/// number beyond double's range is still one, as numpy reads it: the nearest double (0 or a
/// subnormal below its range, infinite above, which the caller refuses as any infinite value).
inline bool parse_double(std::string_view f, double& out) {
  f = trim(f);
  if (f.empty()) return false;
  const std::string s(f);
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}
}  // namespace detail

/// @brief Reads a numeric CSV file. The first line is a header when any of its fields is not a
/// number. Every row must have the header's number of fields; blank lines before the first
/// record and after the last are skipped, and one between records is refused. Fields
/// may be quoted (RFC 4180: "0.5", "a ""name""", a quoted field across lines).
/// NaN and infinite values are parsed; the caller decides whether they are allowed. A leading
/// UTF-8 byte order mark is skipped.
/// @param text the file's contents; `path` names it in errors
/// @throws invalid_input naming `path` for a ragged row, a non-numeric field, a blank line between
/// rows or a quote left open.
[[nodiscard]] inline csv_table parse_csv(const std::string& text, const std::string& path) {
  // A UTF-8 byte order mark (spreadsheets write one) is not part of the first name.
  const std::string_view bom = "\xEF\xBB\xBF";
  std::istringstream in(text.starts_with(bom) ? text.substr(bom.size()) : text);
  csv_table t;
  std::string line;
  std::size_t line_no = 0;
  std::size_t width = 0;
  std::vector<std::string> fields;
  std::size_t blank = 0;  // the first blank line after a record, if any
  while (std::getline(in, line)) {
    ++line_no;
    if (detail::trim(line).empty()) {
      if (width != 0 && blank == 0) blank = line_no;
      continue;
    }
    // A blank line between rows would shift every later score by one row against the embeddings
    // (reported only as a row count that is one short); blank lines at the end are no rows.
    if (blank != 0) {
      throw invalid_input(path, datamask::detail::concat("line ", blank, " is blank, between rows (line ", line_no,
                                                        " holds the next); every row needs its values"));
    }
    const std::size_t first_line = line_no;
    std::string record = line;
    detail::record_state state;
    while ((state = detail::split(record, fields)) == detail::record_state::open_quote) {
      if (!std::getline(in, line)) {
        throw invalid_input(path, datamask::detail::concat("line ", first_line, ": a quoted field is not closed"));
      }
      ++line_no;
      record += "\n" + line;
    }
    if (state == detail::record_state::text_after_quote) {
      throw invalid_input(path, datamask::detail::concat("line ", first_line, ": text after a quoted field's closing quote"));
    }
    if (width == 0) {
      width = fields.size();
      t.columns.resize(width);
      bool header = false;
      double v = 0.0;
      for (const auto& f : fields) header = header || !detail::parse_double(f, v);
      if (header) {
        t.names = fields;
        continue;
      }
      for (std::size_t c = 0; c < width; ++c) t.names.push_back("column " + std::to_string(c + 1));
    }
    if (fields.size() != width) {
      throw invalid_input(path, datamask::detail::concat("line ", first_line, " has ", fields.size(),
                                                        " fields, expected ", width));
    }
    for (std::size_t c = 0; c < width; ++c) {
      double v = 0.0;
      if (!detail::parse_double(fields[c], v)) {
        throw invalid_input(path, datamask::detail::concat("line ", first_line, ", column ", c + 1,
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
