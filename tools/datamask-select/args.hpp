// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: the command line (options, their defaults, ranges and --help, through CLI11)
// and the configuration. Everything here is about flags; what they mean is the library's.

#include <charconv>
#include <cstdio>
#include <limits>
#include <cmath>
#include <type_traits>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include <datamask/datamask.hpp>
#include <datamask/settings.hpp>

namespace dmselect {

using datamask::index_t;

/// Bad usage or input: exit code 2, one line naming the option or file.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct config {
  std::vector<std::string> embeddings;
  std::vector<std::string> quality;
  std::vector<double> quality_weights;
  std::string ids;
  double ratio = 0.1;
  index_t count = 0;
  std::vector<std::string> objectives;  // empty: pairwise
  std::vector<double> objective_weights;
  double lambda = 0.5;
  std::string kernel = "cosine";
  double gamma = 1.0;
  std::string optimizer = "pg";
  index_t rollouts = 128;
  index_t steps = 1000;
  double active_fraction = 0.05;
  index_t min_active = 1024;
  double lr_max = 10.0;
  double lr_min = 1.0;
  std::string schedule = "linear";
  std::string init = "uniform";
  double prune = 0.0;
  index_t block_size = 1000000;
  std::uint64_t seed = 0;
  int threads = 0;
  std::string logprob = "relaxed";
  std::string scaling = "calibrated";
  std::vector<double> scales;  // --scales: fixed divisors, one per term of f
  bool normalized = false;
  std::string out, report, log, plot, checkpoint;
  index_t checkpoint_every = 100;
  bool resume = false;
  bool demo = false;
  bool quiet = false;
  std::string quality_weights_text, objective_weights_text, scales_text;  // lists as given
  std::set<std::string> given;  // options set on the command line

  [[nodiscard]] bool has(const std::string& name) const { return given.count(name) != 0; }

  /// Everything that determines the selection, in one canonical text (the checkpoint refuses a
  /// resume when it changes). Output paths, threads and progress settings are not part of it:
  /// the selection does not depend on them.
  [[nodiscard]] std::string canonical() const {
    auto num = [](double v) {
      char buf[64];
      const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest exact form
      return std::string(buf, r.ptr);
    };
    auto list = [&](const auto& v) {
      std::string s;
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) s += ',';
        if constexpr (std::is_same_v<std::decay_t<decltype(v[i])>, double>) {
          s += num(v[i]);
        } else {
          s += v[i];
        }
      }
      return s;
    };
    std::ostringstream os;
    os << "ratio=" << num(ratio) << "\ncount=" << count << "\nobjective=" << list(objectives)
       << "\nobjective-weights=" << list(objective_weights) << "\nquality-weights="
       << list(quality_weights) << "\nlambda=" << num(lambda) << "\nkernel=" << kernel
       << "\ngamma=" << num(gamma) << "\noptimizer=" << optimizer << "\nrollouts=" << rollouts
       << "\nsteps=" << steps << "\nactive-fraction=" << num(active_fraction)
       << "\nmin-active=" << min_active << "\nlr-max=" << num(lr_max) << "\nlr-min=" << num(lr_min)
       << "\nschedule=" << schedule << "\ninit=" << init << "\nprune=" << num(prune)
       << "\nblock-size=" << block_size << "\nseed=" << seed << "\nlogprob=" << logprob
       << "\nscaling=" << scaling << "\nscales=" << list(scales) << "\nnormalized=" << (normalized ? "true" : "false")
       << "\ndemo=" << (demo ? "true" : "false") << "\n";
    return os.str();
  }
};

namespace detail {

/// A comma-separated list of numbers (CLI11 would name the option but not the bad item).
inline std::vector<double> parse_list(const std::string& opt, const std::string& v) {
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
    out.push_back(x);
    if (c == std::string::npos) break;
    start = c + 1;
  }
  return out;
}

