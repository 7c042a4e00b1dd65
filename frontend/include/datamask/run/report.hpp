// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The run report (JSON): built from the per-block results, and read back.
///
/// One definition of the report's fields serves every writer and reader: datamask-select writes
/// it, a scale-out merge step reads the parts back and writes the merged report, and the Python
/// package produces the same document. An optional adapter: it needs nlohmann-json
/// (`nlohmann/json.hpp`, Debian `nlohmann-json3-dev`) and is not included by `datamask.hpp`.
///
/// Fields: program, version, configuration (an object given by the writer), input {rows, dims,
/// hash}, resumed, prune_threshold (null: none), blocks [{block, items, kept, selected,
/// steps_run, zero_variance_steps, nonfinite_steps, from_checkpoint, seconds {optimize,
/// evaluate}, objective {total, terms {name: {raw, scale, weight, constant}}}, graph {neighbors, source,
/// seconds, bytes} (only for a block whose facility term ran on a kNN graph), certificate {method,
/// bound, gap, certified_share, random_mean, seconds, random_seconds (of them), reason (only with method "none")} (only for
/// a certified run: `block_run_settings::certify`)}], total {blocks, selected, steps_run,
/// objective, certificate (`total_certificate`; only for a certified run), seconds {phase: s}}.
/// Non-finite numbers are written as null.

#include <cinttypes>
#include <concepts>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <datamask/core/error.hpp>
#include <datamask/run/block_fields.hpp>
#include <datamask/io/file.hpp>
#include <datamask/run/pipeline.hpp>
#include <datamask/version.hpp>

namespace datamask::io {

/// @brief Everything a report holds besides the blocks' own results.
struct run_report {
  std::string program = "datamask-select";
  std::string version = version_string;
  nlohmann::ordered_json configuration = nlohmann::ordered_json::object();  ///< the writer's settings
  index_t rows = 0;                ///< n
  index_t dims = 0;                ///< d
  std::uint64_t input_hash = 0;    ///< the inputs' content hash
  bool resumed = false;
  double prune_threshold = -std::numeric_limits<double>::infinity();  ///< -inf: no prune
  index_t selected = 0;            ///< S over the whole corpus
  std::vector<block_result> blocks;
  std::vector<std::pair<std::string, double>> seconds;  ///< wall time per phase, in order
};

namespace detail {

/// The length of the valid UTF-8 sequence that starts at s[i] (RFC 3629: no overlong form, no
/// surrogate, nothing beyond U+10FFFF), 0 when none does.
inline std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = at(i);
  if (c < 0x80) return 1;
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range (the later ones': 80..BF)
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    lo = c == 0xE0 ? 0xA0 : 0x80;  // E0 80..9F: overlong
    hi = c == 0xED ? 0x9F : 0xBF;  // ED A0..BF: surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    lo = c == 0xF0 ? 0x90 : 0x80;  // F0 80..8F: overlong
    hi = c == 0xF4 ? 0x8F : 0xBF;  // F4 90..: beyond U+10FFFF
  } else {
    return 0;
  }
  if (i + len > s.size() || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < len; ++k) {
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  }
  return len;
}

}  // namespace detail

/// @brief A text for JSON, whose strings must be UTF-8: a path (or a text naming one) as it is
/// when it is valid UTF-8, else with each byte that is not part of a valid UTF-8 sequence written
/// as the four characters `\xNN` (as `printf '\xe9'` spells it). The one form every JSON document
/// of datamask (report, parts, checkpoints) gives a path: for a reader, not to be opened again.
[[nodiscard]] inline std::string json_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (const std::size_t len = detail::utf8_length(s, i)) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(s[i])));
      out += esc;
      ++i;
    }
  }
  return out;
}

namespace detail {

inline nlohmann::ordered_json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}
inline double number_from(const nlohmann::ordered_json& j, double if_null) {
  return j.is_null() ? if_null : j.get<double>();
}

/// Writes `visit_*_fields` into a JSON object: non-finite numbers as null, text as valid UTF-8.
struct json_writer {
  nlohmann::ordered_json& j;
  void value(const std::string& name, double v) { j[name] = number_or_null(v); }
  void value(const std::string& name, bool v) { j[name] = v; }
  void value(const std::string& name, const std::string& v) { j[name] = json_text(v); }
  void value(const std::string& name, std::nullopt_t) { j[name] = nullptr; }
  template <std::integral T>
  void value(const std::string& name, T v) {
    j[name] = v;
  }
  template <class F>
  void object(const std::string& name, F&& f) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    json_writer w{o};
    f(w);
    j[name] = std::move(o);
  }
};

/// Fields `visit` writes (a `visit_*_fields` of block_fields.hpp) as a JSON object.
template <class Visit>
nlohmann::ordered_json json_of(Visit&& visit) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  json_writer w{j};
  visit(w);
  return j;
}

inline nlohmann::ordered_json objective_json(const std::vector<term_value>& terms, double total) {
  return json_of([&](json_writer& w) { visit_objective_fields(terms, total, w); });
}

inline std::vector<term_value> terms_from(const nlohmann::ordered_json& objective, double& total) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  total = number_from(objective.at("total"), nan);
  std::vector<term_value> terms;
  for (const auto& [name, t] : objective.at("terms").items()) {
    terms.push_back(term_value{name, number_from(t.at("weight"), nan), number_from(t.at("scale"), nan),
                               number_from(t.at("raw"), nan),
                               t.value("constant", false)});  // absent in earlier versions' reports
  }
  return terms;
}

