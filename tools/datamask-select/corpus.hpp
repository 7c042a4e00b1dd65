// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: the corpus (memory-mapped embedding shards, quality columns, ids), its
// validation, its content hash, and its split into blocks.

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <datamask/datamask.hpp>
#include <datamask/core/input_checks.hpp>
#include <datamask/io/csv.hpp>
#include <datamask/io/file.hpp>
#include <datamask/io/npy.hpp>
#include <datamask/run/pipeline.hpp>
#include <datamask/core/synthetic.hpp>
#include <datamask/frontend/corpus.hpp>

#include "args.hpp"
#include "paths.hpp"

namespace dmselect {

using datamask::id_t;
using datamask::invalid_input;

using datamask::hash_bytes;
using datamask::mix64;

/// The program's corpus: the shared corpus (datamask/frontend/corpus.hpp) viewing the memory
/// this object keeps (the memory-mapped shards, the ids, the --demo rows), and what the report
/// says of the inputs. Moved, never copied (the views point into it).
struct corpus : dmfront::corpus {
  std::vector<datamask::io::npy_file> files;  // the embedding shards
  std::vector<id_t> id_values;                // what `ids` views (read from --ids: the window's rows)
  std::string ids_source;
  std::uint64_t fingerprint = 0;              // the inputs' names, sizes and shapes (input_fingerprint)
  std::vector<std::pair<index_t, std::uint64_t>> group_hashes;  // the content hash of each group read
  std::vector<std::pair<index_t, std::uint64_t>> rows_hashes;   // of each group's rows of the score and id files
  std::uint64_t hash = 0;                     // input_hash of the fingerprint and group_hashes (the program sets it)
  std::vector<float> demo_rows;  // the --demo corpus lives here

  corpus() = default;
  corpus(corpus&&) = default;
  corpus& operator=(corpus&&) = default;
  corpus(const corpus&) = delete;
  corpus& operator=(const corpus&) = delete;
};

/// Names as messages list them: "a, b, c".
inline std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : ", ") + (names[i].empty() ? "''" : names[i]);
  return out;
}

