// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: one block's result as JSON, every field of it, read back bit for bit. A
// worker's part (spread.hpp) holds its blocks so, and a checkpoint (checkpoint.hpp) its finished
// blocks and the history of an unfinished one. Every double is a hexadecimal float (a string), so
// that a value read back is the one written, NaN and infinities included. A record carries a
// checksum of its content (`seal`), checked when it is read: a record changed by hand or damaged
// is refused, not trusted.

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <datamask/core/input_checks.hpp>
#include <datamask/run/report.hpp>
#include <datamask/run/pipeline.hpp>

#include "args.hpp"
#include "outputs.hpp"

namespace dmselect {

inline std::string hexf(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}
/// A double written by hexf; refuses (usage_error) a string that is not one whole number.
inline double unhexf(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) throw usage_error("'" + s + "' is not a number (a damaged file?)");
  return v;
}
inline std::string hex64(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

/// The checksum of bytes: the library's content hash (datamask::hash_bytes), in hexadecimal.
inline std::string bytes_checksum(std::string_view bytes) {
  return hex64(datamask::hash_bytes(
      std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()), 1));
}
/// The checksum of a JSON document: that of its compact text without its "checksum" field. The
/// text of the values, not of the file: a document read and written again (its spacing changed)
/// keeps its checksum.
inline std::string content_checksum(nlohmann::ordered_json j) {
  j.erase("checksum");
  return bytes_checksum(j.dump());
}
/// Adds its checksum to a document (a JSON object).
inline void seal(nlohmann::ordered_json& j) { j["checksum"] = content_checksum(j); }
/// Refuses (usage_error) a document with no checksum, or one its content does not match.
inline void check_seal(const nlohmann::ordered_json& j) {
  if (!j.is_object() || !j.contains("checksum") || !j["checksum"].is_string()) {
    throw usage_error("it has no checksum");
  }
  if (j["checksum"].get<std::string>() != content_checksum(j)) {
    throw usage_error("its checksum does not match its content: it was changed or damaged after it was written");
  }
}

/// Seals a document that is not JSON (a snapshot): a last line "checksum <hex>" of every byte
/// before it.
inline void seal_bytes(std::string& s) { s += "\nchecksum " + bytes_checksum(s) + "\n"; }
/// The bytes of a document sealed by seal_bytes, its last line taken off; refuses (usage_error)
/// one without that line, or whose bytes it does not match.
inline std::string_view check_seal_bytes(std::string_view s) {
  const std::size_t at = s.rfind("\nchecksum ");
  if (at == std::string_view::npos || s.back() != '\n') throw usage_error("it has no checksum");
  if (s.substr(at + 10, s.size() - at - 11) != bytes_checksum(s.substr(0, at))) {
    throw usage_error("its checksum does not match its content: it was changed or damaged after it was written");
  }
  return s.substr(0, at);
}

/// Refuses (usage_error) a block record whose ids are not the block's: each must be an item
/// of block r.block (`block_ids`: the ids of its rows), once. Ids are said as the input holds
/// them (`ids_unsigned`). Where the corpus is at hand, this catches a record of other inputs
/// whose checksum was made to match.
inline void check_block_ids(const block_result& r, std::vector<datamask::id_t> block_ids, bool ids_unsigned) {
  std::sort(block_ids.begin(), block_ids.end());
  std::vector<char> taken(block_ids.size(), 0);
  for (const datamask::id_t id : r.ids) {
    const auto at = std::lower_bound(block_ids.begin(), block_ids.end(), id);
    const std::string text = datamask::id_text(id, ids_unsigned);
    if (at == block_ids.end() || *at != id) {
      throw usage_error("id " + text + " is not an item of block " + std::to_string(r.block) +
                        " of these inputs; the record is not this run's");
    }
    char& once = taken[static_cast<std::size_t>(at - block_ids.begin())];
    if (once) throw usage_error("damaged block record (id " + text + " selected twice)");
    once = 1;
  }
}

namespace detail {

inline nlohmann::ordered_json hex_array(const std::vector<double>& v) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (double x : v) a.push_back(hexf(x));
  return a;
}

inline double hex_at(const nlohmann::ordered_json& j, const char* key) { return unhexf(j.at(key).get<std::string>()); }

}  // namespace detail

/// A block's per-step history: one array per step (step, lr, reward mean, reward max, term means).
inline nlohmann::ordered_json history_json(const std::vector<datamask::step_record>& history) {
  auto h = nlohmann::ordered_json::array();
  for (const auto& s : history) {
    h.push_back({s.step, hexf(s.lr), hexf(s.reward_mean), hexf(s.reward_max), detail::hex_array(s.term_means)});
  }
  return h;
}

/// Reads history_json back. Throws nlohmann's exceptions on a missing or mistyped field,
/// usage_error on a value that is not a number or on steps other than 1, 2, ... in order (a
/// history holds every step or iteration run).
inline std::vector<datamask::step_record> read_history(const nlohmann::ordered_json& h) {
  if (!h.is_array()) throw usage_error("the history is not a list of steps");
  std::vector<datamask::step_record> out;
  for (const auto& s : h) {
    datamask::step_record step{s.at(0).get<index_t>(), unhexf(s.at(1).get<std::string>()),
                               unhexf(s.at(2).get<std::string>()), unhexf(s.at(3).get<std::string>()), {}};
    const auto expected = static_cast<index_t>(out.size()) + 1;
    if (step.step != expected) {
      throw usage_error("the history's step " + std::to_string(expected) + " is numbered " + std::to_string(step.step));
    }
    for (const auto& t : s.at(4)) step.term_means.push_back(unhexf(t.get<std::string>()));
    out.push_back(std::move(step));
  }
  return out;
}

