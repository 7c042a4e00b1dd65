// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: scheduler shards and their merge. A scheduler (a Slurm job array, a plain
// `for` loop, DataTrove's or NeMo Curator's executors) starts N independent tasks; task I runs
// `--shard I/N --parts DIR`, the blocks datamask::worker_blocks gives it, and writes
//
//   DIR/part-<I>-of-<N>.json      its blocks' results (spread.hpp's document), atomically
//   DIR/completions/<I>-of-<N>    an empty marker, written after the part
//
// A task whose marker and part exist (for the same inputs and options) is skipped when run again;
// a part that cannot be read, or holds other blocks than the task's, is replaced by running again.
// `datamask-select merge PART...` then checks the parts (same inputs, same options, every block
// exactly once) and writes the outputs one process would write, bit for bit.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <datamask/io/file.hpp>

#include "args.hpp"
#include "outputs.hpp"
#include "paths.hpp"
#include "spread.hpp"

namespace dmselect {

/// Which share of the blocks a process runs: worker `index` of `count`.
struct worker_share {
  index_t index = 0;
  index_t count = 1;
};

namespace detail {

inline index_t whole_number(const std::string& what, const std::string& v) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end != v.c_str() + v.size() || x < 0) throw usage_error(what + ": expected a whole number >= 0, found '" + v + "'");
  return static_cast<index_t>(x);
}

/// The shard of a Slurm array task: its position among the array's task ids (min, min + step, ...).
inline worker_share slurm_share() {
  const auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    if (v == nullptr) {
      throw usage_error(std::string("--shard slurm: ") + name + " is not set; run it as a Slurm array task "
                        "(sbatch --array=0-N), or give --shard I/N");
    }
    return v;
  };
  const index_t id = whole_number("SLURM_ARRAY_TASK_ID", env("SLURM_ARRAY_TASK_ID"));
  const index_t count = whole_number("SLURM_ARRAY_TASK_COUNT", env("SLURM_ARRAY_TASK_COUNT"));
  const index_t min = whole_number("SLURM_ARRAY_TASK_MIN", env("SLURM_ARRAY_TASK_MIN"));
  const char* step_v = std::getenv("SLURM_ARRAY_TASK_STEP");
  const index_t step = step_v ? whole_number("SLURM_ARRAY_TASK_STEP", step_v) : 1;
  const char* max_v = std::getenv("SLURM_ARRAY_TASK_MAX");
  const index_t max = max_v ? whole_number("SLURM_ARRAY_TASK_MAX", max_v) : min + (count - 1) * step;
  if (count < 1 || step < 1 || id < min || (id - min) % step != 0 || max != min + (count - 1) * step) {
    throw usage_error("--shard slurm: the array's task ids are not evenly spaced (SLURM_ARRAY_TASK_ID=" +
                      std::to_string(id) + ", _MIN=" + std::to_string(min) + ", _MAX=" + std::to_string(max) +
                      ", _COUNT=" + std::to_string(count) + "); use a range such as --array=0-" +
                      std::to_string(count - 1) + ", or give --shard I/N");
  }
  return worker_share{(id - min) / step, count};
}

}  // namespace detail

/// The share --shard names ("I/N" or "slurm"), checked; {0, 1} when --shard is not given.
inline worker_share shard_share(const config& c) {
  if (c.shard.empty()) {
    if (!c.parts.empty()) throw usage_error("--parts: only with --shard I/N");
    return {};
  }
  if (c.parts.empty()) throw usage_error("--shard: needs --parts DIR (where the shard writes its part)");
  for (const std::string* out : {&c.out, &c.report, &c.log, &c.plot}) {
    if (!out->empty()) {
      throw usage_error("--shard: writes a part into --parts; `datamask-select merge` writes " + *out +
                        " and the other outputs; drop --out/--report/--log/--plot here");
    }
  }
  worker_share s;
  if (c.shard == "slurm") {
    s = detail::slurm_share();
  } else {
    const auto slash = c.shard.find('/');
    if (slash == std::string::npos) throw usage_error("--shard: expected I/N or slurm, found '" + c.shard + "'");
    s.index = detail::whole_number("--shard", c.shard.substr(0, slash));
    s.count = detail::whole_number("--shard", c.shard.substr(slash + 1));
  }
  if (s.count < 1 || s.index >= s.count) {
    throw usage_error("--shard: " + std::to_string(s.index) + "/" + std::to_string(s.count) +
                      ": needs N >= 1 and 0 <= I < N");
  }
  return s;
}

/// A shard's files in --parts: its document, its ids (a .npy beside it) and its marker.
struct part_files {
  std::string part, ids, marker;
};

