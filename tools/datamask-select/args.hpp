// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: the command line (through CLI11) and the configuration. Every option that
// sets a library setting is built from the library's settings table (datamask/learners/settings.hpp:
// name, help, default, range or choices); the program's own numeric options use the same entry
// types in a small table of their own. Nothing here keeps a default, range or spelling twice.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <datamask/run/block_select.hpp>
#include <datamask/datamask.hpp>
#include <datamask/run/report.hpp>
#include <datamask/learners/settings.hpp>
#include <datamask/version.hpp>

#include <datamask/frontend/block_backend.hpp>
#include <datamask/frontend/registry.hpp>
#include <datamask/frontend/request.hpp>

namespace dmselect {

using datamask::index_t;

/// Bad usage or input: exit code 2, one line naming the option or file.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct config {
  std::string program = "datamask-select";  // as messages name it: the file name of argv[0]
  datamask::settings run;             // the library's settings of a run (ratio, lambda, steps, ...)
  datamask::learner_settings learn;   // the policy, schedule and kernel settings
  datamask::continuous_settings ascent;  // the continuous learner's ascent (--optimizer continuous)
  datamask::polish_settings polish;      // and its polish
  // The program's own options (their defaults live here, once).
  std::vector<std::string> embeddings;
  std::vector<std::string> quality;
  std::vector<double> quality_weights;
  std::string ids;
  // What reading the inputs found, for the outputs and the report (merge: from the parts).
  bool ids_unsigned = false;                 // the --ids file holds uint64
  std::vector<std::string> quality_columns;  // each score column read: "file" or "file (column)"
  struct shard_file {
    std::string path;
    index_t rows = 0;
    std::uint64_t bytes = 0;
  };
  std::vector<shard_file> shard_files;  // each embedding file read, in order
  std::vector<std::string> objectives;  // empty until check_args: pairwise
  std::vector<double> objective_weights;
  dmfront::objective_registry registry;  // the objectives --objective may name
  // Facility location on a kNN graph (sparse_facility.hpp): K neighbours built per block, or a
  // graph loaded from PREFIX.ids.npy and PREFIX.sims.npy (0 and empty: dense facility location).
  index_t neighbors = 0;
  std::string graph;
  // auto: lazy for facility location alone, else continuous when every diversity term of f has a
  // relaxation, else stochastic (check_args resolves it; `requested` keeps what was asked for, for
  // the report).
  std::string optimizer = "auto";
  std::string requested;
  index_t block_size = 1000000;
  std::string out, report, log, plot, checkpoint;
  index_t checkpoint_every = 100;
  bool resume = false;
  bool certify = false;  // each block's certificate (datamask::block_run_settings::certify)
  bool demo = false;
  bool quiet = false;
  // Spreading the blocks over independent tasks (shards.hpp): "I/N" or "slurm", and the folder
  // of the parts; `merge` reads the parts.
  std::string shard, parts;
  std::vector<std::string> merged;  // the part files `merge` reads
  // The corpus-wide values (S, the prune threshold, the calibration) of `datamask-select plan`:
  // the file it writes (planning) or the one a worker reads.
  std::string plan;
  bool planning = false;
  std::set<std::string> given;  // options set on the command line

  [[nodiscard]] bool has(const std::string& name) const { return given.count(name) != 0; }

  /// Everything that determines the selection, typed (the report's configuration); see canonical().
  [[nodiscard]] nlohmann::ordered_json selection_json() const;
  /// The same as "name=value" lines: the checkpoint refuses a resume when it changes. Output
  /// paths, threads and progress settings are not part of it (the selection does not depend on them).
  [[nodiscard]] std::string canonical() const {
    std::string s;
    const nlohmann::ordered_json j = selection_json();
    for (const auto& [k, v] : j.items()) s += k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()) + "\n";
    return s;
  }
};

/// One --quality value: a file, and for a CSV file optionally the one column to read
/// ("scores.csv:quality"). Split at the last ':' only when what precedes it ends in ".csv", so a
/// path that holds ':' (and names no column) is still one file.
struct quality_source {
  std::string file;
  std::string column;  // empty: the .npy's scores, or every column of the CSV file
  [[nodiscard]] bool csv() const { return file.ends_with(".csv"); }
};

inline quality_source quality_source_of(const std::string& value) {
  const auto colon = value.rfind(':');
  if (colon != std::string::npos) {
    quality_source s{value.substr(0, colon), value.substr(colon + 1)};
    if (s.csv()) return s;
  }
  return {value, ""};
}

