// SPDX-License-Identifier: Apache-2.0
// datamask_bench_tune: one learner setting on the benchmark's synthetic block, over several
// seeds, as a share of a greedy baseline's gain over random subsets (the measure of
// benchmarks/RESULTS.md, section 1). Every run is evaluated by the same f: the scales the
// default options calibrate with seed 0, as in the suite.
//
//   datamask_bench_tune --objective pws --steps 4000 --min-active 256
//                       --active-fraction 0.001 --init quality --reference naive
//
// Options (defaults in brackets): --objective pws|fl|disf [pws], --n [20000], --steps [1000],
// --rollouts [128], --active-fraction [0.05], --min-active [1024], --lr-max [10], --lr-min [1],
// --init uniform|quality [uniform], --logprob relaxed|plackett-luce [relaxed],
// --scaling calibrated|fixed [calibrated; fixed: the evaluation f's scales],
// --seeds LIST [1,2,3,4], --reference naive|lazy|stochastic [stochastic, epsilon 0.01].
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <datamask/datamask.hpp>
#include <datamask/greedy/greedy.hpp>

#include "synthetic.hpp"

namespace dm = datamask;
using dm::index_t;

namespace {

using clk = std::chrono::steady_clock;
double since(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }

struct settings {
  std::string objective = "pws";
  index_t n = 20000;
  index_t steps = 1000;
  index_t rollouts = 128;
  double active_fraction = 0.05;
  index_t min_active = 1024;
  double lr_max = 10.0;
  double lr_min = 1.0;
  std::string init = "uniform";
  std::string logprob = "relaxed";
  std::string scaling = "calibrated";
  std::vector<std::uint64_t> seeds{1, 2, 3, 4};
  std::string reference = "stochastic";
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "datamask_bench_tune: %s (see the comment at the top of benchmarks/tune.cpp)\n",
               why.c_str());
  std::exit(2);
}

double number(const std::string& opt, const char* v) {
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (*v == '\0' || *end != '\0' || !std::isfinite(x)) usage(opt + ": expected a number, found '" + v + "'");
  return x;
}

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(a + ": needs a value");
    const char* v = argv[++i];
    if (a == "--objective") s.objective = v;
    else if (a == "--n") s.n = static_cast<index_t>(number(a, v));
    else if (a == "--steps") s.steps = static_cast<index_t>(number(a, v));
    else if (a == "--rollouts") s.rollouts = static_cast<index_t>(number(a, v));
    else if (a == "--active-fraction") s.active_fraction = number(a, v);
    else if (a == "--min-active") s.min_active = static_cast<index_t>(number(a, v));
    else if (a == "--lr-max") s.lr_max = number(a, v);
    else if (a == "--lr-min") s.lr_min = number(a, v);
    else if (a == "--init") s.init = v;
    else if (a == "--logprob") s.logprob = v;
    else if (a == "--scaling") s.scaling = v;
    else if (a == "--reference") s.reference = v;
    else if (a == "--seeds") {
      s.seeds.clear();
      std::string list = v;
      for (std::size_t start = 0;;) {
        const std::size_t c = list.find(',', start);
        s.seeds.push_back(static_cast<std::uint64_t>(number(a, list.substr(start, c - start).c_str())));
        if (c == std::string::npos) break;
        start = c + 1;
      }
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  if (s.objective != "pws" && s.objective != "fl" && s.objective != "disf") usage("--objective: pws, fl or disf");
  if (s.init != "uniform" && s.init != "quality") usage("--init: uniform or quality");
  if (s.scaling != "calibrated" && s.scaling != "fixed") usage("--scaling: calibrated or fixed");
  if (s.reference != "naive" && s.reference != "lazy" && s.reference != "stochastic") {
    usage("--reference: naive, lazy or stochastic");
  }
  return s;
}