inline part_files part_paths(const config& c, worker_share s) {
  namespace fs = std::filesystem;
  char name[64];
  std::snprintf(name, sizeof name, "%05lld-of-%05lld", static_cast<long long>(s.index), static_cast<long long>(s.count));
  const std::string part = "part-" + std::string(name);
  return {(fs::path(c.parts) / (part + ".json")).string(), (fs::path(c.parts) / (part + ".ids.npy")).string(),
          (fs::path(c.parts) / "completions" / name).string()};
}

/// A part's ids file (spread.hpp, ids_apart), read block by block in bounded memory: each block's
/// ids in pieces of at most 1 MiB, checked against the block's checksum as they are read. The
/// file is opened for each block, so a merge of thousands of parts holds no descriptor between.
class part_ids {
 public:
  /// Opens and checks the ids file of the part `part` (its header: 1-D, int64, or uint64 for
  /// unsigned ids, as many ids as `blocks` selected). Throws usage_error naming it.
  part_ids(const std::string& part, const ids_apart& apart, const std::vector<block_result>& blocks, bool ids_unsigned)
      : checksums_(apart.checksums) {
    namespace fs = std::filesystem;
    if (apart.file.empty() || apart.file.find('/') != std::string::npos || apart.file == "." || apart.file == "..") {
      throw usage_error(part + ": damaged part: its ids file is named '" + apart.file + "', not a file beside it");
    }
    path_ = (fs::path(part).parent_path() / apart.file).string();
    std::uint64_t total = 0;
    for (const auto& b : blocks) {
      start_.push_back(total);
      total += static_cast<std::uint64_t>(b.selected);
    }
    total_ = total;
    std::ifstream in(path_, std::ios::binary);
    std::error_code ec;
    const auto size = fs::file_size(path_, ec);
    if (!in || ec) throw usage_error(path_ + ": cannot read the part's ids (" + (ec ? ec.message() : "cannot open") + ")");
    std::string head(static_cast<std::size_t>(std::min<std::uintmax_t>(size, 1u << 16)), '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    try {
      const auto h = datamask::io::parse_npy_header(
          std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(head.data()), head.size()), size, path_);
      const auto want = ids_unsigned ? datamask::io::npy_dtype::uint64 : datamask::io::npy_dtype::int64;
      if (h.dtype != want || h.shape.size() != 1 || h.count != total) {
        throw usage_error(path_ + ": damaged part: its ids file holds " + std::to_string(h.count) + " " +
                          std::string(datamask::io::npy_descr(h.dtype)) + " values, expected " + std::to_string(total) +
                          " " + std::string(datamask::io::npy_descr(want)) + " ids");
      }
      data_ = h.data_offset;
    } catch (const datamask::invalid_input& e) {
      throw usage_error(std::string(e.what()) + " (the part's ids file)");
    }
  }

  /// Calls `piece` with the ids of the part's `i`-th block, in order, a piece at a time.
  /// Throws usage_error naming the file when they are not the ones the block's record sealed.
  void each_piece(std::size_t i, const std::function<void(std::span<const datamask::id_t>)>& piece) const {
    std::ifstream in(path_, std::ios::binary);
    const std::uint64_t count = (i + 1 < start_.size() ? start_[i + 1] : total_) - start_[i];
    in.seekg(static_cast<std::streamoff>(data_ + 8 * start_[i]));
    constexpr std::size_t per_piece = datamask::hash_chunk_bytes / sizeof(datamask::id_t);
    std::vector<datamask::id_t> buf(per_piece);
    std::vector<std::uint64_t> hashes;
    for (std::uint64_t done = 0; done < count;) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(per_piece, count - done));
      in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(n * sizeof(datamask::id_t)));
      if (!in) throw usage_error(path_ + ": cannot read the ids of the part's block " + std::to_string(i) + " (cut short?)");
      const std::span<const datamask::id_t> ids(buf.data(), n);
      const std::span<const unsigned char> bytes(reinterpret_cast<const unsigned char*>(ids.data()), ids.size_bytes());
      done += n;
      hashes.push_back(datamask::hash_chunk(bytes, static_cast<std::size_t>(done * sizeof(datamask::id_t))));
      piece(ids);
    }
    const auto sum = datamask::combine_chunk_hashes(static_cast<std::size_t>(count * sizeof(datamask::id_t)), hashes);
    if (hex64(sum) != checksums_[i]) {
      throw usage_error(path_ + ": damaged part: the ids of its block " + std::to_string(i) +
                        " do not match their checksum (changed or damaged after they were written)");
    }
  }

 private:
  std::string path_;
  std::uint64_t data_ = 0;
  std::vector<std::uint64_t> start_;  // each block's first id in the file
  std::uint64_t total_ = 0;
  std::vector<std::string> checksums_;
};

