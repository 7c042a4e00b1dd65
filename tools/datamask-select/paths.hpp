// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: the input files a command line names (`listed_files`), and the checks on
// output paths, run before any work. Each output must be
// writable, no two outputs may be one file (the second would silently replace the first), and
// no output may be an input (it would replace the data the run reads), nor a folder written
// into (--checkpoint, --parts) hold one. Paths are compared
// resolved: `./a`, `a`, `dir/../a` and symbolic links to one file are the same file.

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <sys/stat.h>

#include <datamask/core/error.hpp>
#include <datamask/io/file.hpp>

#include "args.hpp"

namespace dmselect {

namespace detail {

/// Input files as a command line names them, in order: each file as given; a folder contributes
/// the files in it that `wanted(path)` accepts, hidden ones (a name starting with '.') skipped,
/// in bytewise name order (p10.npy before p2.npy), and `empty(folder)` throws when
/// there are none (embedding shards: *.npy; merge's parts: part-*.json). A folder that cannot
/// be listed is refused naming it. An entry is chosen by its name alone, whatever it is: opening
/// a wanted one that is no regular file (a FIFO, a folder, a link that loops or dangles) refuses
/// it naming it, where skipping it would drop a shard unsaid; other entries are never looked at.
template <class Wanted, class Empty>
std::vector<std::string> listed_files(const std::vector<std::string>& inputs, Wanted wanted, Empty empty) {
  namespace fs = std::filesystem;
  const auto unlistable = [](const std::string& p, const std::error_code& ec) {
    return datamask::invalid_input(p, "cannot read: " + ec.message());
  };
  std::vector<std::string> files;
  for (const auto& a : inputs) {
    std::error_code ec;
    if (!fs::is_directory(a, ec)) {
      files.push_back(a);  // opening it says what is wrong with it
      continue;
    }
    std::vector<std::string> in_dir;
    for (fs::directory_iterator e(a, ec); !ec && e != fs::directory_iterator(); e.increment(ec)) {
      // A hidden file (an editor's or a sync tool's: .a.npy.swp, ._a.npy) is no shard.
      if (!e->path().filename().string().starts_with('.') && wanted(e->path())) in_dir.push_back(e->path().string());
    }
    if (ec) throw unlistable(a, ec);
    std::sort(in_dir.begin(), in_dir.end());
    if (in_dir.empty()) empty(a);
    files.insert(files.end(), in_dir.begin(), in_dir.end());
  }
  return files;
}

/// Refuses an input read twice: the same file (by device and inode, so through folders, symbolic
/// links and other spellings of its path) and the same part of it (a CSV column; empty: the whole
/// file). A shard given twice would make every one of its rows a duplicate of another, and a
/// score column given twice would weigh double, both silently.
class read_once {
 public:
  /// Records `path` (its part `part`); throws invalid_input naming it, the input it repeats and
  /// `what` (what is wrong with reading it twice, and what to do). A file that cannot be examined is
  /// not recorded: opening it says what is wrong with it.
  void check(const std::string& path, const std::string& part, const std::string& what) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return;
    const auto [at, fresh] = seen_.emplace(std::tuple{st.st_dev, st.st_ino, part}, path);
    if (fresh) return;
    const std::string which = part.empty() ? "" : " (" + part + ")";
    throw datamask::invalid_input(path, "the same file as " + at->second + which + ": " + what);
  }

 private:
  std::map<std::tuple<dev_t, ino_t, std::string>, std::string> seen_;
};

/// The resolved form of a path (symbolic links followed as far as the path exists).
inline std::filesystem::path resolved(const std::string& p) {
  std::error_code ec;
  auto r = std::filesystem::weakly_canonical(std::filesystem::absolute(p), ec);
  return ec ? std::filesystem::absolute(p).lexically_normal() : r;
}

/// Whether `inner` is `outer` or lies inside it.
inline bool within(const std::filesystem::path& inner, const std::filesystem::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty() && std::next(o) == outer.end()) break;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

/// The input files and folders, each with the option that named it.
inline std::vector<std::pair<std::string, std::filesystem::path>> inputs(const config& c) {
  std::vector<std::pair<std::string, std::filesystem::path>> in;
  for (const auto& e : c.embeddings) in.emplace_back("--embeddings", resolved(e));
  for (const auto& q : c.quality) in.emplace_back("--quality", resolved(quality_source_of(q).file));
  if (!c.ids.empty()) in.emplace_back("--ids", resolved(c.ids));
  for (const auto& p : c.merged) in.emplace_back("merge part", resolved(p));
  return in;
}

}  // namespace detail

/// Refuses (usage_error, exit 2) outputs that cannot be written, two outputs on one path, and an
/// output that is an input file, a shard inside an input folder, or (the checkpoint folder) holds
/// an input. Writes nothing.
inline void check_output_paths(const config& c) {
  namespace fs = std::filesystem;
  const std::string none;
  const std::pair<const char*, const std::string*> named[] = {
      {"--out", &c.out}, {"--report", &c.report}, {"--log", &c.log}, {"--plot", &c.plot},
      {"--plan", c.planning ? &c.plan : &none}};
  std::vector<std::pair<std::string, fs::path>> outs;
  for (const auto& [opt, p] : named) {
    if (p->empty()) continue;
    const fs::path r = detail::resolved(*p);
    for (const auto& [other, q] : outs) {
      if (q == r) throw usage_error(other + " and " + opt + ": both write " + *p + "; give each output its own path");
    }
    outs.emplace_back(opt, r);
  }
  const auto in = detail::inputs(c);
  for (const auto& [opt, r] : outs) {
    for (const auto& [iopt, i] : in) {
      // A file inside an input folder is an input when it is a shard (.npy) of that folder.
      std::error_code ec;
      const bool shard = fs::is_directory(i, ec) && r.extension() == ".npy" && detail::within(r, i);
      if (r == i || shard) {
        throw usage_error(opt + ": " + r.string() + " is an input (" + iopt + " " + i.string() +
                          "); writing it would replace the data this run reads");
      }
    }
  }
  // The folders a run writes into (--parts: a shard's part and marker) hold no input and are none.
  for (const auto& [opt, folder] : {std::pair{"--checkpoint", &c.checkpoint}, std::pair{"--parts", &c.parts}}) {
    if (folder->empty()) continue;
    const fs::path f = detail::resolved(*folder);
    for (const auto& [iopt, i] : in) {
      if (detail::within(f, i) || detail::within(i, f)) {
        throw usage_error(std::string(opt) + ": " + f.string() + " overlaps an input (" + iopt + " " + i.string() +
                          "); the folder must hold no input and be none");
      }
    }
  }
  for (const auto& [opt, p] : named) {
    if (!p->empty()) datamask::io::check_writable(*p);
  }
}

}  // namespace dmselect