namespace detail {

using datamask::number_setting;
inline constexpr index_t index_max = std::numeric_limits<index_t>::max();

/// The program's own numeric options, as entries of the same kind as the library's table.
template <class F>
void visit_program_settings(F&& f) {
  f(number_setting<config, index_t>{"block-size", "block_size",
                                    "items per block: consecutive input files are grouped to at least this many "
                                    "rows, each group split into blocks by a hash of the id",
                                    &config::block_size, 2, index_max});
  f(number_setting<config, index_t>{"checkpoint-every", "checkpoint_every",
                                    "steps (pg) or iterations (continuous) between checkpoints",
                                    &config::checkpoint_every, 1, index_max});
}

/// Settings that do not change the selection (left out of the canonical configuration).
inline bool not_selection(std::string_view name) { return name == "threads" || name == "facility-cache"; }

/// Every option entry: the library's table (less what the program sets), then the program's.
template <class F>
void visit_options(F&& f) {
  dmfront::visit_options(f);
  visit_program_settings(f);
}

/// The object of `c` that holds the members of table entry `Entry`.
template <class Entry, class C>
auto& owner(C& c) {
  using O = typename Entry::owner_type;  // the struct that declares the entry, or one of its bases
  if constexpr (std::is_base_of_v<O, datamask::settings>) {
    return c.run;
  } else if constexpr (std::is_base_of_v<O, datamask::learner_settings>) {
    return c.learn;
  } else if constexpr (std::is_same_v<O, datamask::continuous_settings>) {
    return c.ascent;
  } else if constexpr (std::is_same_v<O, datamask::polish_settings>) {
    return c.polish;
  } else {
    return c;
  }
}

/// What the program adds to a setting's help (never a default or a range: those come from the table).
inline std::string program_note(std::string_view name) {
  if (name == "prune") return "; global over the corpus (all blocks)";
  if (name == "steps") return "; --demo: 300 unless given; --optimizer pg only";
  if (name == "iterations") return "; --optimizer continuous only, as every option below up to --polish-stochastic-start";
  if (name == "rollouts") return "; --demo: 64 unless given";
  if (name == "scales") return "; given alone, it sets it";
  if (name == "count") return "; excludes --ratio";
  return "";
}

/// A comma-separated list of numbers, each in the entry's range when one is given.
inline std::vector<double> parse_list(const std::string& opt, const std::string& v,
                                      const std::function<std::string(double)>& check = {}) {
  std::vector<double> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t c = v.find(',', start);
    const std::string item = v.substr(start, c == std::string::npos ? std::string::npos : c - start);
    char* end = nullptr;
    const double x = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(x)) {
      throw usage_error(opt + ": expected a number, found '" + item + "'");
    }
    if (check && !check(x).empty()) throw usage_error(opt + ": every value " + check(x));
    out.push_back(x);
    if (c == std::string::npos) break;
    start = c + 1;
  }
  return out;
}

/// The spellings of an enum's choices (the library's lists), for CLI11.
template <class Choices>
std::vector<std::string> spellings(const Choices& choices) {
  std::vector<std::string> out;
  for (const auto& c : choices) out.emplace_back(c.name);
  return out;
}

/// The entry's range as help and messages say it (an unsigned setting: ">= 0", not "any value").
template <class Entry>
std::string range_text(const Entry& s) {
  using V = typename Entry::value_type;
  if constexpr (Entry::kind == datamask::setting_kind::number && std::is_unsigned_v<V>) {
    if (!s.bounded_above()) return ">= 0";
  }
  return s.range_text();
}

/// "must be <range>, found x" when x is outside the entry's range, else empty.
template <class Entry>
std::string range_error(const Entry& s, double x) {
  const auto lo = static_cast<double>(s.min), hi = static_cast<double>(s.max);
  const bool ok = !std::isnan(x) && (s.min_open ? x > lo : x >= lo) && (s.max_open ? x < hi : x <= hi);
  if (ok) return {};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return "must be " + range_text(s) + ", found " + buf;
}