namespace detail {

inline bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The embedding shards, in order: each file as given; a directory contributes its *.npy files
/// in name order.
inline std::vector<std::string> embedding_files(const std::vector<std::string>& inputs) {
  return listed_files(
      inputs, [](const std::filesystem::path& p) { return ends_with(p.string(), ".npy"); },
      [](const std::string& dir) { throw invalid_input(dir, "directory holds no .npy files"); });
}

using datamask::io::npy_input;
inline constexpr npy_input embeddings_input{"embeddings", "float32 (<f4), float16 (<f2) or bfloat16 (<V2)",
                                            [](datamask::io::npy_dtype t) {
  return datamask::io::npy_element(t).has_value();
}};
inline constexpr npy_input quality_input{"quality scores", "float32, float64, float16 or bfloat16", &datamask::io::npy_is_float};

inline constexpr npy_input ids_input{"ids", "int64 (or int32, uint64)", &datamask::io::npy_is_integer};
using datamask::io::open_npy;

/// Opens one embedding shard and checks its header (2-D, float32, float16 or bfloat16, non-empty, the same
/// d as `first`), and appends it to `k`. Reads none of its values.
inline void open_shard(corpus& k, const std::string& path, const std::string& first) {
  datamask::io::npy_file f = open_npy(path, embeddings_input);
  const auto dt = f.dtype();
  if (f.header().shape.size() != 2) {
    throw invalid_input(path, datamask::detail::concat("embeddings must be a 2-D array (n x d), found ",
                                                      f.header().shape.size(), f.header().shape.size() == 1 ? " dimension" : " dimensions"));
  }
  if (f.rows() == 0 || f.cols() == 0) {
    throw invalid_input(path, datamask::detail::concat("empty array (", f.rows(), " x ", f.cols(), ")"));
  }
  if (k.d != 0 && f.cols() != k.d) {
    throw invalid_input(path, datamask::detail::concat("has ", f.cols(), " columns, but ", first, " has ", k.d,
                                                      "; every shard needs the same d"));
  }
  k.add_shard(f.data_bytes().data(), *datamask::io::npy_element(dt), f.rows(), f.cols(), path);
  k.files.push_back(std::move(f));
}

/// Whether a CSV column's name says it holds ids, not scores: id, idx or *_id (any case).
inline bool id_like(std::string name) {
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return name == "id" || name == "idx" || ends_with(name, "_id");
}

/// Whether a CSV header name marks a row index, not scores: no name, or pandas' "Unnamed: N"
/// (what `DataFrame.to_csv` writes for its index, and what pandas calls an unnamed column).
inline bool row_index_like(const std::string& name) {
  constexpr std::string_view unnamed = "Unnamed: ";
  return name.empty() ||
         (name.starts_with(unnamed) && name.size() > unnamed.size() &&
          std::all_of(name.begin() + unnamed.size(), name.end(), [](unsigned char ch) { return std::isdigit(ch) != 0; }));
}

/// The score columns a CSV --quality value reads: the one it names (refused when two columns bear
/// its name), or every column of a file with no id-like or row-index column (a whole file's ids
/// or row numbers would be summed into the quality score).
inline std::vector<std::size_t> csv_columns(const datamask::io::csv_table& t, const quality_source& s) {
  const std::string names = joined(t.names);
  if (!s.column.empty()) {
    const auto at = std::find(t.names.begin(), t.names.end(), s.column);
    if (at == t.names.end()) throw invalid_input(s.file, "no column '" + s.column + "'; its columns: " + names);
    const auto col = static_cast<std::size_t>(at - t.names.begin());
    const auto again = std::find(std::next(at), t.names.end(), s.column);
    if (again != t.names.end()) {
      throw invalid_input(s.file, "two columns are named '" + s.column + "' (columns " + std::to_string(col + 1) +
                          " and " + std::to_string(again - t.names.begin() + 1) + "), so --quality " + s.file + ":" +
                          s.column + " is ambiguous; rename one");
    }
    return {col};
  }
  for (std::size_t c = 0; c < t.names.size(); ++c) {
    const std::string& n = t.names[c];
    const std::string what = id_like(n) ? "column '" + n + "' looks like ids"
                             : row_index_like(n)
                                 ? "column " + std::to_string(c + 1) + (n.empty() ? " has no name" : " is named '" + n + "'") +
                                       " and is likely a row index (pandas' to_csv writes one unless index=False)"
                                 : std::string();
    if (!what.empty()) {
      throw invalid_input(s.file, what + ", not scores (every column of a CSV file is read as a score column); name "
                          "the score columns: --quality " + s.file + ":NAME (its columns: " + names + ")");
    }
  }
  std::vector<std::size_t> all(t.names.size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  return all;
}

/// The content hash of rows [first, last) of a column: the bytes that hold them.
inline std::uint64_t rows_hash(std::span<const unsigned char> data, std::size_t item, std::pair<index_t, index_t> rows,
                               int threads) {
  const auto lo = static_cast<std::size_t>(rows.first) * item, hi = static_cast<std::size_t>(rows.second) * item;
  return hash_bytes(data.subspan(lo, hi - lo), threads);
}

/// What reading one --quality or --ids input gives the hashes: its name and size for the
/// fingerprint, and a function that hashes the rows of a group.
struct read_input {
  std::uint64_t fingerprint = 0;
  std::function<std::uint64_t(std::pair<index_t, index_t>)> rows_hash;
};

/// The fingerprint of an input file: its name (not its folder: a plan made on one machine serves
/// workers that mount the inputs elsewhere) and its size.
inline std::uint64_t file_fingerprint(const std::string& path, std::uint64_t bytes) {
  const std::string name = std::filesystem::path(path).filename().string();
  return mix64(mix64(bytes) ^ hash_bytes(std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(name.data()), name.size()), 1));
}

/// Reads one --quality value into `k`, the window's rows: a CSV file's columns ("file
/// (column)"; csv_columns says which; the file is parsed whole), or a 1-D .npy array of floats
/// (its window's rows only). Checks that it has one score per row of the corpus.
inline read_input add_quality_source(corpus& k, const std::string& q, const std::string& rows_of, int threads,
                                     read_once& read) {
  const quality_source s = quality_source_of(q);
  constexpr const char* what = "a score column given twice would weigh double; give each once (--quality-weights "
                               "weighs a column)";
  const auto [lo, hi] = k.window;
  if (s.csv()) {
    const std::string all = datamask::io::read_file(s.file);
    const auto t = datamask::io::parse_csv(all, s.file);
    auto read_columns = std::make_shared<std::vector<std::vector<double>>>();
    std::uint64_t names = file_fingerprint(s.file, all.size());
    for (const std::size_t col : csv_columns(t, s)) {
      read.check(s.file, "column " + std::to_string(col + 1), what);
      const std::string name = s.file + " (" + t.names[col] + ")";
      datamask::check_row_count(name, t.columns[col].size(), k.n, rows_of);
      read_columns->push_back(t.columns[col]);
      k.add_quality(name, std::vector<double>(t.columns[col].begin() + lo, t.columns[col].begin() + hi), rows_of);
      names = mix64(names ^ file_fingerprint(t.names[col], col));
    }
    // A CSV's rows are hashed as the values read (the text of a group's rows is not delimited).
    return {names, [read_columns, threads](std::pair<index_t, index_t> rows) {
              std::uint64_t h = 0;
              for (const auto& c : *read_columns) {
                h = mix64(h ^ rows_hash({reinterpret_cast<const unsigned char*>(c.data()), c.size() * sizeof(double)},
                                        sizeof(double), rows, threads));
              }
              return h;
            }};
  }
  read.check(q, "", what);
  auto f = std::make_shared<datamask::io::npy_file>(open_npy(q, quality_input));
  if (f->header().shape.size() != 1 && !(f->header().shape.size() == 2 && f->cols() == 1)) {
    throw invalid_input(q, "quality scores must be a 1-D array (one score per row)");
  }
  datamask::check_row_count(q, static_cast<std::size_t>(f->header().count), k.n, rows_of);
  k.add_quality(q, f->read_doubles(lo, hi - lo), rows_of);
  return {file_fingerprint(q, f->file_bytes().size()), [f, threads](std::pair<index_t, index_t> rows) {
            return rows_hash(f->data_bytes(), datamask::io::npy_item_size(f->dtype()), rows, threads);
          }};
}

/// Reads the ids file (1-D, one id per row, no id twice in the window) into `k`, the window's
/// rows: int64 (or int32) ids, or uint64 ids, which keep their type (`ids_unsigned`).
inline read_input add_ids(corpus& k, const std::string& path, const std::string& rows_of, int threads) {
  auto f = std::make_shared<datamask::io::npy_file>(open_npy(path, ids_input));
  if (f->header().shape.size() != 1) throw invalid_input(path, "ids must be a 1-D array");
  datamask::check_row_count(path, static_cast<std::size_t>(f->header().count), k.n, rows_of);
  const auto [lo, hi] = k.window;
  k.id_values = f->read_int64<id_t>(lo, hi - lo);  // int64 ids: their bits
  k.view_ids(k.id_values, f->dtype() == datamask::io::npy_dtype::uint64, path, rows_of);
  k.ids_source = path;
  return {file_fingerprint(path, f->file_bytes().size()), [f, threads](std::pair<index_t, index_t> rows) {
            return rows_hash(f->data_bytes(), datamask::io::npy_item_size(f->dtype()), rows, threads);
          }};
}

}  // namespace detail

