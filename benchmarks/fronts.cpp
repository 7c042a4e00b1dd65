// SPDX-License-Identifier: Apache-2.0
// datamask_bench_fronts: one point of a time-quality front (issue 10's benchmark). One run of
// one method on the benchmark's synthetic block (synthetic.hpp), printed as one JSON line:
// method, setting, seconds, f, and the process's peak resident set. benchmarks/fronts.py runs
// one process per point (so each peak-RSS figure belongs to one run), computes the shares and
// renders the RESULTS.md section.
//
// Every f is evaluated by the same function: objective_function with lambda 0.5, mean quality,
// and the scales the policy-gradient learner calibrates with default options (seed 0); the
// continuous learner and the policy-gradient learner set up the same f inside `select` (their
// time includes that calibration). A greedy receives f ready; the calibration time is printed
// as setup_seconds and fronts.py adds it to the greedy's time.
//
//   datamask_bench_fronts --objective pws|disf --n N [--d 256] --method M [--setting X]
//       [--polish 0|1] [--rounds K] [--threads T]
// Methods: random (X = number of random subsets, mean f), continuous (X = iterations),
// learner (policy gradient, paper's estimator, default options; X = steps), naive, lazy,
// stochastic (X = epsilon). --rounds K with naive: run K rounds only and report the time of
// all S rounds as K rounds' time * S / K ("estimated": true, no f); naive's rounds all score
// every remaining item, so a round's cost changes by at most S / n = 10% over the run.
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <datamask/learners/continuous.hpp>
#include <datamask/datamask.hpp>
#include <datamask/core/wait_policy.hpp>
#include <datamask/learners/greedy/greedy.hpp>

#include "bench_common.hpp"
#include "synthetic.hpp"

namespace dm = datamask;
using dm::index_t;

namespace {

using dm_bench::clk;
using dm_bench::since;

[[noreturn]] void usage(const std::string& why) { dm_bench::refuse("fronts", why); }

double number(const std::string& v) { return dm_bench::number(v, usage); }

struct settings {
  std::string objective = "pws";
  index_t n = 100000;
  index_t d = 256;
  std::string method;
  std::string setting;
  int polish = 0;
  index_t rounds = 0;
  int threads = 0;
};

settings parse(int argc, char** argv) {
  settings s;
  dm_bench::parse_args(argc, argv, s, usage, [&](const std::string& a, const std::string& v) {
    if (a == "--method") s.method = v;
    else if (a == "--setting") s.setting = v;
    else if (a == "--rounds") s.rounds = static_cast<index_t>(number(v));
    else return false;
    return true;
  });
  if (s.method.empty()) usage("--method is required");
  return s;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

template <class D>
int run(const settings& s, const D& div) {
  const auto& b = dm_bench::data(s.n, s.d);
  const auto p = b.problem();
  const dm::settings opt = dm_bench::bench_options(s.threads);
  const index_t count = std::llround(0.1 * static_cast<double>(s.n));
  const auto t_setup = clk::now();
  dm::objective_function<float, D> f(p, div, 0.5, dm::quality_aggregate::mean, false, s.threads);
  dm_bench::calibrate(f, p, div, opt);
  const double setup = since(t_setup);

  double seconds = 0.0;
  double fv = std::nan("");
  bool estimated = false;
  long long evaluations = 0;  // a greedy's candidate gains (fronts.py estimates greedy runs from them)
  std::string setting = s.setting;
  std::string method = s.method;
  if (s.method == "random") {
    const int subsets = setting.empty() ? 16 : static_cast<int>(number(setting));
    const auto t0 = clk::now();
    fv = dm_bench::random_mean(f, s.n, count, subsets);
    seconds = since(t0) / subsets;
    setting = std::to_string(subsets);
  } else if (s.method == "continuous") {
    dm::continuous_options o;
    o.common = opt;
    o.ascent.iterations = static_cast<index_t>(number(setting));
    o.polish.enabled = s.polish == 1;
    if (s.polish == 1) method = "continuous+polish";
    const auto t0 = clk::now();
    const auto res = dm::continuous_learner(o).select(p, div);
    seconds = since(t0);
    fv = f(res.rows);
  } else if (s.method == "learner") {
    dm::settings o = opt;
    o.steps = static_cast<index_t>(number(setting));
    const auto t0 = clk::now();
    const auto res = dm::learner<>(o).select(p, div);
    seconds = since(t0);
    fv = f(res.rows);
  } else if (s.method == "naive" || s.method == "lazy" || s.method == "stochastic") {
    dm::greedy_options go;
    go.threads = s.threads;
    go.method = s.method == "naive"  ? dm::greedy_method::naive
                : s.method == "lazy" ? dm::greedy_method::lazy
                                     : dm::greedy_method::stochastic;
    if (s.method == "stochastic") go.epsilon = number(setting);
    const bool partial = s.method == "naive" && s.rounds > 0 && s.rounds < count;
    const auto t0 = clk::now();
    const auto res = dm::greedy_select(f, partial ? s.rounds : count, go);
    seconds = since(t0);
    evaluations = static_cast<long long>(res.evaluations);
    if (partial) {
      seconds *= static_cast<double>(count) / static_cast<double>(s.rounds);
      estimated = true;
      setting = "estimated from " + std::to_string(s.rounds) + " rounds";
    } else {
      fv = f(res.rows);
    }
  } else {
    usage("--method: random, continuous, learner, naive, lazy or stochastic");
  }
  char fbuf[64] = "null";
  if (!std::isnan(fv)) std::snprintf(fbuf, sizeof fbuf, "%.12g", fv);
  std::printf(
      "{\"objective\": \"%s\", \"n\": %lld, \"d\": %lld, \"S\": %lld, \"method\": \"%s\", "
      "\"setting\": \"%s\", \"seconds\": %.6g, \"setup_seconds\": %.6g, \"f\": %s, "
      "\"estimated\": %s, \"evaluations\": %lld, \"peak_rss_mb\": %.1f}\n",
      s.objective.c_str(), static_cast<long long>(s.n), static_cast<long long>(s.d),
      static_cast<long long>(count), method.c_str(), setting.c_str(), seconds, setup,
      fbuf, estimated ? "true" : "false", evaluations,
      peak_rss_mb());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  datamask::passive_wait_unless_set(argv);  // first: see datamask/core/wait_policy.hpp
  const settings s = parse(argc, argv);
  return dm_bench::run_objective("datamask_bench_fronts", s.objective, [&](const auto& div) { return run(s, div); });
}
