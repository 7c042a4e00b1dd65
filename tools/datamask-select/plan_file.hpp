// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: the plan file. What every worker of a spread run must agree on and cannot
// compute from its own rows (the prune threshold: a quantile of every score; f's calibration: a
// sample drawn from every row) is computed once, by `datamask-select plan --plan PLAN.json` with
// the run's inputs and options, and read by each scheduler shard (`--plan PLAN.json`), which then
// reads only its own rows. The file names the inputs (their fingerprint: names, sizes, shapes)
// and the options it was made for; a worker refuses a plan of other inputs or options. Doubles
// are hexadecimal floats, so a worker reads the bits the plan step computed.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <datamask/io/file.hpp>
#include <datamask/core/options.hpp>

#include "args.hpp"
#include "block_record.hpp"
#include "spread.hpp"

namespace dmselect {

/// The plan format this version writes and reads.
inline constexpr int plan_format = 1;

/// A plan: the values every worker takes from it, and what it was made for.
struct run_plan {
  std::uint64_t fingerprint = 0;
  std::string canonical;
  std::optional<double> prune_threshold;
  std::vector<datamask::term_value> calibration;  // empty: no calibration over the corpus
  std::vector<std::pair<index_t, std::uint64_t>> rows_hashes;  // every group's rows of the score and id files
  std::string version = datamask::version_string;
};

/// Writes `p` to `path`, atomically.
inline void write_plan(const std::string& path, const run_plan& p) {
  nlohmann::ordered_json j;
  j["format"] = "datamask-select plan";
  j["format_version"] = plan_format;
  j["version"] = p.version;
  j["fingerprint"] = hex64(p.fingerprint);
  j["canonical"] = p.canonical;
  j["prune_threshold"] = p.prune_threshold ? nlohmann::ordered_json(hexf(*p.prune_threshold)) : nlohmann::ordered_json(nullptr);
  j["calibration"] = nlohmann::ordered_json::array();
  for (const auto& t : p.calibration) {
    j["calibration"].push_back({t.name, hexf(t.weight), hexf(t.scale), hexf(t.raw), t.constant});
  }
  j["groups"] = nlohmann::ordered_json::array();
  for (const auto& [g, h] : p.rows_hashes) j["groups"].push_back({g, hex64(h)});
  seal(j);
  datamask::io::write_file_atomic(path, j.dump(1) + "\n");
}

/// Reads the plan at `path` for a run of `c` on inputs of `fingerprint` whose groups' rows of the
/// score and id files hash to `rows_hashes` (the groups this worker read). Throws usage_error
/// naming the file when it is not a plan, is damaged, or was made by another version, for other
/// inputs (names, sizes, shapes, or the content of this worker's scores and ids) or with other
/// options.
inline run_plan read_plan(const std::string& path, const config& c, std::uint64_t fingerprint,
                          const std::vector<std::pair<index_t, std::uint64_t>>& rows_hashes) {
  run_plan p;
  try {
    const auto j = nlohmann::ordered_json::parse(datamask::io::read_file(path));
    if (j.at("format").get<std::string>() != "datamask-select plan") throw usage_error("--plan " + path + ": not a datamask-select plan");
    check_seal(j);
    p.version = j.at("version").get<std::string>();
    if (j.at("format_version").get<int>() != plan_format || p.version != datamask::version_string) {
      throw usage_error("--plan " + path + ": written by datamask-select " + p.version + "; plan again with this one (" +
                        datamask::version_string + ")");
    }
    p.fingerprint = std::stoull(j.at("fingerprint").get<std::string>(), nullptr, 16);
    p.canonical = j.at("canonical").get<std::string>();
    if (!j.at("prune_threshold").is_null()) p.prune_threshold = unhexf(j.at("prune_threshold").get<std::string>());
    for (const auto& t : j.at("calibration")) {
      p.calibration.push_back(datamask::term_value{t.at(0).get<std::string>(), unhexf(t.at(1).get<std::string>()),
                                                   unhexf(t.at(2).get<std::string>()), unhexf(t.at(3).get<std::string>()),
                                                   t.at(4).get<bool>()});
    }
    for (const auto& g : j.at("groups")) {
      p.rows_hashes.emplace_back(g.at(0).get<index_t>(), std::stoull(g.at(1).get<std::string>(), nullptr, 16));
    }
  } catch (const nlohmann::json::exception& e) {
    throw usage_error("--plan " + path + ": not a datamask-select plan, or damaged (" + e.what() + ")");
  } catch (const datamask::invalid_input& e) {
    throw usage_error("--plan " + path + ": " + e.what());
  } catch (const std::logic_error& e) {  // std::stoull
    throw usage_error("--plan " + path + ": damaged (" + e.what() + ")");
  } catch (const usage_error& e) {
    const std::string what = e.what();
    throw usage_error(what.rfind("--plan", 0) == 0 ? what : "--plan " + path + ": damaged: " + what);
  }
  if (p.fingerprint != fingerprint) {
    throw usage_error("--plan " + path + ": made for other inputs (their names, sizes or shapes differ); run "
                      "`datamask-select plan` on these");
  }
  for (const auto& [g, h] : rows_hashes) {
    const auto at = std::find_if(p.rows_hashes.begin(), p.rows_hashes.end(), [g = g](const auto& e) { return e.first == g; });
    if (at == p.rows_hashes.end() || at->second != h) {
      throw usage_error("--plan " + path + ": made for other inputs (the scores or ids of group " + std::to_string(g) +
                        " differ from the plan's: changed since it was made?); run `datamask-select plan` on these");
    }
  }
  if (p.canonical != c.canonical()) {
    throw usage_error("--plan " + path + ": made with other options (" +
                      first_difference(p.canonical, c.canonical(), "the plan", "this run") + "); plan again with these");
  }
  return p;
}

}  // namespace dmselect