/// What a worker reads of the corpus: the blocks it runs (`mine`) decide the groups whose
/// embedding files it checks and hashes; `every_row` gives it every row's scores and ids (it
/// plans the corpus alone: one process, or a shard without --plan that prunes or calibrates),
/// otherwise those of its groups only. `embeddings`: false for `datamask-select plan`, which reads
/// the embedding shards' headers and the calibration sample's rows only.
struct worker_reading {
  index_t worker = 0, workers = 1;
  std::function<bool(const datamask::corpus_layout&)> every_row = [](const datamask::corpus_layout&) { return true; };
  bool embeddings = true;
};

/// Opens every input, then validates and hashes what this worker reads (`worker_reading`): the
/// embedding shards of its groups (every value finite), the window's scores and ids (finite, no
/// id twice in the window). Throws invalid_input naming the file and row. The fingerprint chains
/// every input's name, size and shape (read from the headers, by every worker); each group's
/// content hash chains its shards' bytes and its rows of each score column and of the ids.
inline corpus load_corpus(const config& c, const worker_reading& who = {}) {
  const int threads = c.run.threads;
  corpus k;
  const std::vector<std::string> files = detail::embedding_files(c.embeddings);
  detail::read_once shards;
  for (const auto& path : files) {
    shards.check(path, "", "a shard given twice makes each of its rows two items of the corpus; give each once");
  }
  for (const auto& path : files) detail::open_shard(k, path, files[0]);
  k.close_shards();
  const datamask::corpus_layout layout = k.layout(c.block_size);
  const auto mine = datamask::worker_blocks(layout.blocks(), who.worker, who.workers);
  const auto groups = datamask::groups_of_blocks(layout, mine);
  if (!who.every_row(layout)) k.hold(layout.group_row(groups.first), layout.group_row(groups.second));
  std::uint64_t fp = mix64(0x64617461ull ^ static_cast<std::uint64_t>(k.n));
  for (const auto& f : k.files) {
    fp = mix64(fp ^ detail::file_fingerprint(f.path(), f.file_bytes().size()) ^ mix64(static_cast<std::uint64_t>(f.cols())));
  }
  const std::string rows_of = files.size() == 1 ? files[0] : "the embedding shards";

  std::vector<detail::read_input> inputs;
  detail::read_once columns;
  for (const auto& q : c.quality) inputs.push_back(detail::add_quality_source(k, q, rows_of, threads, columns));
  k.weigh_quality(c.quality_weights, "--quality-weights");
  if (!c.ids.empty()) inputs.push_back(detail::add_ids(k, c.ids, rows_of, threads));
  for (const auto& in : inputs) fp = mix64(fp ^ in.fingerprint);
  k.fingerprint = fp;

  // Each group's rows of the score and id files, hashed: for the group's content hash and for the
  // plan (which records every group's, so that a worker refuses a plan of other scores or ids).
  const auto rows_of_group = [&](index_t g) {
    const std::pair<index_t, index_t> rows{layout.group_row(g), layout.group_row(g + 1)};
    std::vector<std::uint64_t> h;
    for (const auto& in : inputs) h.push_back(in.rows_hash(rows));
    std::uint64_t all = 0;
    for (const std::uint64_t x : h) all = mix64(all ^ x);
    k.rows_hashes.emplace_back(g, all);
    return h;
  };
  if (!who.embeddings) {  // the plan step: every group's rows (it reads every score and id)
    for (index_t g = 0; g < layout.groups(); ++g) (void)rows_of_group(g);
  }
  if (who.embeddings) {
    for (index_t g = groups.first; g < groups.second; ++g) {
      std::uint64_t h = 0;
      for (index_t s = layout.group_file[static_cast<std::size_t>(g)]; s < layout.group_file[static_cast<std::size_t>(g) + 1]; ++s) {
        const auto& f = k.files[static_cast<std::size_t>(s)];
        f.advise_reading(0, f.file_bytes().size());
        datamask::check_finite_values(f.path(), f.data_bytes(), *datamask::io::npy_element(f.dtype()), f.cols(), threads);
        h = mix64(h ^ hash_bytes(f.file_bytes(), threads));
      }
      for (const std::uint64_t x : rows_of_group(g)) h = mix64(h ^ x);
      k.group_hashes.emplace_back(g, h);
    }
  }
  return k;
}

/// The --demo corpus: the library's synthetic generator with its defaults (20000 x 32, 24
/// clusters of Zipf-like sizes, quality varying between clusters).
inline corpus demo_corpus(std::uint64_t seed) {
  datamask::synthetic_options o;
  o.seed = seed;
  auto g = datamask::make_synthetic_corpus(o);
  corpus k;
  k.demo_rows = std::move(g.embeddings);
  k.add_shard(k.demo_rows.data(), datamask::element_kind::float32, g.n, g.d, "the demo corpus");
  k.close_shards();
  k.add_quality("demo quality", std::move(g.quality), "the demo corpus");
  k.weigh_quality({}, "--quality-weights");
  k.fingerprint = mix64(seed ^ 0xDE30ull);
  k.group_hashes.emplace_back(0, 0);
  return k;
}

}  // namespace dmselect