/// A CLI11 check that a number is finite and inside a range, each end open or closed; its
/// description is the range as --help shows it.
inline CLI::Validator in_range(double lo, double hi, bool lo_open = false, bool hi_open = false) {
  std::ostringstream desc;
  desc << "in " << (lo_open ? "(" : "[") << lo << ", " << hi << (hi_open ? ")" : "]");
  const std::string text = desc.str();
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        const bool ok = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
        return ok ? std::string() : "must be " + text + ", found " + v;
      },
      text);
}
inline constexpr double inf = std::numeric_limits<double>::infinity();

/// The range of a setting, from the library's settings table (datamask/settings.hpp): the one
/// place ranges are kept. Throws std::logic_error for a name the table lacks (a programming error).
inline CLI::Validator from_table(std::string_view name) {
  std::optional<CLI::Validator> v;
  datamask::visit_settings([&](const auto& s) {
    using entry = std::remove_cvref_t<decltype(s)>;
    if constexpr (entry::kind == datamask::setting_kind::number) {
      if (s.name == name) {
        v = in_range(static_cast<double>(s.min), static_cast<double>(s.max), s.min_open, s.max_open);
      }
    }
  });
  if (!v) throw std::logic_error("datamask-select: no setting '" + std::string(name) + "' in the table");
  return *v;
}

/// The options that do not choose a setting's value but where data comes from and goes to.
inline void add_file_options(CLI::App& app, config& c) {
  // A repeated option takes its last value (scripts append overrides), except the lists below.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  constexpr auto all = CLI::MultiOptionPolicy::TakeAll;
  app.add_option("--embeddings", c.embeddings,
                 "PATH: .npy float32 or float16, C order, n x d; memory-mapped. Repeat, or give a directory "
                 "(its *.npy files in name order), to read shards as one corpus. Required unless --demo.")
      ->multi_option_policy(all);
  app.add_option("--quality", c.quality,
                 "PATH: quality scores, a .npy float file (one column) or a CSV file (every column a score; "
                 "optional header). May repeat. Required unless --lambda 0.")
      ->multi_option_policy(all);
  app.add_option("--ids", c.ids, "PATH: .npy int64, one unique id per row (default: the row numbers)");
  app.add_option("--out", c.out, "PATH: selected ids, .npy (int64), .csv or .txt, in selection order "
                                 "(pg: by final logit, descending, block by block)");
  app.add_option("--report", c.report, "PATH: JSON report: version, configuration, per block and in total the number "
                                       "selected, objective.total, objective.terms.<name>.{raw,scale,weight}, steps, seconds");
  app.add_option("--log", c.log, "PATH: CSV, one row per block and step (reward mean and max, each term)");
  app.add_option("--plot", c.plot, "PATH: SVG of the log");
  app.add_option("--checkpoint", c.checkpoint,
                 "DIR: save logits and step counters of each block every --checkpoint-every steps and on "
                 "SIGINT/SIGTERM; a manifest records finished blocks and hashes of the inputs and options");
  app.add_flag("--resume", c.resume, "continue the run in --checkpoint DIR, to exactly the selection of an "
                                     "uninterrupted run; refused if inputs or options changed");
  app.add_flag("--quiet", c.quiet, "no progress output");
  app.add_flag("--demo", c.demo, "generate the synthetic corpus (20000 x 32, clustered; datamask/synthetic.hpp) "
                                 "and run on it");
}

