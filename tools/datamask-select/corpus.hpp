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
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <datamask/datamask.hpp>
#include <datamask/input_checks.hpp>
#include <datamask/io/csv.hpp>
#include <datamask/io/file.hpp>
#include <datamask/io/npy.hpp>
#include <datamask/pipeline.hpp>
#include <datamask/synthetic.hpp>
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
  std::vector<id_t> id_values;                // what `ids` views (read from --ids)
  std::string ids_source;
  std::uint64_t hash = 0;
  std::vector<float> demo_rows;  // the --demo corpus lives here

  corpus() = default;
  corpus(corpus&&) = default;
  corpus& operator=(corpus&&) = default;
  corpus(const corpus&) = delete;
  corpus& operator=(const corpus&) = delete;
};

/// Which share of the embedding bytes this process reads (see detail::shard_hashes): reader
/// `index` of `count`; `exchange` gives every reader every reader's values, concatenated in reader
/// order (an MPI allgather). The default: one reader reads everything.
struct read_share {
  int index = 0;
  int count = 1;
  std::function<std::vector<std::uint64_t>(const std::vector<std::uint64_t>&)> exchange;
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
inline constexpr npy_input embeddings_input{"embeddings", "float32 (<f4) or float16 (<f2)", [](datamask::io::npy_dtype t) {
  return t == datamask::io::npy_dtype::float32 || t == datamask::io::npy_dtype::float16;
}};
inline constexpr npy_input quality_input{"quality scores", "float32, float64 or float16", &datamask::io::npy_is_float};
inline constexpr npy_input ids_input{"ids", "int64 (or int32, uint64)", &datamask::io::npy_is_integer};
using datamask::io::open_npy;

/// Opens one embedding shard and checks its header (2-D, float32 or float16, non-empty, the same
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
  k.add_shard(f.data_bytes().data(), dt == datamask::io::npy_dtype::float16, f.rows(), f.cols());
  k.files.push_back(std::move(f));
}

/// Checks that every value of the rows of shard `f` that start in its hash chunks [first, last)
/// is finite (a row across a chunk boundary belongs to the chunk where it starts, so readers of
/// consecutive chunk runs check every row once).
inline void check_rows_in_chunks(const datamask::io::npy_file& f, std::size_t first, std::size_t last, int threads) {
  const auto file = f.file_bytes();
  const auto data = f.data_bytes();
  const auto offset = static_cast<std::size_t>(data.data() - file.data());
  const std::size_t row_bytes = data.size() / static_cast<std::size_t>(f.rows());
  const auto row_at = [&](std::size_t chunk) {  // the first row starting at or after this chunk
    const std::size_t byte = std::min(file.size(), chunk * datamask::hash_chunk_bytes);
    const std::size_t row = byte <= offset ? 0 : (byte - offset + row_bytes - 1) / row_bytes;
    return std::min(row, static_cast<std::size_t>(f.rows()));
  };
  const std::size_t lo = row_at(first);
  const std::size_t hi = row_at(last);
  if (lo >= hi) return;
  datamask::check_finite_values(f.path(), data.subspan(lo * row_bytes, (hi - lo) * row_bytes),
                                    f.dtype() == datamask::io::npy_dtype::float16, f.cols(), threads,
                                    static_cast<index_t>(lo));
}