/// A CLI11 check of a numeric entry's range; its description is the range as --help shows it.
/// A whole-number entry parses its value exactly: through a double, 2^64 would pass as 2^64 - 1.
template <class Entry>
CLI::Validator range_check(const Entry& s) {
  return CLI::Validator(
      [s](std::string& v) -> std::string {
        using V = typename Entry::value_type;
        if constexpr (std::is_integral_v<V>) {
          V x{};
          const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
          if (ec == std::errc::result_out_of_range) {
            return "must be a whole number in [" + std::to_string(s.min) + ", " + std::to_string(s.max) + "], found " + v;
          }
          if (ec == std::errc() && end == v.data() + v.size()) {
            return s.contains(x) ? std::string() : "must be " + range_text(s) + ", found " + v;
          }
        }
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size()) return "expected a number, found '" + v + "'";
        const std::string e = range_error(s, x);
        return e.empty() ? e : "must be " + range_text(s) + ", found " + v;
      },
      range_text(s));
}

/// One option from one table entry: its help and default; the range or choices show as the
/// option's check (a list's range in the help).
template <class Entry>
void add_entry(CLI::App& app, config& c, const Entry& s) {
  using field_t = std::remove_cvref_t<decltype(owner<Entry>(c).*s.member)>;
  auto& field = owner<Entry>(c).*s.member;
  const std::string opt = "--" + std::string(s.name);
  const bool list = std::is_same_v<field_t, std::vector<typename Entry::value_type>>;
  const std::string help = std::string(s.help) + program_note(s.name) + " (" + (list ? "each " + range_text(s) + "; " : "") +
                           "default " + s.default_text() + ")";
  if constexpr (std::is_same_v<field_t, std::optional<typename Entry::value_type>>) {
    throw std::logic_error("datamask-select: no option for the optional setting " + opt);
  } else if constexpr (Entry::kind == datamask::setting_kind::flag) {
    // An option on by default can be turned off: --no-NAME.
    app.add_flag(s.default_value() ? opt + ",!--no-" + std::string(s.name) : opt, field, help);
  } else if constexpr (Entry::kind == datamask::setting_kind::choice) {
    app.add_option_function<std::string>(opt, [s, &c](const std::string& v) { s.parse(v, owner<Entry>(c)); }, help)
        ->check(CLI::IsMember(spellings(s.choices)));
  } else if constexpr (std::is_same_v<field_t, std::vector<typename Entry::value_type>>) {
    app.add_option_function<std::string>(
        opt, [s, opt, &field](const std::string& v) {
          const auto values = parse_list(opt, v, [&](double x) { return range_error(s, x); });
          field.assign(values.begin(), values.end());
        },
        help);
  } else {
    app.add_option(opt, field, help)->check(range_check(s));
  }
}

/// What --certify cost on real data, over the optimising time (benchmarks/RESULTS.md, "The
/// certificate's cost on real data"): --help says it, and the note before a run's blocks.
struct certify_cost {
  static constexpr const char* pairwise = "1% to 19%";
  static constexpr const char* knn = "10% to 257%";
  static constexpr const char* dense = "31% to 594%";
};

