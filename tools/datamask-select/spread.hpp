// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: what a worker (an MPI rank or a scheduler shard) hands back, and how it is
// read. A worker runs some of the blocks (datamask::worker_blocks) and returns their results
// beside a header naming the inputs and options that produced them; the outputs are then built
// from every block's result in block order, exactly as one process builds them. A shard writes
// this document to its part file, an MPI rank sends it to rank 0.
//
// The document is JSON; every double is a hexadecimal float (a string), so that a result read
// back is bit-identical to the one written, NaN and infinities included. A rank's document holds
// its blocks' ids; a part's ids are in a .npy file beside it (8 bytes an id, where JSON takes
// about 21), its blocks' ids in block order, each block's checksum in its record, so that merge
// streams them into --out instead of holding them.

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <datamask/run/report.hpp>
#include <datamask/run/pipeline.hpp>

#include "args.hpp"
#include "block_record.hpp"
#include "checkpoint.hpp"
#include "outputs.hpp"

namespace dmselect {

/// The part format this version writes and reads (1 had no checksums; 2 held the ids in JSON; 3
/// one hash of every input and blocks drawn from the whole corpus).
inline constexpr int part_format = 4;

/// Where a worker document's ids are when not in its block records: the .npy file (a name in
/// the document's folder) and each block's checksum (`ids_checksum`), in the document's order.
struct ids_apart {
  std::string file;
  std::vector<std::string> checksums;
};

/// What a worker's blocks are results of: the same for every worker of one run, but for the
/// groups it read, whose content hashes it carries (input_hash combines every group's).
struct run_header {
  std::uint64_t fingerprint = 0;                                // the inputs' names, sizes and shapes
  std::vector<std::pair<index_t, std::uint64_t>> group_hashes;  // (group, content hash), ascending
  index_t rows = 0;
  index_t dims = 0;
  std::string canonical;                      // config::canonical(): the options that select
  nlohmann::ordered_json configuration;       // the report's configuration
  index_t groups = 0;                         // the corpus's group count (datamask::corpus_layout)
  index_t blocks = 0;                         // the corpus's block count
  index_t selected = 0;                       // S over the corpus
  std::optional<double> prune_threshold;
  std::uint64_t plan = 0;                     // the corpus-wide values: plan_hash of the threshold and calibration
  bool resumed = false;
  std::string version = datamask::version_string;  // of the datamask-select that ran the blocks
};

/// A hash of the corpus-wide values every block of a run takes: the prune threshold and f's
/// calibration (bits of each double), so that parts made with other values (a stale --plan) are
/// refused, not merged.
inline std::uint64_t plan_hash(std::optional<double> threshold, const std::vector<datamask::term_value>& calibration) {
  const auto bits = [](double v) { return std::bit_cast<std::uint64_t>(v); };
  using datamask::mix64;
  std::uint64_t h = mix64(threshold ? bits(*threshold) : 0x6E6F6E65ull);
  for (const auto& t : calibration) {
    for (const char ch : t.name) h = mix64(h ^ static_cast<unsigned char>(ch));
    for (const double v : {t.weight, t.scale, t.raw}) h = mix64(h ^ bits(v));
    h = mix64(h ^ static_cast<std::uint64_t>(t.constant));
  }
  return h;
}

/// The header of a run of `c` on a corpus (fingerprint, group hashes, rows, dims), before its blocks ran.
inline run_header make_header(const config& c, std::uint64_t fingerprint,
                              std::vector<std::pair<index_t, std::uint64_t>> groups, index_t rows, index_t dims,
                              const datamask::corpus_layout& layout, index_t selected, std::optional<double> threshold,
                              const std::vector<datamask::term_value>& calibration) {
  return run_header{fingerprint, std::move(groups), rows, dims, c.canonical(), configuration_json(c), layout.groups(),
                    layout.blocks(), selected, threshold, plan_hash(threshold, calibration), c.resume};
}

/// A worker's document: the header, then its blocks (in block order), sealed as a whole and
/// each block record on its own (block_record.hpp). `ids_file`: the name of the file beside it
/// that holds the blocks' ids (a part's); empty: the records hold them (a rank's).
inline nlohmann::ordered_json worker_json(const run_header& h, const std::vector<block_result>& blocks,
                                          const std::string& ids_file = {}) {
  nlohmann::ordered_json j;
  j["format"] = "datamask-select part";
  j["format_version"] = part_format;
  j["version"] = h.version;
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (const auto& [g, gh] : h.group_hashes) groups.push_back({g, hex64(gh)});
  j["input"] = {{"fingerprint", hex64(h.fingerprint)}, {"rows", h.rows}, {"dims", h.dims}, {"groups", groups}};
  j["canonical"] = h.canonical;
  j["configuration"] = h.configuration;
  j["groups_total"] = h.groups;
  j["blocks_total"] = h.blocks;
  j["selected"] = h.selected;
  j["prune_threshold"] = h.prune_threshold ? nlohmann::ordered_json(hexf(*h.prune_threshold)) : nlohmann::ordered_json(nullptr);
  j["plan"] = hex64(h.plan);
  j["resumed"] = h.resumed;
  if (!ids_file.empty()) j["ids_file"] = ids_file;
  j["blocks"] = nlohmann::ordered_json::array();
  for (const auto& b : blocks) j["blocks"].push_back(block_record(b, !ids_file.empty()));
  seal(j);
  return j;
}

/// Reads a worker's document (`source` names it in messages: a part file, or a rank). A document
/// whose ids are apart is read with `apart` (its blocks then hold no ids), and refused without.
/// Throws usage_error when it is not one, was written by another format, or does not match its
/// checksums.
inline run_header read_worker_json(const std::string& text, const std::string& source, std::vector<block_result>& blocks,
                                   ids_apart* apart = nullptr) {
  try {
    const auto j = nlohmann::ordered_json::parse(text);
    if (j.at("format").get<std::string>() != "datamask-select part") throw usage_error(source + ": not a datamask-select part");
    const int format = j.at("format_version").get<int>();
    if (format != part_format) {
      throw usage_error(source + ": part format " + std::to_string(format) + " (written by datamask-select " +
                        j.at("version").get<std::string>() + "); this version reads format " + std::to_string(part_format));
    }
    try {
      check_seal(j);
    } catch (const usage_error& e) {
      throw usage_error(source + ": damaged part: " + e.what());
    }
    run_header h;
    h.version = j.at("version").get<std::string>();
    h.fingerprint = std::stoull(j.at("input").at("fingerprint").get<std::string>(), nullptr, 16);
    for (const auto& g : j.at("input").at("groups")) {
      h.group_hashes.emplace_back(g.at(0).get<index_t>(), std::stoull(g.at(1).get<std::string>(), nullptr, 16));
    }
    h.rows = j.at("input").at("rows").get<index_t>();
    h.dims = j.at("input").at("dims").get<index_t>();
    h.canonical = j.at("canonical").get<std::string>();
    h.configuration = j.at("configuration");
    if (!h.configuration.is_object() || !h.configuration.contains("backend") || !h.configuration["backend"].is_string()) {
      throw usage_error(source + ": damaged part: its configuration names no backend");
    }
    h.groups = j.at("groups_total").get<index_t>();
    h.blocks = j.at("blocks_total").get<index_t>();
    h.selected = j.at("selected").get<index_t>();
    if (!j.at("prune_threshold").is_null()) h.prune_threshold = unhexf(j.at("prune_threshold").get<std::string>());
    h.plan = std::stoull(j.at("plan").get<std::string>(), nullptr, 16);
    h.resumed = j.at("resumed").get<bool>();
    blocks.clear();
    if (apart != nullptr) *apart = {};
    const bool has_file = j.contains("ids_file");
    if (has_file && apart == nullptr) throw usage_error(source + ": its ids are in a file apart");
    try {
      for (const auto& b : j.at("blocks")) {
        std::string checksum;
        blocks.push_back(read_block_record(b, has_file ? &checksum : nullptr));
        if (has_file) apart->checksums.push_back(checksum);
      }
    } catch (const usage_error& e) {
      throw usage_error(source + ": damaged part: " + e.what());
    }
    if (has_file) apart->file = j.at("ids_file").get<std::string>();
    return h;
  } catch (const nlohmann::json::exception& e) {
    throw usage_error(source + ": not a datamask-select part, or damaged (" + e.what() + ")");
  } catch (const std::logic_error& e) {  // std::stoull
    throw usage_error(source + ": damaged part (" + e.what() + ")");
  }
}

/// The first option whose value differs between two canonical configurations, as
/// "--name was 'a' in A, 'b' in B"; empty when they are equal.
inline std::string first_difference(const std::string& a, const std::string& b, const std::string& a_name,
                                    const std::string& b_name) {
  const auto lines = [](const std::string& s) {
    std::vector<std::pair<std::string, std::string>> kv;
    std::istringstream in(s);
    std::string line;
    while (std::getline(in, line)) {
      const auto eq = line.find('=');
      kv.emplace_back(line.substr(0, eq), eq == std::string::npos ? "" : line.substr(eq + 1));
    }
    return kv;
  };
  const auto x = lines(a), y = lines(b);
  for (const auto& [k, v] : x) {
    std::string w = "(not set)";
    for (const auto& [k2, v2] : y) {
      if (k2 == k) w = v2;
    }
    if (w != v) return "--" + k + " is '" + v + "' in " + a_name + ", '" + w + "' in " + b_name;
  }
  return a == b ? "" : "the options differ";
}

/// Refuses (usage_error) the results of a worker whose header does not match the first one's.
inline void check_same_run(const run_header& first, const std::string& first_name, const run_header& h,
                           const std::string& name) {
  if (h.version != first.version) {
    throw usage_error(name + ": refused: written by datamask-select " + h.version + ", " + first_name + " by " +
                      first.version + "; run every part with one version");
  }
  if (h.fingerprint != first.fingerprint || h.rows != first.rows || h.dims != first.dims) {
    throw usage_error(name + ": refused: made from other inputs than " + first_name + " (their names, sizes or shapes "
                      "differ: fingerprint " + hex64(h.fingerprint) + ", " + first_name + " has " +
                      hex64(first.fingerprint) + ")");
  }
  for (const auto& [g, gh] : h.group_hashes) {  // a group both read: the same bytes
    for (const auto& [g1, gh1] : first.group_hashes) {
      if (g1 == g && gh1 != gh) {
        throw usage_error(name + ": refused: made from other inputs than " + first_name + " (the content of group " +
                          std::to_string(g) + " of the input files differs: hash " + hex64(gh) + ", " + first_name +
                          " has " + hex64(gh1) + ")");
      }
    }
  }
  // Backends may differ in the last bits (their sums run in other orders): a run's blocks, like
  // a resumed block's steps, all come from one.
  const auto backend = [](const run_header& r) { return r.configuration.value("backend", std::string("?")); };
  if (backend(h) != backend(first)) {
    throw usage_error(name + ": refused: its blocks ran on the " + backend(h) + " backend, " + first_name + "'s on " +
                      backend(first) + "; run every part with one build");
  }
  if (h.canonical != first.canonical) {
    throw usage_error(name + ": refused: made with other options than " + first_name + " (" +
                      first_difference(first.canonical, h.canonical, first_name, name) + ")");
  }
  if (h.plan != first.plan) {
    throw usage_error(name + ": refused: its blocks took other corpus-wide values (prune threshold or calibration) "
                      "than " + first_name + "'s; give every shard the same --plan, made for these inputs");
  }
  if (h.blocks != first.blocks || h.groups != first.groups || h.selected != first.selected) {
    throw usage_error(name + ": refused: " + std::to_string(h.blocks) + " blocks selecting " +
                      std::to_string(h.selected) + ", " + first_name + " has " + std::to_string(first.blocks) +
                      " selecting " + std::to_string(first.selected));
  }
}

/// The input hash of a corpus from its fingerprint and the content hash of every group, in
/// group order: the same whichever workers hashed which groups.
inline std::uint64_t input_hash(std::uint64_t fingerprint, std::span<const std::pair<index_t, std::uint64_t>> groups) {
  std::uint64_t h = fingerprint;
  for (const auto& [g, gh] : groups) h = mix64(h ^ gh) + 0x632BE59BD9B4E019ull;
  return h;
}

/// The group hashes of several workers' headers (`names`: where each came from), each group once,
/// ascending. Throws usage_error when two workers read one group's bytes differently, or a group
/// of the `groups` is in none.
inline std::vector<std::pair<index_t, std::uint64_t>> every_group(const std::vector<run_header>& headers,
                                                                  const std::vector<std::string>& names, index_t groups) {
  std::vector<std::optional<std::pair<std::uint64_t, std::size_t>>> at(static_cast<std::size_t>(groups));
  for (std::size_t i = 0; i < headers.size(); ++i) {
    for (const auto& [g, gh] : headers[i].group_hashes) {
      if (g < 0 || g >= groups) throw usage_error(names[i] + ": names group " + std::to_string(g) + " of " + std::to_string(groups));
      auto& slot = at[static_cast<std::size_t>(g)];
      if (slot && slot->first != gh) {
        throw usage_error(names[i] + ": refused: made from other inputs than " + names[slot->second] +
                          " (the content of group " + std::to_string(g) + " of the input files differs)");
      }
      slot = std::pair{gh, i};
    }
  }
  std::vector<std::pair<index_t, std::uint64_t>> all;
  for (index_t g = 0; g < groups; ++g) {
    if (!at[static_cast<std::size_t>(g)]) throw usage_error("no part read group " + std::to_string(g) + " of the inputs");
    all.emplace_back(g, at[static_cast<std::size_t>(g)]->first);
  }
  return all;
}

/// Puts the blocks of every worker in block order, refusing (usage_error) a block given twice or
/// one that no worker ran. `from[i]` names where blocks[i] came from.
inline std::vector<block_result> blocks_in_order(std::vector<block_result> blocks, const std::vector<std::string>& from,
                                                 index_t count) {
  std::vector<std::optional<std::size_t>> at(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const index_t b = blocks[i].block;
    if (b < 0 || b >= count) throw usage_error(from[i] + ": block " + std::to_string(b) + " of a run with " + std::to_string(count) + " blocks");
    auto& slot = at[static_cast<std::size_t>(b)];
    if (slot) {
      throw usage_error("block " + std::to_string(b) + " is in both " + from[*slot] + " and " + from[i] +
                        "; give each block once (parts of one --shard count)");
    }
    slot = i;
  }
  std::string missing;
  index_t n_missing = 0;
  for (index_t b = 0; b < count; ++b) {
    if (at[static_cast<std::size_t>(b)]) continue;
    if (n_missing++ < 10) missing += (missing.empty() ? "" : ", ") + std::to_string(b);
  }
  if (n_missing > 0) {
    throw usage_error(std::to_string(n_missing) + " of " + std::to_string(count) + " blocks are in no part given (block" +
                      (n_missing == 1 ? " " : "s ") + missing + (n_missing > 10 ? ", ..." : "") +
                      "); is a shard missing or unfinished?");
  }
  std::vector<block_result> ordered;
  ordered.reserve(blocks.size());
  for (const auto& i : at) ordered.push_back(std::move(blocks[*i]));
  return ordered;
}

}  // namespace dmselect