inline nlohmann::ordered_json certificate_json(const block_certificate& c) {
  return json_of([&](json_writer& w) { visit_certificate_fields(c, w); });
}

inline block_certificate certificate_from(const nlohmann::ordered_json& j) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  block_certificate c;
  c.method = j.at("method").get<std::string>();
  for_each_certificate_number(c, [&](const char* name, double& v) { v = number_from(j.at(name), nan); });
  c.reason = j.value("reason", std::string());
  return c;
}

inline nlohmann::ordered_json block_json(const block_result& b) {
  return json_of([&](json_writer& w) { visit_block_fields(b, w); });
}

/// Reads block_json back (a report holds no ids or history). Throws nlohmann's exceptions on a
/// missing or mistyped field.
inline block_result block_from_json(const nlohmann::ordered_json& b) {
  block_result x;
  x.block = b.at("block").get<index_t>();
  x.items = b.at("items").get<index_t>();
  x.kept = b.at("kept").get<index_t>();
  x.selected = b.at("selected").get<index_t>();
  if (b.contains("optimizer") && b.at("optimizer").is_string()) {  // absent in earlier versions' reports
    x.optimizer = b.at("optimizer").get<std::string>();
  }
  x.steps_run = b.at("steps_run").get<index_t>();
  x.zero_variance_steps = b.at("zero_variance_steps").get<index_t>();
  x.nonfinite_steps = b.at("nonfinite_steps").get<index_t>();
  x.from_checkpoint = b.at("from_checkpoint").get<bool>();
  x.optimize_seconds = number_from(b.at("seconds").at("optimize"), 0.0);
  x.evaluate_seconds = number_from(b.at("seconds").at("evaluate"), 0.0);
  x.terms = terms_from(b.at("objective"), x.objective);
  if (b.contains("graph")) {
    const auto& g = b.at("graph");
    x.graph = block_graph{g.at("neighbors").get<index_t>(), g.at("source").get<std::string>(),
                          number_from(g.at("seconds"), 0.0), g.at("bytes").get<std::size_t>(), std::nullopt};
    if (g.contains("recall")) x.graph.recall = number_from(g.at("recall"), 0.0);
  }
  if (b.contains("certificate")) x.certificate = certificate_from(b.at("certificate"));
  return x;
}

}  // namespace detail

/// @brief The report as JSON (fields in the documented order).
[[nodiscard]] inline nlohmann::ordered_json report_json(const run_report& r) {
  nlohmann::ordered_json j;
  char hash[24];
  std::snprintf(hash, sizeof hash, "%016" PRIx64, r.input_hash);
  j["program"] = r.program;
  j["version"] = r.version;
  j["configuration"] = r.configuration;
  j["input"] = {{"rows", r.rows}, {"dims", r.dims}, {"hash", hash}};
  j["resumed"] = r.resumed;
  j["prune_threshold"] = detail::number_or_null(r.prune_threshold);
  j["blocks"] = nlohmann::ordered_json::array();
  index_t steps = 0;
  for (const auto& b : r.blocks) {
    j["blocks"].push_back(detail::block_json(b));
    steps += b.steps_run;
  }
  double total = 0.0;
  const auto terms = total_terms(r.blocks, total);
  nlohmann::ordered_json& t = j["total"];
  t["blocks"] = r.blocks.size();
  t["selected"] = r.selected;
  t["steps_run"] = steps;
  t["objective"] = detail::objective_json(terms, total);
  if (const auto c = total_certificate(r.blocks, total)) t["certificate"] = detail::certificate_json(*c);
  t["seconds"] = nlohmann::ordered_json::object();
  for (const auto& [phase, s] : r.seconds) t["seconds"][phase] = detail::number_or_null(s);
  return j;
}

/// @brief Reads a report back (the blocks without their ids and history, which a report does
/// not hold). Parse the text into an `ordered_json`: the order of the terms is f's order, which a
/// `nlohmann::json` (sorted keys) loses.
/// @throws invalid_input (`source`) when a field is missing or has the wrong type
[[nodiscard]] inline run_report read_report(const nlohmann::ordered_json& j, const std::string& source = "report") {
  try {
    run_report r;
    r.program = j.at("program").get<std::string>();
    r.version = j.at("version").get<std::string>();
    r.configuration = nlohmann::ordered_json(j.at("configuration"));
    r.rows = j.at("input").at("rows").get<index_t>();
    r.dims = j.at("input").at("dims").get<index_t>();
    r.input_hash = std::stoull(j.at("input").at("hash").get<std::string>(), nullptr, 16);
    r.resumed = j.at("resumed").get<bool>();
    r.prune_threshold = detail::number_from(j.at("prune_threshold"), -std::numeric_limits<double>::infinity());
    r.selected = j.at("total").at("selected").get<index_t>();
    for (const auto& b : j.at("blocks")) r.blocks.push_back(detail::block_from_json(b));
    for (const auto& [phase, s] : j.at("total").at("seconds").items()) {
      r.seconds.emplace_back(phase, detail::number_from(s, 0.0));
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw invalid_input(source, std::string("not a datamask report: ") + e.what());
  } catch (const std::logic_error& e) {  // stoull
    throw invalid_input(source, std::string("not a datamask report: bad input.hash (") + e.what() + ")");
  }
}

/// @brief Reads a report file.
/// @throws invalid_input naming the file when it cannot be read or is not a report
[[nodiscard]] inline run_report read_report_file(const std::string& path) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(read_file(path), nullptr, false);
  if (j.is_discarded()) throw invalid_input(path, "not JSON");
  return read_report(j, path);
}

}  // namespace datamask::io