/// The options that are the program's own: inputs, outputs, the objective list, the optimizer.
inline void add_program_options(CLI::App& app, config& c) {
  constexpr auto all = CLI::MultiOptionPolicy::TakeAll;
  app.add_option("--embeddings", c.embeddings,
                 "PATH: .npy float32, float16 or bfloat16, n x d; repeat it, or give a directory (*.npy in bytewise "
                 "name order), for shards as one corpus; required unless --demo")
      ->multi_option_policy(all);
  app.add_option("--quality", c.quality,
                 "PATH: quality scores, .npy (one column) or CSV (FILE.csv:NAME one column, FILE.csv every one); "
                 "may repeat; required unless --lambda 0")
      ->multi_option_policy(all);
  app.add_option_function<std::string>(
      "--quality-weights", [&c](const std::string& v) { c.quality_weights = parse_list("--quality-weights", v); },
      "W,...: weight per score column, in order, each >= 0 (default: all 1)");
  app.add_option("--ids", c.ids, "PATH: .npy int64 or uint64 (int32 read as int64), one unique id per row; --out writes them in "
                                 "that type (default: the row numbers)");
  std::string objectives;
  for (const auto& e : c.registry.entries()) objectives += "\n  " + e.name + (e.summary.empty() ? "" : ": " + e.summary);
  app.add_option("--objective", c.objectives, "NAME (default pairwise); may repeat, each a separately scaled term:" + objectives)
      ->multi_option_policy(all)
      ->check(CLI::IsMember(c.registry.names()));
  app.add_option_function<std::string>(
      "--objective-weights", [&c](const std::string& v) { c.objective_weights = parse_list("--objective-weights", v); },
      "W,...: weight per --objective, in order, each >= 0 (default: all 1)");
  app.add_option("--neighbors", c.neighbors,
                 "K: facility location on each block's K-nearest-neighbour graph under --kernel (built as "
                 "--knn-build says; memory n K) instead of dense")
      ->check(CLI::Range(index_t{1}, detail::index_max));
  app.add_option("--graph", c.graph,
                 "PREFIX: facility location on the kNN graph in PREFIX.ids.npy and PREFIX.sims.npy (n x K, corpus "
                 "order; docs/program.md); one block only");
  app.add_option("--optimizer", c.optimizer,
                 "continuous (--iterations), pg (--steps), the baselines greedy, lazy and stochastic, or auto: "
                 "chosen per block (docs/program.md, \"Optimizers\")")
      ->check(CLI::IsMember(spellings(datamask::enum_traits<datamask::block_optimizer>::choices)))
      ->capture_default_str();
  app.add_option("--out", c.out, "PATH: selected ids, .npy (int64; uint64 for uint64 --ids), .csv or .txt, in selection order "
                                 "(pg: by final logit, descending, block by block)");
  app.add_option("--report", c.report, "PATH: JSON report: the configuration, then per block and in total the number "
                                       "selected, f and its terms, steps, seconds, the optimizer run (docs/program.md)");
  app.add_option("--log", c.log, "PATH: CSV, one row per block and step (pg: reward mean and max, each term; continuous: one row per iteration, step size and relaxed f); not with a greedy");
  app.add_option("--plot", c.plot, "PATH: SVG of the log; not with a greedy");
  app.add_option("--checkpoint", c.checkpoint,
                 "DIR: records finished blocks, and the learners' state every --checkpoint-every steps and on "
                 "SIGINT/SIGTERM, for --resume");
  app.add_flag("--resume", c.resume, "continue the run in --checkpoint DIR, to exactly the selection of an "
                                     "uninterrupted run; refused if inputs or options changed");
  app.add_flag("--certify", c.certify,
               "prove an upper bound on each block's best f and report certificate.{bound, gap, certified_share} "
               "(DiSF: none; its cost: docs/program.md, --certify)");
  app.add_flag("--quiet", c.quiet, "no progress output");
  app.add_option("--shard", c.shard,
                 "I/N: run shard I of N's blocks into a part in --parts; slurm: I/N from the array task; then "
                 "`datamask-select merge` (docs/many-machines.md)");
  app.add_option("--parts", c.parts, "DIR: where --shard writes its part (part-00002-of-00004.json and .ids.npy "
                                     "for 2/4) and its marker (completions/00002-of-00004)");
  app.add_option("--plan", c.plan,
                 "PLAN.json from `datamask-select plan` on the same inputs and options: the prune threshold and "
                 "calibration every shard takes, so each reads its own rows only");
  app.add_flag("--demo", c.demo, "generate the synthetic corpus (20000 x 32, clustered; datamask/core/synthetic.hpp) "
                                 "and run on it");
}

/// Every option of the program, bound to c.
inline void add_options(CLI::App& app, config& c) {
  // A repeated option takes its last value (scripts append overrides), except the lists.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  add_program_options(app, c);
  visit_options([&](const auto& s) { add_entry(app, c, s); });
}

}  // namespace detail

inline nlohmann::ordered_json config::selection_json() const {
  nlohmann::ordered_json j;
  j["objective"] = objectives;
  j["objective-weights"] = objective_weights;
  j["quality-weights"] = quality_weights;
  j["optimizer"] = optimizer;
  j["demo"] = demo;
  // Only when given: runs without a graph keep their configuration (and checkpoints) unchanged.
  if (neighbors > 0) j["neighbors"] = neighbors;
  if (!graph.empty()) j["graph"] = datamask::io::json_text(graph);
  // Not the selection, but what each block's record holds: a resume or a merge keeps it as is.
  if (certify) j["certify"] = true;
  detail::visit_options([&](const auto& s) {
    using entry = std::remove_cvref_t<decltype(s)>;
    if (detail::not_selection(s.name) || s.name == "checkpoint-every") return;
    if (dmfront::graph_build_option(s.name) && neighbors == 0) return;  // only where a graph is built
    if (dmfront::certify_option(s.name) && !certify) return;            // only where a certificate is
    if (s.name == "reference-size" && run.reference_size == 0) return;  // as neighbors: only when given
    // An optimizer's own settings only where it runs: the others ignore them.
    if (!dmfront::applies(s.name, datamask::parse_enum<datamask::block_optimizer>(optimizer, "optimizer"))) return;
    const auto& v = detail::owner<entry>(*this).*s.member;
    if constexpr (entry::kind == datamask::setting_kind::choice) {
      j[std::string(s.name)] = std::string(datamask::enum_name(v));
    } else if constexpr (std::is_same_v<std::remove_cvref_t<decltype(v)>, std::optional<typename entry::value_type>>) {
      j[std::string(s.name)] = v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
    } else {
      j[std::string(s.name)] = v;
    }
  });
  return j;
}