/// Creates --parts and its completions folder and checks that the shard's part and marker can be
/// written: before any work, so that a bad --parts costs no run.
inline void prepare_parts(const part_files& f) {
  namespace fs = std::filesystem;
  const fs::path completions = fs::path(f.marker).parent_path();
  std::error_code ec;
  fs::create_directories(completions, ec);
  if (!fs::is_directory(completions, ec)) {
    throw usage_error("--parts: cannot create " + completions.string() + (ec ? " (" + ec.message() + ")" : ""));
  }
  try {
    datamask::io::check_writable(f.part);
    datamask::io::check_writable(f.ids);
    datamask::io::check_writable(f.marker);
  } catch (const datamask::invalid_input& e) {
    throw usage_error(std::string("--parts: ") + e.what());
  }
}

/// Whether this shard already finished: its marker exists and its part holds exactly the blocks
/// `mine` of this run. A part that cannot be read or holds other blocks (damaged, or cut short)
/// is not finished: the shard runs again and replaces it. Refuses a readable part of other
/// inputs, options or version (it would be merged as if it were this run's), and one whose
/// picks are not items of their blocks (`block_ids`: a block's ids; check_block_ids).
inline bool shard_finished(const part_files& f, const run_header& h, std::span<const index_t> mine,
                           const std::function<std::vector<datamask::id_t>(index_t)>& block_ids, bool ids_unsigned,
                           bool quiet) {
  std::error_code ec;
  if (!std::filesystem::exists(f.marker, ec) || !std::filesystem::exists(f.part, ec)) return false;
  const auto redo = [&](const std::string& why) {
    if (!quiet) std::fprintf(stderr, "datamask-select: %s: %s; running the shard again\n", f.part.c_str(), why.c_str());
    return false;
  };
  std::vector<block_result> blocks;
  run_header old;
  try {
    ids_apart apart;
    old = read_worker_json(datamask::io::read_file(f.part), f.part, blocks, &apart);
    const part_ids ids(f.part, apart, blocks, ids_unsigned);
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      ids.each_piece(i, [&](std::span<const datamask::id_t> p) { blocks[i].ids.insert(blocks[i].ids.end(), p.begin(), p.end()); });
    }
  } catch (const std::runtime_error& e) {  // damaged (usage_error), or cannot be read (invalid_input)
    return redo(std::string("unreadable (") + e.what() + ")");
  }
  try {
    check_same_run(h, "this run", old, f.part);
  } catch (const usage_error& e) {
    throw usage_error(std::string(e.what()) + "; remove it and " + f.marker + " to run this shard again");
  }
  std::vector<index_t> held;
  for (const auto& b : blocks) held.push_back(b.block);
  if (!std::equal(held.begin(), held.end(), mine.begin(), mine.end())) {
    return redo("holds " + std::to_string(held.size()) + " blocks, not exactly the shard's " + std::to_string(mine.size()));
  }
  for (const auto& b : blocks) {  // the corpus is at hand: the picks must be items of their blocks
    try {
      check_block_ids(b, block_ids(b.block), ids_unsigned);
    } catch (const usage_error& e) {
      throw usage_error(f.part + ": " + e.what() + "; remove it and " + f.marker + " to run this shard again");
    }
  }
  return true;
}

/// Writes the shard's part (its ids beside it, as the ids dtype of the run), then its marker (all
/// atomically): a marker always has its part.
inline void write_part(const part_files& f, const run_header& h, const std::vector<block_result>& blocks,
                       bool ids_unsigned) {
  prepare_parts(f);
  const std::string name = std::filesystem::path(f.ids).filename().string();
  index_t count = 0;
  for (const auto& b : blocks) count += static_cast<index_t>(b.ids.size());
  const std::vector<datamask::io::output_file> files{
      {f.ids, {}, [&](std::ostream& out) { write_ids(out, f.ids, count, ids_unsigned, ids_of_blocks(blocks)); }},
      {f.part, worker_json(h, blocks, name).dump() + "\n", {}}};
  datamask::io::write_files_atomic(std::span<const datamask::io::output_file>(files));
  datamask::io::write_file_atomic(f.marker, "");
}

namespace detail {

/// The part files named on merge's command line: each file as given, a folder's part-*.json in
/// name order.
inline std::vector<std::string> part_list(const std::vector<std::string>& args) {
  return listed_files(
      args,
      [](const std::filesystem::path& p) {
        return p.filename().string().rfind("part-", 0) == 0 && p.extension() == ".json";
      },
      [](const std::string& dir) { throw usage_error(dir + ": holds no part-*.json file"); });
}

}  // namespace detail

