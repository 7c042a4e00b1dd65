// SPDX-License-Identifier: Apache-2.0
// What the benchmark programs share: how they refuse their arguments, and for the continuous
// learner's (continuous_tune.cpp, fronts.cpp) argument parsing helpers, the calibrated f every
// method is scored by, and the random-subset baseline of the shares. One copy, so both programs
// score the same f the same way.
#pragma once

#include <chrono>
#include <cstdio>
#include <exception>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <datamask/datamask.hpp>

namespace dm_bench {

namespace dm = datamask;
using dm::index_t;
using clk = std::chrono::steady_clock;

inline double since(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }

/// Refuses a benchmark program's arguments: "datamask_bench_NAME: why (see benchmarks/NAME.cpp)"
/// on stderr, exit status 2.
[[noreturn]] inline void refuse(const char* name, const std::string& why) {
  std::fprintf(stderr, "datamask_bench_%s: %s (see benchmarks/%s.cpp)\n", name, why.c_str(), name);
  std::exit(2);
}

/// A finite number, or `bad(message)` (which must not return).
template <class Bad>
double number(const std::string& v, Bad&& bad) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x)) bad("expected a number, found '" + v + "'");
  return x;
}

inline std::vector<std::string> split(const std::string& s, char sep = ',') {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const std::size_t c = s.find(sep, start);
    out.push_back(s.substr(start, c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  return out;
}

/// Parses the arguments, all "--name value" pairs: the options every benchmark program takes
/// (--objective pws|disf, --n, --d, --polish, --threads) into `s`, the others through
/// `other(name, value)` (false: unknown). Every error goes to `usage(message)` (which must not
/// return).
template <class Settings, class Usage, class Other>
void parse_args(int argc, char** argv, Settings& s, Usage&& usage, Other&& other) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(a + ": needs a value");
    const std::string v = argv[++i];
    if (a == "--objective") s.objective = v;
    else if (a == "--n") s.n = static_cast<index_t>(number(v, usage));
    else if (a == "--d") s.d = static_cast<index_t>(number(v, usage));
    else if (a == "--polish") s.polish = static_cast<int>(number(v, usage));
    else if (a == "--threads") s.threads = static_cast<int>(number(v, usage));
    else if (!other(a, v)) usage("unknown option '" + a + "'");
  }
  if (s.objective != "pws" && s.objective != "disf") usage("--objective: pws or disf");
}

/// The benchmark's options: S = 0.1 n, lambda 0.5, seed 0, the given threads.
inline dm::settings bench_options(int threads) {
  dm::settings o;
  o.ratio = 0.1;
  o.lambda = 0.5;
  o.threads = threads;
  return o;
}

/// Gives f the scales the policy-gradient learner calibrates with `opt` (the continuous learner
/// sets up the same f inside `select`).
template <class D>
void calibrate(dm::objective_function<float, D>& f, const dm::problem<float>& p, const D& div,
               const dm::settings& opt) {
  std::vector<double> scales;
  for (const auto& t : dm::learner<>(opt).calibrate(p, div)) scales.push_back(t.scale);
  f.set_scales(scales);
}

/// The mean of f over `subsets` uniform random subsets of `count` of the n rows (seed 7): the
/// zero of the shares.
template <class F>
double random_mean(const F& f, index_t n, index_t count, int subsets) {
  std::mt19937_64 g(7);
  std::vector<index_t> all(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) all[i] = i;
  double mean = 0.0;
  for (int r = 0; r < subsets; ++r) {
    for (index_t i = 0; i < count; ++i) {
      std::swap(all[i], all[i + static_cast<index_t>(g() % static_cast<std::uint64_t>(n - i))]);
    }
    mean += f(std::span<const index_t>(all.data(), static_cast<std::size_t>(count))) / subsets;
  }
  return mean;
}

/// Runs `run(diversity)` with the objective named "pws" or "disf"; an exception is reported as
/// "program: message" with exit status 1.
template <class Run>
int run_objective(const char* program, const std::string& objective, Run&& run) {
  try {
    if (objective == "pws") return run(dm::pairwise_similarity{});
    return run(dm::disf{});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace dm_bench