/// The help text's closing lines.
inline constexpr const char* help_footer =
    "Outputs are each written to a temporary file, then renamed; no two outputs may share a path, and no output "
    "may be an input.\nExit codes: 0 success, 2 bad input or usage (one line on stderr naming the file or option), "
    "1 internal error,\n130/143 interrupted (SIGINT/SIGTERM; no output written, or all of it when the signal came "
    "while writing).";

inline void check_args(config& c);

/// How the program spells an option in its messages ("--lambda", "--optimizer pg").
inline const dmfront::spelling& program_spelling() {
  static const dmfront::spelling sp{
      [](std::string_view name) { return "--" + std::string(name); },
      [](std::string_view name, std::string_view value, bool) { return "--" + std::string(name) + " " + std::string(value); }};
  return sp;
}

/// A library error as the program says it: settings named as the options they came from
/// ("lr_min" -> "--lr-min"), in the input's place and where the message names a setting.
inline std::string option_message(const datamask::invalid_input& e) {
  const datamask::invalid_input named = dmfront::as_option(e, program_spelling());
  // An input that is an option of the program's own ("block_size", "objective_weights") too.
  std::string opt = "--" + e.input();
  std::replace(opt.begin(), opt.end(), '_', '-');
  config c;
  CLI::App app;
  detail::add_options(app, c);
  if (named.input() != e.input() || app.get_option_no_throw(opt) == nullptr) return named.what();
  return opt + std::string(named.what()).substr(e.input().size());
}

/// What --version prints: the version, the backend the blocks run on, whether MPI is built in.
inline std::string version_text(const std::string& program) {
#if DATAMASK_SELECT_MPI
  constexpr const char* mpi = "yes";
#else
  constexpr const char* mpi = "no";
#endif
  return program + " " + datamask::version_string + " (backend: " + dmfront::block_backend_name() +
         "; MPI: " + mpi + ")";
}

/// Parses argv into c. Returns false when --help or --version was printed. Throws usage_error.
inline bool parse_args(int argc, char** argv, config& c) {
  CLI::App app(c.program + ": select LLM pre-training data by mask learning (DATAMASK)", c.program);
  app.footer(help_footer);
  app.get_formatter()->column_width(26);
  app.set_version_flag("--version", version_text(c.program), "print the version, the backend and whether MPI is built in");
  detail::add_options(app, c);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return false;
  } catch (const CLI::CallForVersion& v) {
    std::printf("%s\n", v.what());
    return false;
  } catch (const CLI::ParseError& e) {
    throw usage_error(std::string(e.what()) + " (see --help)");
  }
  for (const CLI::Option* o : app.get_options()) {
    if (o->count() > 0) c.given.insert(o->get_name());
  }
  check_args(c);
  return true;
}