/// The checksum of a block's ids as an ids file holds them: their 8-byte words, in order.
inline std::string ids_checksum(std::span<const datamask::id_t> ids) {
  return bytes_checksum(std::string_view(reinterpret_cast<const char*>(ids.data()), ids.size_bytes()));
}

/// One block's result, every field of it: the report's (datamask/run/report.hpp), then its
/// doubles exactly, the ids and the per-step history; sealed. `ids_apart`: the ids are in a file
/// of their own (a part's), and the record holds their checksum instead.
inline nlohmann::ordered_json block_record(const block_result& r, bool ids_apart = false) {
  nlohmann::ordered_json j = datamask::io::detail::block_json(r);
  auto& x = j["exact"];
  x["objective"] = hexf(r.objective);
  x["optimize_seconds"] = hexf(r.optimize_seconds);
  x["evaluate_seconds"] = hexf(r.evaluate_seconds);
  if (r.graph.neighbors > 0) x["graph_seconds"] = hexf(r.graph.seconds);
  if (r.graph.recall) x["graph_recall"] = hexf(*r.graph.recall);
  x["terms"] = nlohmann::ordered_json::array();
  for (const auto& t : r.terms) x["terms"].push_back({t.name, hexf(t.weight), hexf(t.scale), hexf(t.raw)});
  if (const auto& c = r.certificate) {  // its numbers, in the order of for_each_certificate_number
    auto& a = x["certificate"] = nlohmann::ordered_json::array();
    datamask::for_each_certificate_number(*c, [&](const char*, double v) { a.push_back(hexf(v)); });
  }
  if (ids_apart) {
    j["ids_checksum"] = ids_checksum(r.ids);
  } else {
    j["ids"] = r.ids;
  }
  j["history"] = history_json(r.history);
  seal(j);
  return j;
}

namespace detail {

/// Refuses (usage_error) a block record whose parts disagree: as many ids as it selected, a
/// record per step run (or none: a greedy's block), a name, weight, scale and raw value per term,
/// and every step's term means one per term (or none: the continuous learner's steps have none).
inline void check_block_record(const block_result& r, bool ids_held) {
  const std::string where = "block " + std::to_string(r.block) + ": ";
  if (ids_held && static_cast<index_t>(r.ids.size()) != r.selected) {
    throw usage_error(where + std::to_string(r.ids.size()) + " ids, but it selected " + std::to_string(r.selected));
  }
  if (!r.history.empty() && static_cast<index_t>(r.history.size()) != r.steps_run) {
    throw usage_error(where + std::to_string(r.history.size()) + " steps in its history, but it ran " +
                      std::to_string(r.steps_run));
  }
  for (const auto& s : r.history) {
    if (!s.term_means.empty() && s.term_means.size() != r.terms.size()) {
      throw usage_error(where + "step " + std::to_string(s.step) + " has " + std::to_string(s.term_means.size()) +
                        " term means for " + std::to_string(r.terms.size()) + " terms");
    }
  }
}

}  // namespace detail

/// Reads block_record's JSON back. Throws nlohmann's exceptions on a missing or mistyped field,
/// usage_error on a checksum that does not match (check_seal), a value that is not a number or on
/// parts that disagree (check_block_record). A record whose ids are apart is read with
/// `ids_apart`, which gets their checksum (the block's `ids` stay empty), and refused without.
inline block_result read_block_record(const nlohmann::ordered_json& j, std::string* ids_apart = nullptr) {
  check_seal(j);
  block_result r = datamask::io::detail::block_from_json(j);
  const auto& x = j.at("exact");
  r.objective = detail::hex_at(x, "objective");
  r.optimize_seconds = detail::hex_at(x, "optimize_seconds");
  r.evaluate_seconds = detail::hex_at(x, "evaluate_seconds");
  r.terms.clear();
  for (const auto& t : x.at("terms")) {
    if (t.size() != 4) throw usage_error("block " + std::to_string(r.block) + ": a term without its 4 values");
    r.terms.push_back(datamask::term_value{t.at(0).get<std::string>(), unhexf(t.at(1).get<std::string>()),
                                           unhexf(t.at(2).get<std::string>()), unhexf(t.at(3).get<std::string>())});
  }
  if (r.graph.neighbors > 0) r.graph.seconds = detail::hex_at(x, "graph_seconds");
  if (r.graph.recall) r.graph.recall = detail::hex_at(x, "graph_recall");
  if (r.certificate) {
    const auto& c = x.at("certificate");
    std::size_t at = 0;
    datamask::for_each_certificate_number(*r.certificate, [&](const char* name, double& v) {
      if (at >= c.size()) throw usage_error("block " + std::to_string(r.block) + ": a certificate without its " + name);
      v = unhexf(c.at(at++).get<std::string>());
    });
    if (at != c.size()) throw usage_error("block " + std::to_string(r.block) + ": a certificate with more values than it has");
  }
  const bool held = j.contains("ids");
  if (held) {
    r.ids = j.at("ids").get<std::vector<datamask::id_t>>();
  } else if (ids_apart != nullptr) {
    *ids_apart = j.at("ids_checksum").get<std::string>();
  } else {
    throw usage_error("block " + std::to_string(r.block) + ": its ids are in a file apart, not in the record");
  }
  r.history = read_history(j.at("history"));
  detail::check_block_record(r, held);
  return r;
}

}  // namespace dmselect