/// `datamask-select merge [outputs] PART...`: checks the parts and writes the outputs of the
/// whole run. Returns the exit code; throws usage_error (exit 2) on a refusal.
inline int merge_main(int argc, char** argv) {
  config c;  // the outputs only; the rest comes from the parts
  std::vector<std::string> args;
  CLI::App app("datamask-select merge: the outputs of a run from the parts its --shard tasks wrote",
               "datamask-select merge");
  app.add_option("--out", c.out, "PATH: selected ids, .npy (int64; uint64 for uint64 --ids), .csv or .txt, as one process writes them");
  app.add_option("--report", c.report, "PATH: JSON report");
  app.add_option("--log", c.log, "PATH: CSV log, one row per block and step");
  app.add_option("--plot", c.plot, "PATH: SVG of the log");
  app.add_flag("--quiet", c.quiet, "no warnings on stderr (the run's --quiet, for scripts that pass it to every command)");
  int threads = 0;
  app.add_option("--threads", threads, "refused: merge reads parts and writes outputs on one thread");
  app.add_option("parts", args, "PART...: part files, or folders (their part-*.json)")->required();
  app.footer("Refused (exit 2): parts of other inputs or options, a block in no part or in two.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    throw usage_error(std::string("merge: ") + e.what() + " (see merge --help)");
  }
  if (app.count("--threads") > 0) {
    throw usage_error("merge: --threads: merge reads the parts and writes the outputs on one thread; drop it");
  }
  if (c.out.empty() && c.report.empty() && c.log.empty() && c.plot.empty()) {
    throw usage_error("merge: nothing to write; give --out, --report, --log or --plot");
  }
  const auto files = detail::part_list(args);
  c.merged = files;  // this command's inputs, the parts and their ids files: no output may replace one
  for (const auto& f : files) {
    if (f.ends_with(".json")) c.merged.push_back(f.substr(0, f.size() - 5) + ".ids.npy");
  }
  check_output_paths(c);
  detail::check_outputs(c);

  const auto t0 = std::chrono::steady_clock::now();
  run_header first;
  std::vector<run_header> headers;
  std::vector<block_result> all;
  std::vector<std::string> from;
  std::vector<std::pair<std::size_t, std::size_t>> where;  // each block's part and its place there
  std::vector<part_ids> ids;                                // each part's ids file
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::vector<block_result> blocks;
    ids_apart apart;
    const run_header h = read_worker_json(datamask::io::read_file(files[i]), files[i], blocks, &apart);
    if (i == 0) first = h;
    check_same_run(first, files[0], h, files[i]);
    headers.push_back(h);
    first.resumed = first.resumed || h.resumed;
    ids.emplace_back(files[i], apart, blocks, first.configuration.value("ids-dtype", std::string()) == "uint64");
    for (std::size_t j = 0; j < blocks.size(); ++j) {
      all.push_back(std::move(blocks[j]));
      from.push_back(files[i]);
      where.emplace_back(i, j);
    }
  }
  datamask::io::run_report rep;
  rep.configuration = first.configuration;
  rep.configuration["out"] = datamask::io::json_text(c.out);
  rep.input_hash = input_hash(first.fingerprint, every_group(headers, files, first.groups));
  rep.rows = first.rows;
  rep.dims = first.dims;
  rep.resumed = first.resumed;
  if (first.prune_threshold) rep.prune_threshold = *first.prune_threshold;
  rep.selected = first.selected;
  // The blocks in block order, and where each one's ids are (blocks_in_order's order, by block).
  std::vector<std::pair<std::size_t, std::size_t>> ids_at(static_cast<std::size_t>(std::max<index_t>(first.blocks, 0)));
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].block >= 0 && all[i].block < first.blocks) ids_at[static_cast<std::size_t>(all[i].block)] = where[i];
  }
  rep.blocks = blocks_in_order(std::move(all), from, first.blocks);
  index_t selected = 0;
  for (const auto& b : rep.blocks) selected += b.selected;
  if (selected != first.selected) {
    throw usage_error("merge: the parts' blocks select " + std::to_string(selected) + " items, their header says " +
                      std::to_string(first.selected) + "; a part is damaged");
  }
  rep.seconds.emplace_back("merge", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  c.optimizer = first.configuration.value("optimizer", std::string());
  c.ids_unsigned = first.configuration.value("ids-dtype", std::string()) == "uint64";
  // The ids streamed from the parts' files in block order: memory independent of the selection.
  write_run_outputs(c, rep, [&](const auto& piece) {
    for (const auto& [part, place] : ids_at) ids[part].each_piece(place, piece);
  });
  return 0;
}

}  // namespace dmselect
