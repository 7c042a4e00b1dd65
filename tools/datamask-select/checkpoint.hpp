// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: the checkpoint directory.
//
//   manifest             format line, version and backend of the program that wrote it, input
//                        hash, configuration hash, block count, "done b" lines
//   config.txt           the canonical configuration (to name what changed when a resume is refused)
//   block-<b>.done       a finished block: its record (block_record.hpp, as a part holds it,
//                        checksum included)
//   block-<b>.snapshot   an unfinished block: the step (pg) or iteration (continuous) reached, the
//                        history so far (as a block record holds it), the learner's state (pg:
//                        the logits; continuous: its packed iterate, datamask::continuous_iterate)
//                        and its best selection
//
// Doubles are written as hexadecimal floats (or raw bytes for the state), so a resumed run sees
// bit-identical values. Every file is written atomically; the manifest is rewritten after a
// block's .done file exists, so "done" in the manifest always has its file.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <datamask/io/file.hpp>

#include "args.hpp"
#include <datamask/frontend/block_backend.hpp>
#include "block_record.hpp"
#include "outputs.hpp"

namespace dmselect {

class checkpoint_dir {
 public:
  checkpoint_dir() = default;

  /// Opens (resume) or creates (fresh run) the directory. Refuses a resume whose inputs or
  /// options differ, and a fresh run over an existing checkpoint.
  checkpoint_dir(const config& c, std::uint64_t input_hash, std::size_t blocks)
      : dir_(c.checkpoint), input_hash_(input_hash), config_hash_(0), blocks_(blocks) {
    namespace fs = std::filesystem;
    const std::string canon = c.canonical();
    config_hash_ = 0xCBF29CE484222325ull;  // FNV-1a: stable across builds and platforms
    for (unsigned char ch : canon) config_hash_ = (config_hash_ ^ ch) * 0x100000001B3ull;
    const fs::path manifest = fs::path(dir_) / "manifest";
    std::error_code ec;
    const bool exists = fs::exists(manifest, ec);
    if (!c.resume) {
      if (exists) {
        throw usage_error("--checkpoint: " + dir_ + " already holds a checkpoint; pass --resume to continue it, "
                          "or remove the directory to start over");
      }
      fs::create_directories(dir_, ec);
      if (!fs::is_directory(dir_, ec)) throw usage_error("--checkpoint: cannot create directory " + dir_);
      datamask::io::check_writable((fs::path(dir_) / "manifest").string());
      datamask::io::write_file_atomic((fs::path(dir_) / "config.txt").string(), canon);
      write_manifest();
      return;
    }
    if (!exists) throw usage_error("--resume: " + dir_ + " holds no checkpoint (no manifest)");
    std::istringstream in(datamask::io::read_file(manifest.string()));
    std::string line, key;
    std::getline(in, line);
    check_format(line, "datamask-select checkpoint ", manifest_format, manifest.string());
    std::string version, backend, inputs, cfg;
    std::size_t nb = 0;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      ls >> key;
      if (key == "version") ls >> version;
      else if (key == "backend") ls >> backend;
      else if (key == "inputs") ls >> inputs;
      else if (key == "config") ls >> cfg;
      else if (key == "blocks") ls >> nb;
      else if (key == "done") {
        std::size_t b = 0;
        ls >> b;
        done_.insert(b);
      }
    }
    // A block resumes where it stopped only with the program (and backend) that ran its steps.
    const std::string start_over = "; resume with that build, or remove the directory to start over";
    if (version != datamask::version_string) {
      throw usage_error("--resume: refused: the checkpoint in " + dir_ + " was written by datamask-select " + version +
                        ", this is " + datamask::version_string + start_over);
    }
    if (backend != dmfront::block_backend_name()) {
      throw usage_error("--resume: refused: the checkpoint in " + dir_ + " was written on the " + backend +
                        " backend, this build runs on " + dmfront::block_backend_name() + start_over);
    }
    if (inputs != hex64(input_hash_)) {
      throw usage_error("--resume: refused: the inputs differ from those of the checkpoint in " + dir_ +
                        " (content hash " + inputs + ", now " + hex64(input_hash_) + ")");
    }
    if (cfg != hex64(config_hash_)) {
      std::istringstream old_cfg(datamask::io::read_file((fs::path(dir_) / "config.txt").string()));
      std::map<std::string, std::string> was;
      while (std::getline(old_cfg, line)) was[line.substr(0, line.find('='))] = line.substr(line.find('=') + 1);
      std::istringstream now(canon);
      std::string what;
      while (std::getline(now, line)) {
        const std::string k = line.substr(0, line.find('=')), v = line.substr(line.find('=') + 1);
        if (was[k] != v && what.empty()) what = "--" + k + " was '" + was[k] + "', now '" + v + "'";
      }
      throw usage_error("--resume: refused: the options differ from those of the checkpoint in " + dir_ +
                        (what.empty() ? std::string() : " (" + what + ")"));
    }
    if (nb != blocks_) throw usage_error("--resume: refused: the checkpoint has " + std::to_string(nb) + " blocks, this run " + std::to_string(blocks_));
  }