/// The settings of the selection, each with its default, range or choices.
inline void add_setting_options(CLI::App& app, config& c, std::vector<std::pair<std::string, std::string*>>& lists) {
  lists = {{"--quality-weights", &c.quality_weights_text}, {"--objective-weights", &c.objective_weights_text},
           {"--scales", &c.scales_text}};
  app.add_option("--quality-weights", c.quality_weights_text, "W,...: weight per score column, in order (default: all 1)");
  app.add_option("--ratio", c.ratio, "fraction of items to select, in (0, 1] (default 0.1)");
  app.add_option("--count", c.count, "select exactly S items instead, S >= 1 (excludes --ratio)")->check(in_range(1, inf));
  app.add_option("--objective", c.objectives, "pairwise | facility | disf (default pairwise); may repeat, each a "
                                              "separately scaled term")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::IsMember({"pairwise", "facility", "disf"}));
  app.add_option("--objective-weights", c.objective_weights_text, "W,...: weight per --objective, in order (default: all 1)");
  app.add_option("--lambda", c.lambda, "weight of quality against diversity, in [0, 1] (default 0.5); 1 = top-S by "
                                       "quality, 0 = diversity only")->check(from_table("lambda"));
  app.add_option("--kernel", c.kernel, "facility-location similarity: cosine | cosine2 | dot | rbf (default cosine)")
      ->check(CLI::IsMember({"cosine", "cosine2", "dot", "rbf"}));
  app.add_option("--gamma", c.gamma, "rbf bandwidth, in (0, inf) (default 1)")->check(from_table("gamma"));
  app.add_flag("--normalized", c.normalized, "declare the embeddings already unit-normalised (default: normalise)");
  app.add_option("--optimizer", c.optimizer, "pg | greedy | lazy | stochastic (default pg: policy gradient); the "
                                             "greedy baselines optimise the same f and write ids in the order picked")
      ->check(CLI::IsMember({"pg", "greedy", "lazy", "stochastic"}));
  app.add_option("--rollouts", c.rollouts, "masks sampled per step, >= 2 (default 128; the paper: 128)")->check(from_table("rollouts"));
  app.add_option("--steps", c.steps, "policy-gradient steps per block, >= 0 (default 1000; the paper: 10000); 0: calibrate and read out the initial logits")
      ->check(from_table("steps"));
  app.add_option("--active-fraction", c.active_fraction, "share of a block active at each step, in (0, 1] (default 0.05)")
      ->check(from_table("active-fraction"));
  app.add_option("--min-active", c.min_active, "floor of the active batch size, >= 1 (default 1024)")->check(from_table("min-active"));
  app.add_option("--lr-max", c.lr_max, "first learning rate, in (0, inf) (default 10)")->check(from_table("lr-max"));
  app.add_option("--lr-min", c.lr_min, "last learning rate, in [0, --lr-max] (default 1)")->check(from_table("lr-min"));
  app.add_option("--schedule", c.schedule, "linear | cosine | constant (default linear; constant uses --lr-max)")
      ->check(CLI::IsMember({"linear", "cosine", "constant"}));
  app.add_option("--init", c.init, "uniform | quality: initial logits (default uniform)")->check(CLI::IsMember({"uniform", "quality"}));
  app.add_option("--prune", c.prune, "drop items below the P-quantile of quality (global over the corpus), in [0, 1) "
                                     "(default 0: keep all)")->check(from_table("prune"));
  app.add_option("--logprob", c.logprob, "relaxed | plackett-luce: gradient of the log-probability (default relaxed)")
      ->check(CLI::IsMember({"relaxed", "plackett-luce"}));
  app.add_option("--scaling", c.scaling, "calibrated | raw | group | fixed: how terms are put on one scale (default "
                                         "calibrated: divide by the std over 256 random subsets of each block)")
      ->check(CLI::IsMember({"calibrated", "raw", "group", "fixed"}));
  app.add_option("--scales", c.scales_text, "S,...: divisor per term of f, in the report's order; implies --scaling "
                                            "fixed: one f for every block and seed");
  app.add_option("--block-size", c.block_size, "items per block, >= 2; a larger corpus is split by a hash of the id "
                                               "(default 1000000)")->check(in_range(2, inf));
  app.add_option("--seed", c.seed, "random seed, an integer >= 0 (default 0); same seed, same selection")
      ->check(from_table("seed"));
  app.add_option("--threads", c.threads, "CPU threads, >= 0 (default 0: all); does not change the selection")
      ->check(from_table("threads"));
  app.add_option("--checkpoint-every", c.checkpoint_every, "steps between checkpoints, >= 1 (default 100)")
      ->check(in_range(1, inf));
}

}  // namespace detail