/// Validates (every value finite) and hashes this reader's share of the embedding shards' bytes,
/// and returns the hash of every shard, as hash_bytes gives it. The shards' 1 MiB hash chunks,
/// in order over all shards, are split into `share.count` consecutive runs; reader
/// `share.index` reads only its run, and `share.exchange` gives every reader all the chunk hashes
/// in order, so every reader combines the same hashes one reader computes alone.
inline std::vector<std::uint64_t> shard_hashes(const corpus& k, const read_share& share, int threads) {
  std::vector<std::size_t> start{0};  // the first chunk of each shard, over all shards; then the total
  for (const auto& f : k.files) start.push_back(start.back() + datamask::hash_chunk_count(f.file_bytes().size()));
  const std::size_t total = start.back();
  const auto count = static_cast<std::size_t>(share.count);
  const std::size_t lo = total * static_cast<std::size_t>(share.index) / count;
  const std::size_t hi = total * static_cast<std::size_t>(share.index + 1) / count;
  std::vector<std::uint64_t> mine;
  for (std::size_t s = 0; s < k.files.size(); ++s) {
    const std::size_t first = std::clamp(lo, start[s], start[s + 1]) - start[s];
    const std::size_t last = std::clamp(hi, start[s], start[s + 1]) - start[s];
    if (first >= last) continue;
    check_rows_in_chunks(k.files[s], first, last, threads);
    const auto h = datamask::hash_chunks(k.files[s].file_bytes(), first, last, threads);
    mine.insert(mine.end(), h.begin(), h.end());
  }
  const std::vector<std::uint64_t> all = count > 1 ? share.exchange(mine) : std::move(mine);
  if (all.size() != total) {
    throw std::logic_error(datamask::detail::concat("received ", all.size(), " chunk hashes, expected ", total));
  }
  std::vector<std::uint64_t> hashes;
  for (std::size_t s = 0; s < k.files.size(); ++s) {
    hashes.push_back(datamask::combine_chunk_hashes(
        k.files[s].file_bytes().size(),
        std::span<const std::uint64_t>(all).subspan(start[s], start[s + 1] - start[s])));
  }
  return hashes;
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

/// Reads one --quality value into `k`: a CSV file's columns ("file (column)"; csv_columns says
/// which), or a 1-D .npy array of floats. Returns the hash of its bytes (and of the column named,
/// so that naming another column of the file is other inputs).
inline std::uint64_t add_quality_source(corpus& k, const std::string& q, const std::string& rows_of, int threads,
                                        read_once& read) {
  const quality_source s = quality_source_of(q);
  constexpr const char* what = "a score column given twice would weigh double; give each once (--quality-weights "
                               "weighs a column)";
  if (s.csv()) {
    const std::string all = datamask::io::read_file(s.file);  // read once: parsed and hashed
    const auto t = datamask::io::parse_csv(all, s.file);
    for (const std::size_t col : csv_columns(t, s)) {
      read.check(s.file, "column " + std::to_string(col + 1), what);
      k.add_quality(s.file + " (" + t.names[col] + ")", t.columns[col], rows_of);
    }
    const auto bytes = [&](const std::string& b) {
      return hash_bytes(std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(b.data()), b.size()), threads);
    };
    return s.column.empty() ? bytes(all) : mix64(bytes(all) ^ bytes(s.column));
  }
  read.check(q, "", what);
  datamask::io::npy_file f = open_npy(q, quality_input);
  if (f.header().shape.size() != 1 && !(f.header().shape.size() == 2 && f.cols() == 1)) {
    throw invalid_input(q, "quality scores must be a 1-D array (one score per row)");
  }
  k.add_quality(q, f.read_doubles(), rows_of);
  return hash_bytes(f.file_bytes(), threads);
}

/// Reads the ids file (1-D, one id per row, no id twice) into `k`: int64 (or int32) ids, or
/// uint64 ids, which keep their type (`ids_unsigned`). Returns the hash of its bytes.
inline std::uint64_t add_ids(corpus& k, const std::string& path, const std::string& rows_of, int threads) {
  datamask::io::npy_file f = open_npy(path, ids_input);
  if (f.header().shape.size() != 1) throw invalid_input(path, "ids must be a 1-D array");
  const auto v = f.read_int64();  // uint64 ids: their bits
  k.id_values.assign(v.begin(), v.end());
  k.view_ids(k.id_values, f.dtype() == datamask::io::npy_dtype::uint64, path, rows_of);
  k.ids_source = path;
  return hash_bytes(f.file_bytes(), threads);
}

}  // namespace detail

/// Opens, validates and hashes every input: the embedding shards, the quality columns, the ids.
/// Throws invalid_input naming the file. The hash chains each file's bytes in that order. Several
/// readers (MPI ranks, `share`) split the reading of the embedding shards' bytes; each reads the
/// quality columns and ids (8 bytes a row) whole.
inline corpus load_corpus(const config& c, const read_share& share = {}) {
  const int threads = c.run.threads;
  corpus k;
  std::uint64_t h = mix64(0x64617461ull);
  const std::vector<std::string> files = detail::embedding_files(c.embeddings);
  detail::read_once shards;
  for (const auto& path : files) {
    shards.check(path, "", "a shard given twice makes each of its rows two items of the corpus; give each once");
  }
  for (const auto& path : files) detail::open_shard(k, path, files[0]);
  k.close_shards();
  for (const std::uint64_t s : detail::shard_hashes(k, share, threads)) h = mix64(h ^ s);
  const std::string rows_of = files.size() == 1 ? files[0] : "the embedding shards";

  detail::read_once columns;
  for (const auto& q : c.quality) h = mix64(h ^ detail::add_quality_source(k, q, rows_of, threads, columns));
  k.weigh_quality(c.quality_weights, "--quality-weights");

  if (!c.ids.empty()) h = mix64(h ^ detail::add_ids(k, c.ids, rows_of, threads));
  k.hash = h;
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
  k.add_shard(k.demo_rows.data(), false, g.n, g.d);
  k.close_shards();
  k.add_quality("demo quality", std::move(g.quality), "the demo corpus");
  k.weigh_quality({}, "--quality-weights");
  k.hash = mix64(seed ^ 0xDE30ull);
  return k;
}

}  // namespace dmselect