namespace detail {

/// The objective list and its weights: the registry's rules (`dmfront::objective_registry::apply`),
/// in the options' names.
inline void check_objectives(config& c) {
  if (c.objectives.empty()) c.objectives.push_back("pairwise");
  try {
    datamask::block_run_settings scratch;
    c.registry.apply(c.objectives, c.objective_weights, scratch);
  } catch (const datamask::invalid_input& e) {
    throw usage_error(option_message(e));
  }
}

/// The inputs: where the corpus and the quality scores come from.
inline void check_inputs(const config& c) {
  if (c.demo && !c.embeddings.empty()) throw usage_error("--demo: generates its own corpus; drop --embeddings");
  if (!c.demo && c.embeddings.empty()) throw usage_error("--embeddings: required (or --demo; see --help)");
  if (!c.quality_weights.empty() && c.quality_weights.size() != c.quality.size() && !c.quality.empty()) {
    // A whole CSV file holds several columns; the count is checked again once it is read.
    bool csv = false;
    for (const auto& q : c.quality) {
      const quality_source s = quality_source_of(q);
      csv = csv || (s.csv() && s.column.empty());
    }
    if (!csv) {
      throw usage_error("--quality-weights: " + std::to_string(c.quality_weights.size()) +
                        " weights for " + std::to_string(c.quality.size()) + " --quality columns");
    }
  }
  for (double w : c.quality_weights) {
    if (w < 0.0) throw usage_error("--quality-weights: weights must be >= 0");
  }
}

/// The output file name (its extension picks the format) and the checkpoint options.
inline void check_outputs(const config& c) {
  if (c.resume && c.checkpoint.empty()) throw usage_error("--resume: needs --checkpoint DIR");
  if (c.out.empty()) return;
  const auto dot = c.out.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : c.out.substr(dot);
  if (ext != ".npy" && ext != ".csv" && ext != ".txt") throw usage_error(c.out + ": --out must end in .npy, .csv or .txt");
}

}  // namespace detail


/// The run request of the options given (`c.requested`: the optimizer asked for).
inline dmfront::run_request request_of(const config& c) {
  dmfront::run_request r;
  r.settings.run = c.run;
  r.settings.learn = c.learn;
  r.settings.ascent = c.ascent;
  r.settings.polish = c.polish;
  r.settings.optimizer = datamask::parse_enum<datamask::block_optimizer>(c.requested, "optimizer");
  c.registry.apply(c.objectives, c.objective_weights, r.settings);
  r.settings.neighbors = c.neighbors;
  r.settings.certify = c.certify;
  for (const std::string& g : c.given) r.given.insert(g.substr(2));
  r.quality = c.demo || !c.quality.empty();
  r.graph = !c.graph.empty();
  return r;
}

/// Checks that need no input file: the program's own (inputs, outputs), then what the request
/// means (dmfront::resolve: options together, the library's validation), whose messages name
/// the options. Resolves --optimizer auto for the run (`c.requested` keeps what was asked).
inline void check_args(config& c) {
  detail::check_objectives(c);
  detail::check_inputs(c);
  detail::check_outputs(c);
  if (c.demo) {  // small, fast settings for the built-in corpus unless given
    if (!c.has("--steps")) c.run.steps = 300;
    if (!c.has("--rollouts")) c.run.rollouts = 64;
  }
  c.requested = c.optimizer;
  dmfront::run_request r = request_of(c);
  dmfront::resolution res;
  try {
    res = dmfront::resolve(r, program_spelling());
  } catch (const datamask::invalid_input& e) {
    throw usage_error(option_message(e));
  }
  // A run that writes nothing computes a selection only to lose it (a checkpoint keeps it, and a
  // shard writes its part: --parts is checked with --shard). Last: a bad option is the first news.
  if (c.planning) {
    for (const auto& [name, value] : {std::pair{"--out", &c.out}, {"--report", &c.report}, {"--log", &c.log},
                                      {"--plot", &c.plot}, {"--checkpoint", &c.checkpoint}, {"--shard", &c.shard},
                                      {"--parts", &c.parts}}) {
      if (!value->empty()) throw usage_error(std::string("plan: ") + name + ": the plan step selects nothing; give it to the runs that read the plan");
    }
    if (c.plan.empty()) throw usage_error("plan: give --plan PLAN.json, the file to write");
    if (c.demo) throw usage_error("plan: --demo is one process's corpus; plan the input files a spread run reads");
  }
  if (c.out.empty() && c.report.empty() && c.log.empty() && c.plot.empty() && c.checkpoint.empty() &&
      c.shard.empty() && c.parts.empty() && !c.planning) {
    throw usage_error("nothing to write: the run's selection would be lost; give --out (the selected ids), --report, "
                      "--log, --plot or --checkpoint");
  }
  c.optimizer = datamask::enum_name(res.optimizer);
  c.run = r.settings.run;  // with what the options imply (fixed scaling, the credit that runs)
  // the report records the threads used
  if (!res.threads_capped.empty()) std::fprintf(stderr, "%s: warning: --threads %s\n", c.program.c_str(), res.threads_capped.c_str());
}

}  // namespace dmselect