/// The help text's closing lines.
inline constexpr const char* help_footer =
    "Outputs are each written to a temporary file, then renamed; no two outputs may share a path, and no output "
    "may be an input.\nExit codes: 0 success, 2 bad input or usage (one line on stderr naming the file or option), "
    "1 internal error, 130/143 interrupted (SIGINT/SIGTERM; no output written).";

inline void check_args(config& c);

/// Whether `name` (for example "--prune") is an option of the program: library errors name a
/// setting, which the program reports as the option it came from.
inline bool is_option(const std::string& name) {
  config c;
  CLI::App app;
  std::vector<std::pair<std::string, std::string*>> lists;
  detail::add_file_options(app, c);
  detail::add_setting_options(app, c, lists);
  return app.get_option_no_throw(name) != nullptr;
}

/// Parses argv into c. Returns false when --help was printed. Throws usage_error.
inline bool parse_args(int argc, char** argv, config& c) {
  CLI::App app("datamask-select: select LLM pre-training data by policy-gradient mask learning (DATAMASK)",
               "datamask-select");
  app.footer(help_footer);
  app.get_formatter()->column_width(26);
  std::vector<std::pair<std::string, std::string*>> lists;
  detail::add_file_options(app, c);
  detail::add_setting_options(app, c, lists);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return false;
  } catch (const CLI::ParseError& e) {
    throw usage_error(std::string(e.what()) + " (see --help)");
  }
  for (const CLI::Option* o : app.get_options()) {
    if (o->count() > 0) c.given.insert(o->get_name());
  }
  for (const auto& [name, text] : lists) {
    if (c.has(name)) (name == "--scales" ? c.scales : name == "--quality-weights" ? c.quality_weights
                                                                                   : c.objective_weights) =
        detail::parse_list(name, *text);
  }
  check_args(c);
  return true;
}

