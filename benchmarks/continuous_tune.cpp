// SPDX-License-Identifier: Apache-2.0
// datamask_bench_continuous_tune: the continuous learner (continuous.hpp) on the benchmark's
// synthetic block, against greedy baselines on the same f (objective_function with the scales
// the policy-gradient learner calibrates with default options, seed 0, as tune.cpp does). Prints
// each run's f, its share of naive greedy's gain over random subsets, and its time.
//
//   datamask_bench_continuous_tune --objective pws --n 20000 --d 64 --iterations 25,50,100,300
//       --configs projected:normalized:0.5:linear,logits:adam:0.1:constant --greedy naive,s0.1,s0.01
//
// Options (defaults in brackets): --objective pws|disf [pws], --n [20000], --d [64],
// --iterations LIST [25,50,100,300], --configs LIST of param:rule:lr:decay [the defaults of
// continuous_settings], --final FRACTION (last lr / lr) [0.05], --polish 0|1|2 (2: both) [2],
// --greedy LIST of naive|lazy|sEPS [naive,s0.1,s0.01] (the share's reference is the first),
// --threads [0].
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

[[noreturn]] void usage(const std::string& why) { dm_bench::refuse("continuous_tune", why); }

double number(const std::string& v) { return dm_bench::number(v, usage); }

struct config {
  std::string text;
  dm::continuous_settings s;
};

config parse_config(const std::string& t) {
  config c{t, {}};
  std::vector<std::string> f;
  for (std::size_t start = 0;;) {
    const std::size_t p = t.find(':', start);
    f.push_back(t.substr(start, p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  if (f.size() != 4) usage("--configs: each entry is param:rule:lr:decay, found '" + t + "'");
  if (f[0] == "projected") c.s.parameterization = dm::continuous_parameterization::projected;
  else if (f[0] == "logits") c.s.parameterization = dm::continuous_parameterization::logits;
  else usage("param: projected or logits");
  if (f[1] == "plain") c.s.rule = dm::step_rule::plain;
  else if (f[1] == "normalized") c.s.rule = dm::step_rule::normalized;
  else if (f[1] == "adam") c.s.rule = dm::step_rule::adam;
  else usage("rule: plain, normalized or adam");
  c.s.lr = number(f[2]);
  if (f[3] == "constant") c.s.decay = dm::step_decay::constant;
  else if (f[3] == "linear") c.s.decay = dm::step_decay::linear;
  else if (f[3] == "cosine") c.s.decay = dm::step_decay::cosine;
  else usage("decay: constant, linear or cosine");
  return c;
}

struct settings {
  std::string objective = "pws";
  index_t n = 20000;
  index_t d = 64;
  std::vector<index_t> iterations{25, 50, 100, 300};
  std::vector<config> configs;
  double final_fraction = 0.05;
  int polish = 2;
  std::vector<std::string> greedy{"naive", "s0.1", "s0.01"};
  int threads = 0;
};

settings parse(int argc, char** argv) {
  settings s;
  dm_bench::parse_args(argc, argv, s, usage, [&](const std::string& a, const std::string& v) {
    if (a == "--final") s.final_fraction = number(v);
    else if (a == "--greedy") s.greedy = dm_bench::split(v);
    else if (a == "--iterations") {
      s.iterations.clear();
      for (const auto& t : dm_bench::split(v)) s.iterations.push_back(static_cast<index_t>(number(t)));
    } else if (a == "--configs") {
      for (const auto& t : dm_bench::split(v)) s.configs.push_back(parse_config(t));
    } else {
      return false;
    }
    return true;
  });
  if (s.configs.empty()) s.configs.push_back(config{"default", {}});
  return s;
}

template <class D>
int run(const settings& s, const D& div) {
  const auto& b = dm_bench::data(s.n, s.d);
  const auto p = b.problem();
  const dm::settings eval_opt = dm_bench::bench_options(s.threads);
  dm::objective_function<float, D> f(p, div, 0.5, dm::quality_aggregate::mean, false, s.threads);
  dm_bench::calibrate(f, p, div, eval_opt);
  const index_t count = std::llround(0.1 * static_cast<double>(s.n));
  const double f_random = dm_bench::random_mean(f, s.n, count, 64);
  std::printf("%s n=%lld d=%lld S=%lld: random f %.6g\n", s.objective.c_str(), static_cast<long long>(s.n),
              static_cast<long long>(s.d), static_cast<long long>(count), f_random);
  double f_ref = 0.0;
  for (std::size_t k = 0; k < s.greedy.size(); ++k) {
    const std::string& name = s.greedy[k];
    dm::greedy_options go;
    go.threads = s.threads;
    if (name == "naive") go.method = dm::greedy_method::naive;
    else if (name == "lazy") go.method = dm::greedy_method::lazy;
    else if (name.size() > 1 && name[0] == 's') {
      go.method = dm::greedy_method::stochastic;
      go.epsilon = number(name.substr(1));
    } else usage("--greedy: naive, lazy or sEPS");
    const auto t0 = clk::now();
    const double fv = f(dm::greedy_select(f, count, go).rows);
    const double sec = dm_bench::since(t0);
    if (k == 0) f_ref = fv;
    std::printf("greedy %-8s f %.6g share %.4f  %.2f s\n", name.c_str(), fv,
                (fv - f_random) / (f_ref - f_random), sec);
  }
  for (const auto& c : s.configs) {
    for (index_t it : s.iterations) {
      for (int pol = 0; pol < 2; ++pol) {
        if ((s.polish == 0 && pol == 1) || (s.polish == 1 && pol == 0)) continue;
        dm::continuous_options o;
        o.common = eval_opt;
        o.ascent = c.s;
        o.ascent.iterations = it;
        o.ascent.final_fraction = s.final_fraction;
        o.polish.enabled = pol == 1;
        const auto t0 = clk::now();
        const auto res = dm::continuous_learner(o).select(p, div);
        const double sec = dm_bench::since(t0);
        const double fv = f(res.rows);
        std::printf("continuous %-34s it %4lld polish %d: f %.6g share %.4f  %.2f s\n", c.text.c_str(),
                    static_cast<long long>(it), pol, fv, (fv - f_random) / (f_ref - f_random), sec);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  datamask::passive_wait_unless_set(argv);  // first: see datamask/core/wait_policy.hpp
  const settings s = parse(argc, argv);
  return dm_bench::run_objective("datamask_bench_continuous_tune", s.objective, [&](const auto& div) { return run(s, div); });
}
