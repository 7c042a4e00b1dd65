// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: the command line (options, their defaults, --help) and the configuration.

#include <charconv>
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

#include <datamask/datamask.hpp>

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

inline constexpr const char* help_text = R"(datamask-select: select LLM pre-training data by policy-gradient mask learning (DATAMASK)

Usage:
  datamask-select --embeddings E.npy [--quality Q.npy] --ratio 0.1 --out selected.npy \
                  [--report report.json] [--log steps.csv] [--plot steps.svg]
  datamask-select --demo [--out ...]        run on a built-in synthetic corpus

Inputs
  --embeddings PATH     .npy float32 or float16, C order, n x d; memory-mapped. Repeat the
                        option, or give a directory (its *.npy files in name order), to read
                        several shards as one corpus. Required unless --demo.
  --quality PATH        quality scores: a .npy float file (one score column, n values), or a
                        CSV file (every column is a score column; optional header line).
                        May repeat. Required unless --lambda 0.
  --quality-weights W   comma-separated weight per score column, in order (default: all 1)
  --ids PATH            .npy int64, one id per row (default: the row numbers); ids must be
                        unique
Selection
  --ratio R             fraction of items to select, in (0, 1] (default 0.1)
  --count S             select exactly S items instead (overrides the default ratio)
  --objective NAME      diversity objective: pairwise | facility | disf (default pairwise);
                        may repeat, each one a separately scaled term
  --objective-weights W comma-separated weight per --objective, in order (default: all 1)
  --lambda L            weight of quality against diversity, in [0, 1] (default 0.5);
                        1 = top-S by quality, 0 = diversity only
  --kernel K            facility-location similarity: cosine | cosine2 | dot | rbf
                        (default cosine)
  --gamma G             rbf bandwidth (default 1)
  --normalized          declare the embeddings already unit-normalised (default: normalise)
Optimizer
  --optimizer O         pg | greedy | lazy | stochastic (default pg: policy gradient); the
                        greedy baselines optimise the same f and write ids in the order
                        picked; with --prune they pick among the kept items only
  --rollouts G          masks sampled per step (default 128; the paper: 128)
  --steps E             policy-gradient steps per block (default 1000; the paper: 10000)
  --active-fraction B   share of a block that is active at each step (default 0.05)
  --min-active M        floor of the active batch size (default 1024)
  --lr-max X            first learning rate (default 10)
  --lr-min X            last learning rate (default 1)
  --schedule S          linear | cosine | constant (default linear; constant uses --lr-max)
  --init I              uniform | quality: initial logits (default uniform)
  --prune P             drop items below the P-quantile of quality (global over the corpus),
                        in [0, 1) (default 0: keep all)
  --logprob M           relaxed | plackett-luce: gradient of the log-probability
                        (default relaxed)
  --scaling S           calibrated | raw | group | fixed: how terms are put on one scale
                        (default calibrated: divide by the std over 256 random subsets of
                        each block, so f differs a little between blocks and seeds)
  --scales LIST         comma-separated divisor per term of f, in the report's order (quality
                        when lambda > 0, then each --objective with a positive weight when
                        lambda < 1); implies --scaling fixed: one f for every block and seed
  --block-size N        items per block; a larger corpus is split into blocks by a hash of
                        the id, each optimised independently (default 1000000)
  --seed N              random seed (default 0); same seed, same selection
  --threads N           CPU threads (default 0: all); does not change the selection
Outputs (each written to a temporary file, then renamed)
  --out PATH            selected ids: .npy (int64), .csv or .txt, in selection order
                        (pg: by final logit, descending, block by block)
  --report PATH         JSON: version, configuration, per block and in total the number
                        selected, objective.total, objective.terms.<name>.{raw,scale,weight},
                        steps run, wall time per phase
  --log PATH            CSV: one row per block and step (reward mean and max, each term)
  --plot PATH           SVG of the log
  --checkpoint DIR      save logits and step counters of each block every
                        --checkpoint-every steps and on SIGINT/SIGTERM; a manifest records
                        finished blocks and hashes of the inputs and options
  --checkpoint-every N  steps between checkpoints (default 100)
  --resume              continue the run in --checkpoint DIR; gives exactly the selection
                        of an uninterrupted run. Refused if inputs or options changed.
  --quiet               no progress output
  --demo                generate a synthetic corpus (20000 x 32, clustered) and run on it
  --help                this text

Exit codes: 0 success, 2 bad input or usage (one line on stderr naming the file or option),
1 internal error, 130/143 interrupted (SIGINT/SIGTERM; no output written).
)";

namespace detail {

inline double parse_double(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(x)) {
    throw usage_error(opt + ": expected a number, found '" + v + "'");
  }
  return x;
}
inline long long parse_int(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE) {
    throw usage_error(opt + ": expected an integer, found '" + v + "'");
  }
  return x;
}
inline std::vector<double> parse_list(const std::string& opt, const std::string& v) {
  std::vector<double> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t c = v.find(',', start);
    out.push_back(parse_double(opt, v.substr(start, c == std::string::npos ? std::string::npos : c - start)));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  return out;
}
inline void one_of(const std::string& opt, const std::string& v,
                   std::initializer_list<std::string_view> allowed) {
  std::string list;
  for (auto a : allowed) {
    if (v == a) return;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  throw usage_error(opt + ": expected one of " + list + ", found '" + v + "'");
}

}  // namespace detail