  /// The formats this version writes and reads (manifest 2's done files had no checksum, 1 had
  /// no backend, its done files and snapshot 3 a text history; snapshot 4 had no checksum, 1 no
  /// best rollout, 2 held only the policy gradient's logits, one per row).
  static constexpr int manifest_format = 3;
  static constexpr int snapshot_format = 5;

  [[nodiscard]] bool active() const { return !dir_.empty(); }
  [[nodiscard]] bool done(std::size_t b) const { return done_.count(b) != 0; }

  /// Writes block r's snapshot: the step reached, the history, the learner's `state` (the block
  /// hooks' opaque vector) and the best selection so far.
  void save_snapshot(const block_result& r, index_t step, std::span<const double> state,
                     const datamask::best_rollout& best) const {
    std::string s = "snapshot " + std::to_string(snapshot_format) + "\nblock " + std::to_string(r.block) + "\nstep " + std::to_string(step) +
                    "\nrows " + std::to_string(r.items) + "\nvalues " + std::to_string(state.size()) + "\n";
    s += "history " + history_json(r.history).dump() + "\nstate\n";
    s.append(reinterpret_cast<const char*>(state.data()), state.size_bytes());
    // The best complete rollout so far (the learner may return it), so a resume stays exact.
    s += "\nbest " + std::to_string(best.rows.size()) + "\n";
    s.append(reinterpret_cast<const char*>(&best.reward), sizeof(double));
    s.append(reinterpret_cast<const char*>(best.rows.data()), best.rows.size() * sizeof(index_t));
    seal_bytes(s);
    datamask::io::write_file_atomic(path(r.block, "snapshot"), s);
  }

  /// Loads the snapshot of block b (of `rows` items) if there is one: the step reached, the
  /// learner's state, the history, the best selection. The learner checks the state itself.
  bool load_snapshot(index_t b, index_t rows, index_t& step, std::vector<double>& state,
                     std::vector<datamask::step_record>& history, datamask::best_rollout& best) const {
    std::error_code ec;
    if (!std::filesystem::exists(path(b, "snapshot"), ec)) return false;
    const std::string file = datamask::io::read_file(path(b, "snapshot"));
    std::string_view all;
    try {
      all = check_seal_bytes(file);
    } catch (const usage_error& e) {
      throw usage_error("--resume: " + path(b, "snapshot") + ": " + e.what());
    }
    const auto at = all.find("state\n");
    if (at == std::string::npos) throw usage_error("--resume: " + path(b, "snapshot") + ": damaged snapshot");
    std::istringstream ls(std::string(all.substr(0, at)));
    std::string key, first_line;
    std::getline(ls, first_line);
    check_format(first_line, "snapshot ", snapshot_format, path(b, "snapshot"));
    const auto damaged = [&] { return usage_error("--resume: " + path(b, "snapshot") + ": truncated or damaged snapshot"); };
    index_t blk = -1, n = -1;
    std::size_t values = 0;
    ls >> key >> blk >> key >> step >> key >> n >> key >> values;
    if (key != "values") throw damaged();
    if (blk != b || n != rows) throw usage_error("--resume: " + path(b, "snapshot") + ": snapshot of another block");
    std::string history_line;
    ls >> key >> std::ws;
    std::getline(ls, history_line);
    if (key != "history") throw damaged();
    try {
      history = read_history(nlohmann::ordered_json::parse(history_line));
    } catch (const nlohmann::json::exception&) {
      throw damaged();
    } catch (const usage_error&) {  // a value that is not a number, steps out of order
      throw damaged();
    }
    if (static_cast<index_t>(history.size()) != step) throw damaged();  // one record per step done
    if (values > all.size() / sizeof(double)) throw damaged();
    const std::size_t bytes = values * sizeof(double);
    const std::size_t from = at + 6;  // after "state\n"
    if (all.size() < from + bytes) throw damaged();
    state.resize(values);
    std::memcpy(state.data(), all.data() + from, bytes);
    std::size_t pos = from + bytes;
    if (all.compare(pos, 6, "\nbest ") != 0) throw damaged();
    const auto eol = all.find('\n', pos + 6);
    if (eol == std::string::npos) throw damaged();
    std::size_t count = 0;
    try {
      count = std::stoull(std::string(all.substr(pos + 6, eol - pos - 6)));
    } catch (const std::exception&) {
      throw damaged();
    }
    pos = eol + 1;
    if (count > static_cast<std::size_t>(rows) ||
        all.size() != pos + sizeof(double) + count * sizeof(index_t)) {
      throw damaged();
    }
    std::memcpy(&best.reward, all.data() + pos, sizeof(double));
    best.rows.resize(count);
    std::memcpy(best.rows.data(), all.data() + pos + sizeof(double), count * sizeof(index_t));
    for (index_t row : best.rows) {
      if (row < 0 || row >= rows) throw damaged();
    }
    return true;
  }