/// Checks that need no input file: combinations and ranges CLI11 cannot express.
inline void check_args(config& c) {
  for (std::size_t i = 0; i < c.objectives.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (c.objectives[i] == c.objectives[j]) throw usage_error("--objective: '" + c.objectives[i] + "' given twice");
    }
  }
  if (c.objectives.empty()) c.objectives.push_back("pairwise");
  if (c.lr_min > c.lr_max && c.schedule != "constant") {  // the table's rule: constant uses --lr-max only
    std::ostringstream os;
    os << "--lr-min: " << c.lr_min << " is above --lr-max " << c.lr_max << "; the rate decays from --lr-max to --lr-min";
    throw usage_error(os.str());
  }
  if (c.demo && !c.embeddings.empty()) throw usage_error("--demo: generates its own corpus; drop --embeddings");
  if (!c.demo && c.embeddings.empty()) throw usage_error("--embeddings: required (or --demo; see --help)");
  if (c.has("--ratio") && c.has("--count")) throw usage_error("--count: give --ratio or --count, not both");
  if (c.has("--count") && c.count < 1) throw usage_error("--count: must be at least 1, found " + std::to_string(c.count));
  if (!(c.ratio > 0.0 && c.ratio <= 1.0)) {
    std::ostringstream os;
    os << "--ratio: must be in (0, 1], found " << c.ratio;
    throw usage_error(os.str());
  }
  if (!(c.lambda >= 0.0 && c.lambda <= 1.0)) throw usage_error("--lambda: must be in [0, 1]");
  if (!c.demo && c.lambda > 0.0 && c.quality.empty()) {
    throw usage_error("--quality: required unless --lambda 0 (lambda weighs the quality term)");
  }
  if (!c.quality_weights.empty() && c.quality_weights.size() != c.quality.size() && !c.quality.empty()) {
    // A CSV file holds several columns; the count is checked again once it is read.
    bool csv = false;
    for (const auto& q : c.quality) csv = csv || (q.size() >= 4 && q.substr(q.size() - 4) == ".csv");
    if (!csv) {
      throw usage_error("--quality-weights: " + std::to_string(c.quality_weights.size()) +
                        " weights for " + std::to_string(c.quality.size()) + " --quality columns");
    }
  }
  for (double w : c.quality_weights) {
    if (w < 0.0) throw usage_error("--quality-weights: weights must be >= 0");
  }
  if (!c.objective_weights.empty() && c.objective_weights.size() != c.objectives.size()) {
    throw usage_error("--objective-weights: " + std::to_string(c.objective_weights.size()) +
                      " weights for " + std::to_string(c.objectives.size()) + " --objective terms");
  }
  for (double w : c.objective_weights) {
    if (w < 0.0) throw usage_error("--objective-weights: weights must be >= 0");
  }
  if (!c.scales.empty()) {
    if (c.has("--scaling") && c.scaling != "fixed") {
      throw usage_error("--scales: given with --scaling " + c.scaling + "; fixed scales need --scaling fixed");
    }
    c.scaling = "fixed";
    std::size_t terms = c.lambda > 0.0 ? 1 : 0;
    if (c.lambda < 1.0) {
      for (std::size_t i = 0; i < c.objectives.size(); ++i) {
        terms += c.objective_weights.empty() || c.objective_weights[i] > 0.0 ? 1 : 0;
      }
    }
    if (c.scales.size() != terms) {
      throw usage_error("--scales: " + std::to_string(c.scales.size()) + " values for " +
                        std::to_string(terms) + " terms of f (quality when lambda > 0, then each "
                        "--objective with a positive weight when lambda < 1)");
    }
    for (double v : c.scales) {
      if (!(std::isfinite(v) && v > 0.0)) throw usage_error("--scales: every scale must be finite and > 0");
    }
  } else if (c.scaling == "fixed") {
    throw usage_error("--scaling: fixed needs --scales");
  }
  if (c.rollouts < 2) throw usage_error("--rollouts: must be at least 2");
  if (c.steps < 0) throw usage_error("--steps: must be >= 0");
  if (!(c.active_fraction > 0.0 && c.active_fraction <= 1.0)) throw usage_error("--active-fraction: must be in (0, 1]");
  if (c.min_active < 1) throw usage_error("--min-active: must be at least 1");
  if (!(c.prune >= 0.0 && c.prune < 1.0)) throw usage_error("--prune: must be in [0, 1)");
  if (c.block_size < 2) throw usage_error("--block-size: must be at least 2");
  if (c.threads < 0) throw usage_error("--threads: must be >= 0 (0: all)");
  if (c.checkpoint_every < 1) throw usage_error("--checkpoint-every: must be at least 1");
  if (c.resume && c.checkpoint.empty()) throw usage_error("--resume: needs --checkpoint DIR");
  if (c.init == "quality" && c.quality.empty() && !c.demo) throw usage_error("--init: quality needs --quality");
  if (c.prune > 0.0 && c.quality.empty() && !c.demo) throw usage_error("--prune: needs --quality");
  for (const std::string* p : {&c.out}) {
    if (p->empty()) continue;
    const auto dot = p->rfind('.');
    const std::string ext = dot == std::string::npos ? "" : p->substr(dot);
    if (ext != ".npy" && ext != ".csv" && ext != ".txt") {
      throw usage_error(*p + ": --out must end in .npy, .csv or .txt");
    }
  }
  if (c.demo) {
    // Small, fast defaults for the built-in corpus unless given.
    if (!c.has("--steps")) c.steps = 300;
    if (!c.has("--rollouts")) c.rollouts = 64;
  }
}

}  // namespace dmselect