/// Parses argv. Returns false when --help was printed.
inline bool parse_args(int argc, char** argv, config& c) {
  using detail::parse_double;
  using detail::parse_int;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    std::string value;
    bool has_value = false;
    if (a.rfind("--", 0) != 0) throw usage_error("unexpected argument '" + a + "' (see --help)");
    if (const auto eq = a.find('='); eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    auto flag = [&] {
      if (has_value) throw usage_error(a + ": takes no value");
      c.given.insert(a);
    };
    auto val = [&]() -> std::string {
      c.given.insert(a);
      if (has_value) return value;
      if (i + 1 >= args.size()) throw usage_error(a + ": needs a value (see --help)");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      return false;
    } else if (a == "--embeddings") {
      c.embeddings.push_back(val());
    } else if (a == "--quality") {
      c.quality.push_back(val());
    } else if (a == "--quality-weights") {
      c.quality_weights = detail::parse_list(a, val());
    } else if (a == "--ids") {
      c.ids = val();
    } else if (a == "--ratio") {
      c.ratio = parse_double(a, val());
    } else if (a == "--count") {
      c.count = parse_int(a, val());
    } else if (a == "--objective") {
      const std::string o = val();
      detail::one_of(a, o, {"pairwise", "facility", "disf"});
      for (const auto& prev : c.objectives) {
        if (prev == o) throw usage_error(a + ": '" + o + "' given twice");
      }
      c.objectives.push_back(o);
    } else if (a == "--objective-weights") {
      c.objective_weights = detail::parse_list(a, val());
    } else if (a == "--lambda") {
      c.lambda = parse_double(a, val());
    } else if (a == "--kernel") {
      c.kernel = val();
      detail::one_of(a, c.kernel, {"cosine", "cosine2", "dot", "rbf"});
    } else if (a == "--gamma") {
      c.gamma = parse_double(a, val());
    } else if (a == "--optimizer") {
      c.optimizer = val();
      detail::one_of(a, c.optimizer, {"pg", "greedy", "lazy", "stochastic"});
    } else if (a == "--rollouts") {
      c.rollouts = parse_int(a, val());
    } else if (a == "--steps") {
      c.steps = parse_int(a, val());
    } else if (a == "--active-fraction") {
      c.active_fraction = parse_double(a, val());
    } else if (a == "--min-active") {
      c.min_active = parse_int(a, val());
    } else if (a == "--lr-max") {
      c.lr_max = parse_double(a, val());
    } else if (a == "--lr-min") {
      c.lr_min = parse_double(a, val());
    } else if (a == "--schedule") {
      c.schedule = val();
      detail::one_of(a, c.schedule, {"linear", "cosine", "constant"});
    } else if (a == "--init") {
      c.init = val();
      detail::one_of(a, c.init, {"uniform", "quality"});
    } else if (a == "--prune") {
      c.prune = parse_double(a, val());
    } else if (a == "--block-size") {
      c.block_size = parse_int(a, val());
    } else if (a == "--seed") {
      const long long s = parse_int(a, val());
      if (s < 0) throw usage_error(a + ": must be >= 0");
      c.seed = static_cast<std::uint64_t>(s);
    } else if (a == "--threads") {
      c.threads = static_cast<int>(parse_int(a, val()));
    } else if (a == "--logprob") {
      c.logprob = val();
      detail::one_of(a, c.logprob, {"relaxed", "plackett-luce"});
    } else if (a == "--scaling") {
      c.scaling = val();
      detail::one_of(a, c.scaling, {"calibrated", "raw", "group", "fixed"});
    } else if (a == "--scales") {
      c.scales = detail::parse_list(a, val());
    } else if (a == "--normalized") {
      flag();
      c.normalized = true;
    } else if (a == "--out") {
      c.out = val();
    } else if (a == "--report") {
      c.report = val();
    } else if (a == "--log") {
      c.log = val();
    } else if (a == "--plot") {
      c.plot = val();
    } else if (a == "--checkpoint") {
      c.checkpoint = val();
    } else if (a == "--checkpoint-every") {
      c.checkpoint_every = parse_int(a, val());
    } else if (a == "--resume") {
      flag();
      c.resume = true;
    } else if (a == "--demo") {
      flag();
      c.demo = true;
    } else if (a == "--quiet") {
      flag();
      c.quiet = true;
    } else {
      throw usage_error("unknown option '" + a + "' (see --help)");
    }
  }

  // Checks that need no input file.
  if (c.objectives.empty()) c.objectives.push_back("pairwise");
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
  return true;
}

}  // namespace dmselect