  void finish_block(const block_result& r) {
    datamask::io::write_file_atomic(path(r.block, "done"), block_record(r).dump() + "\n");
    done_.insert(static_cast<std::size_t>(r.block));
    write_manifest();
    std::remove(path(r.block, "snapshot").c_str());
  }

  /// A finished block's record, which must be that of block b (its checksum matching) with the
  /// plan's `selected` picks, each an item of the block (`block_ids`: the ids of its rows), once
  /// (check_block_ids).
  [[nodiscard]] block_result load_block(index_t b, std::vector<datamask::id_t> block_ids, index_t selected,
                                        bool ids_unsigned) const {
    const auto items = static_cast<index_t>(block_ids.size());
    const std::string file = path(b, "done");
    const std::string text = datamask::io::read_file(file);
    block_result r;
    try {
      r = read_block_record(nlohmann::ordered_json::parse(text));
    } catch (const nlohmann::json::exception& e) {
      throw usage_error("--resume: " + file + ": damaged block record (" + e.what() + ")");
    } catch (const usage_error& e) {
      throw usage_error("--resume: " + file + ": damaged block record (" + e.what() + ")");
    }
    if (r.block != b) throw usage_error("--resume: " + file + ": the record of block " + std::to_string(r.block));
    if (r.items != items || r.selected != selected) {
      throw usage_error("--resume: " + file + ": damaged block record (" + std::to_string(r.items) + " items selecting " +
                        std::to_string(r.selected) + ", but the block has " + std::to_string(items) + " selecting " +
                        std::to_string(selected) + ")");
    }
    try {
      check_block_ids(r, std::move(block_ids), ids_unsigned);
    } catch (const usage_error& e) {
      throw usage_error("--resume: " + file + ": " + e.what());
    }
    r.from_checkpoint = true;
    return r;
  }

 private:
  /// Refuses a file whose first line is not `prefix` + the expected format number, saying
  /// whether an older or a newer datamask-select wrote it.
  static void check_format(const std::string& line, const std::string& prefix, int expected, const std::string& file) {
    if (line.rfind(prefix, 0) != 0) throw usage_error("--resume: " + file + ": not a datamask-select checkpoint file");
    int found = 0;
    try {
      found = std::stoi(line.substr(prefix.size()));
    } catch (const std::exception&) {
      throw usage_error("--resume: " + file + ": damaged (no format number)");
    }
    if (found == expected) return;
    throw usage_error("--resume: " + file + ": written by " +
                      (found < expected ? "an older" : "a newer") + " version of datamask-select (format " +
                      std::to_string(found) + ", this version reads " + std::to_string(expected) +
                      "); finish it with that version, or remove the checkpoint directory to start over");
  }
  [[nodiscard]] std::string path(index_t b, const char* what) const {
    return (std::filesystem::path(dir_) / ("block-" + std::to_string(b) + "." + what)).string();
  }
  void write_manifest() const {
    std::string s = "datamask-select checkpoint " + std::to_string(manifest_format) + "\nversion " + std::string(datamask::version_string) +
                    "\nbackend " + dmfront::block_backend_name() + "\ninputs " + hex64(input_hash_) + "\nconfig " + hex64(config_hash_) + "\nblocks " +
                    std::to_string(blocks_) + "\n";
    for (auto b : done_) s += "done " + std::to_string(b) + "\n";
    datamask::io::write_file_atomic((std::filesystem::path(dir_) / "manifest").string(), s);
  }

  std::string dir_;
  std::uint64_t input_hash_ = 0;
  std::uint64_t config_hash_ = 0;
  std::size_t blocks_ = 0;
  std::set<std::size_t> done_;
};

}  // namespace dmselect
