// SPDX-License-Identifier: Apache-2.0
// datamask_bench_tune: one learner setting on the benchmark's synthetic block, over several
// seeds, as a share of a greedy baseline's gain over random subsets (the measure of
// benchmarks/RESULTS.md, section 1). Every run is evaluated by the same f: the scales the
// default options calibrate with seed 0, as in the suite.
//
//   datamask_bench_tune --objective pws --steps 4000 --min-active 256
//                       --active-fraction 0.001 --init quality --reference naive
//
// Options: --objective pws|fl|disf [pws], --n [20000], --seeds LIST [1,2,3,4],
// --reference naive|lazy|stochastic [stochastic, epsilon 0.01], and every setting of the library's
// settings table (datamask/learners/settings.hpp: --steps, --rollouts, --active-fraction, --min-active,
// --lr-max, --lr-min, --schedule, --init, --logprob, --scaling, ...; a flag takes no value), with
// the library's defaults and ranges. --scaling fixed uses the evaluation f's scales.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <datamask/datamask.hpp>
#include <datamask/core/wait_policy.hpp>
#include <datamask/learners/greedy/greedy.hpp>
#include <datamask/learners/settings.hpp>

#include "bench_common.hpp"
#include "synthetic.hpp"

namespace dm = datamask;
using dm::index_t;

namespace {

using clk = std::chrono::steady_clock;
double since(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }

/// The tune tool's own options; every other option is a setting of the library's table.
struct tune_args {
  std::string objective = "pws";
  index_t n = 20000;
  std::vector<std::uint64_t> seeds{1, 2, 3, 4};
  std::string reference = "stochastic";
  dm::settings run;            // the table's settings of a run (library defaults)
  dm::learner_settings learn;  // lr, schedule, logprob, kernel, gamma
};

[[noreturn]] void usage(const std::string& why) { dm_bench::refuse("tune", why); }

double number(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x)) usage(opt + ": expected a number, found '" + v + "'");
  return x;
}

/// Sets the table's setting `name` from the command line; false when the table has none such.
/// A flag takes no value (`i` is left as it is); every other setting takes argv[i + 1].
bool set_setting(tune_args& t, const std::string& name, int argc, char** argv, int& i) {
  bool found = false;
  dm::visit_settings([&](const auto& s) {
    using entry = std::remove_cvref_t<decltype(s)>;
    if (found || "--" + std::string(s.name) != name) return;
    found = true;
    auto& field = dm::setting_owner(s, t.run, t.learn).*s.member;
    if constexpr (entry::kind == dm::setting_kind::flag) {
      field = true;
    } else {
      if (i + 1 >= argc) usage(name + ": needs a value");
      const std::string v = argv[++i];
      if constexpr (entry::kind == dm::setting_kind::choice) {
        s.parse(v, dm::setting_owner(s, t.run, t.learn));
      } else if constexpr (std::is_same_v<std::remove_cvref_t<decltype(field)>, typename entry::value_type>) {
        field = static_cast<typename entry::value_type>(number(name, v));
      } else {
        usage(name + ": not a setting of the tune tool");
      }
    }
  });
  return found;
}

std::vector<std::uint64_t> seed_list(const std::string& opt, const std::string& list) {
  std::vector<std::uint64_t> seeds;
  for (std::size_t start = 0;;) {
    const std::size_t c = list.find(',', start);
    seeds.push_back(static_cast<std::uint64_t>(number(opt, list.substr(start, c - start))));
    if (c == std::string::npos) return seeds;
    start = c + 1;
  }
}

tune_args parse(int argc, char** argv) {
  tune_args t;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (set_setting(t, a, argc, argv, i)) continue;
    if (i + 1 >= argc) usage(a + ": needs a value, or is no option");
    const std::string v = argv[++i];
    if (a == "--objective") t.objective = v;
    else if (a == "--n") t.n = static_cast<index_t>(number(a, v));
    else if (a == "--reference") t.reference = v;
    else if (a == "--seeds") t.seeds = seed_list(a, v);
    else usage("unknown option '" + a + "'");
  }
  if (t.objective != "pws" && t.objective != "fl" && t.objective != "disf") usage("--objective: pws, fl or disf");
  if (t.reference != "naive" && t.reference != "lazy" && t.reference != "stochastic") {
    usage("--reference: naive, lazy or stochastic");
  }
  try {  // the library's one validation path: ranges and the rules between settings
    dm::validate(t.run);
    dm::validate(t.learn);
  } catch (const dm::invalid_input& e) {
    usage(e.what());
  }
  return t;
}

template <class D>
int run(const tune_args& s, const D& div) {
  const auto& b = dm_bench::data(s.n, 256);
  const auto p = b.problem();
  const dm::settings eval_opt;  // the suite's f: default options (ratio 0.1, lambda 0.5), seed 0
  dm::objective_function<float, D> f(p, div, eval_opt.lambda);
  std::vector<double> scales;
  for (const auto& t : dm::learner<>(eval_opt).calibrate(p, div)) scales.push_back(t.scale);
  f.set_scales(scales);
  const index_t count = dm::detail::selection_size(eval_opt, s.n);

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

  dm::settings o = s.run;
  o.evaluate_selection = false;
  if (o.scaling == dm::term_scaling::fixed) o.scales = scales;
  std::vector<double> shares;
  double seconds = 0.0;
  for (std::uint64_t seed : s.seeds) {
    o.seed = seed;
    t0 = clk::now();
    const auto res = dm::learner<dm::default_backend, dm::softmax_policy, dm::runtime_lr>(
                         o, s.learn.policy_object(), s.learn.schedule_object())
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
  datamask::passive_wait_unless_set(argv);  // first: see datamask/core/wait_policy.hpp
  const tune_args s = parse(argc, argv);
  try {
    if (s.objective == "pws") return run(s, dm::pairwise_similarity{});
    if (s.objective == "fl") return run(s, s.learn.facility_object());
    return run(s, dm::disf{});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "datamask_bench_tune: %s\n", e.what());
    return 1;
  }
}