template <class D>
int run(const settings& s, const D& div) {
  const auto& b = dm_bench::data(s.n, 256);
  const auto p = b.problem();
  dm::options eval_opt;  // the suite's f: default options, seed 0
  eval_opt.ratio = 0.1;
  eval_opt.lambda = 0.5;
  dm::objective_function<float, D> f(p, div, 0.5);
  std::vector<double> scales;
  for (const auto& t : dm::learner<>(eval_opt).calibrate(p, div)) scales.push_back(t.scale);
  f.set_scales(scales);
  const index_t count = std::llround(0.1 * static_cast<double>(s.n));

  // Random subsets and the reference greedy, as in the suite.
  std::mt19937_64 g(7);
  std::vector<index_t> all(static_cast<std::size_t>(s.n));
  for (index_t i = 0; i < s.n; ++i) all[i] = i;
  double f_random = 0.0;
  for (int r = 0; r < 64; ++r) {
    for (index_t i = 0; i < count; ++i) {
      std::swap(all[i], all[i + static_cast<index_t>(g() % static_cast<std::uint64_t>(s.n - i))]);
    }
    f_random += f(std::span<const index_t>(all.data(), static_cast<std::size_t>(count))) / 64.0;
  }
  dm::greedy_options go;
  go.method = s.reference == "naive" ? dm::greedy_method::naive
              : s.reference == "lazy" ? dm::greedy_method::lazy
                                      : dm::greedy_method::stochastic;
  go.epsilon = 0.01;
  auto t0 = clk::now();
  const double f_greedy = f(dm::greedy_select(f, count, go).rows);
  std::printf("%s n=%lld: random %.6g, greedy %s %.6g (%.2f s)\n", s.objective.c_str(),
              static_cast<long long>(s.n), f_random, s.reference.c_str(), f_greedy, since(t0));

  dm::options o = eval_opt;
  o.steps = s.steps;
  o.rollouts = s.rollouts;
  o.active_fraction = s.active_fraction;
  o.min_active = s.min_active;
  o.init = s.init == "quality" ? dm::init_mode::quality : dm::init_mode::uniform;
  o.evaluate_selection = false;
  if (s.scaling == "fixed") {
    o.scaling = dm::term_scaling::fixed;
    o.scales = scales;
  }
  const dm::softmax_policy policy{dm::parse_gradient(s.logprob, "--logprob")};
  std::vector<double> shares;
  double seconds = 0.0;
  for (std::uint64_t seed : s.seeds) {
    o.seed = seed;
    t0 = clk::now();
    const auto res = dm::learner<dm::default_backend, dm::softmax_policy, dm::linear_lr>(
                         o, policy, dm::linear_lr{s.lr_max, s.lr_min})
                         .select(p, div);
    const double sec = since(t0);
    const double fv = f(res.rows);
    const double share = (fv - f_random) / (f_greedy - f_random);
    std::printf("seed %llu: m=%lld k=%lld f=%.6g share=%.4f %.2f s\n", static_cast<unsigned long long>(seed),
                static_cast<long long>(res.active), static_cast<long long>(res.rollout_size), fv, share, sec);
    shares.push_back(share);
    seconds += sec;
  }
  double mean = 0.0;
  for (double x : shares) mean += x / static_cast<double>(shares.size());
  double var = 0.0;
  for (double x : shares) var += (x - mean) * (x - mean);
  const double sd = shares.size() > 1 ? std::sqrt(var / static_cast<double>(shares.size() - 1)) : 0.0;
  std::printf("share of greedy %s's gain: mean %.4f sd %.4f over %zu seeds; %.2f s per run\n",
              s.reference.c_str(), mean, sd, shares.size(), seconds / static_cast<double>(shares.size()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const settings s = parse(argc, argv);
  try {
    if (s.objective == "pws") return run(s, dm::pairwise_similarity{});
    if (s.objective == "fl") return run(s, dm::facility_location{});
    return run(s, dm::disf{});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "datamask_bench_tune: %s\n", e.what());
    return 1;
  }
}
