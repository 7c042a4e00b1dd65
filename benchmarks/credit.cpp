// SPDX-License-Identifier: Apache-2.0
// datamask_bench_credit: the policy-gradient learner's two credit estimators (--credit rollout,
// the paper's: every item of a rollout gets the rollout's advantage; --credit item: each item its
// own marginal gain, less a leave-one-out baseline) against greedy baselines, on the
// benchmark's synthetic block (synthetic.hpp), for one objective. Prints one markdown table: f,
// share of the first greedy's gain over random subsets, seconds.
//
//   datamask_bench_credit --objective pws|fl|disf [--n 20000] [--d 64] [--steps 300,1000]
//       [--credits rollout,item] [--references 0] [--greedy naive|lazy|stochastic|none,...]
//       [--epsilons 0.1] [--random 8] [--threads 0] [--set NAME VALUE]...
//
// --greedy runs each greedy named (none: no greedy); shares are of the first one's gain.
// --epsilons runs stochastic greedy with each epsilon given (default 0.1).
// --references runs each estimator with each reference set size while learning
// (`settings::reference_size`: 0 the step's active batch, R > 0 R rows drawn each step).
//
// --set gives any setting of the library's table (datamask/learners/settings.hpp) to both estimators,
// e.g. --set min-active 256 --set init quality (a flag takes on or off). Every f is the same
// function: objective_function with lambda 0.5, mean quality, and the scales the learner
// calibrates with the benchmark's options (seed 0), facility location with the whole block as
// reference set. The learner's time includes its calibration and final evaluation.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <datamask/datamask.hpp>
#include <datamask/core/wait_policy.hpp>
#include <datamask/learners/greedy/greedy.hpp>
#include <datamask/learners/settings.hpp>

#include "bench_common.hpp"
#include "synthetic.hpp"

namespace dm = datamask;
using dm::index_t;
using dm_bench::clk;

namespace {

[[noreturn]] void usage(const std::string& why) { dm_bench::refuse("credit", why); }

double number(const std::string& v) { return dm_bench::number(v, usage); }

struct args {
  std::string objective = "pws";
  index_t n = 20000;
  index_t d = 64;
  std::vector<index_t> steps{300, 1000};
  std::vector<dm::credit_mode> credits{dm::credit_mode::rollout, dm::credit_mode::item};
  std::vector<index_t> references{0};
  std::vector<std::string> greedy{"naive"};
  std::vector<double> epsilons{0.1};
  int random = 8;
  int threads = 0;
  std::vector<std::pair<std::string, std::string>> sets;  // table settings, as given
};

/// Sets the table setting `name` of `o` or `l` from text; false when the table has none such.
bool set_setting(dm::settings& o, dm::learner_settings& l, const std::string& name, const std::string& v) {
  bool found = false;
  dm::visit_settings([&](const auto& s) {
    using entry = std::remove_cvref_t<decltype(s)>;
    if (found || std::string(s.name) != name) return;
    found = true;
    auto& owner = dm::setting_owner(s, o, l);
    auto& field = owner.*s.member;
    if constexpr (entry::kind == dm::setting_kind::flag) {
      if (v != "on" && v != "off") usage("--set " + name + ": on or off");
      field = v == "on";
    } else if constexpr (entry::kind == dm::setting_kind::choice) {
      s.parse(v, owner);
    } else if constexpr (std::is_same_v<std::remove_cvref_t<decltype(field)>, typename entry::value_type>) {
      field = static_cast<typename entry::value_type>(number(v));
    } else {
      usage("--set " + name + ": not a single number");
    }
  });
  return found;
}

args parse(int argc, char** argv) {
  args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) usage(k + ": needs a value");
    const std::string v = argv[++i];
    if (k == "--objective") a.objective = v;
    else if (k == "--n") a.n = static_cast<index_t>(number(v));
    else if (k == "--d") a.d = static_cast<index_t>(number(v));
    else if (k == "--greedy") a.greedy = dm_bench::split(v);
    else if (k == "--random") a.random = static_cast<int>(number(v));
    else if (k == "--threads") a.threads = static_cast<int>(number(v));
    else if (k == "--steps") {
      a.steps.clear();
      for (const auto& s : dm_bench::split(v)) a.steps.push_back(static_cast<index_t>(number(s)));
    } else if (k == "--credits") {
      a.credits.clear();
      for (const auto& s : dm_bench::split(v)) a.credits.push_back(dm::parse_enum<dm::credit_mode>(s, "--credits"));
    } else if (k == "--epsilons") {
      a.epsilons.clear();
      for (const auto& s : dm_bench::split(v)) a.epsilons.push_back(number(s));
    } else if (k == "--references") {
      a.references.clear();
      for (const auto& s : dm_bench::split(v)) a.references.push_back(static_cast<index_t>(number(s)));
    } else if (k == "--set") {
      if (i + 1 >= argc) usage("--set " + v + ": needs a value");
      a.sets.emplace_back(v, argv[++i]);
    } else {
      usage("unknown option '" + k + "'");
    }
  }
  if (a.objective != "pws" && a.objective != "fl" && a.objective != "disf") usage("--objective: pws, fl or disf");
  if (a.greedy.empty()) usage("--greedy: at least one name");
  for (const std::string& g : a.greedy) {
    if (g != "naive" && g != "lazy" && g != "stochastic" && g != "none") usage("--greedy: naive, lazy, stochastic or none");
  }
  if (a.greedy.size() > 1 && std::find(a.greedy.begin(), a.greedy.end(), "none") != a.greedy.end()) {
    usage("--greedy: none stands alone");
  }
  if (a.greedy.front() == "none") a.greedy.clear();
  return a;
}

struct row {
  std::string method;
  double f = 0.0;
  double seconds = 0.0;
};

template <class D>
int run(const args& a, const D& div) {
  const auto& b = dm_bench::data(a.n, a.d);
  const auto p = b.problem();
  dm::settings opt = dm_bench::bench_options(a.threads);
  dm::learner_settings ls;
  for (const auto& [name, value] : a.sets) {
    if (!set_setting(opt, ls, name, value)) usage("--set: no setting named '" + name + "'");
  }
  const index_t count = std::llround(0.1 * static_cast<double>(a.n));
  dm::objective_function<float, D> f(p, div, 0.5, dm::quality_aggregate::mean, false, a.threads);
  dm_bench::calibrate(f, p, div, dm_bench::bench_options(a.threads));
  const double base = dm_bench::random_mean(f, a.n, count, a.random);
  std::vector<row> rows;
  for (const std::string& g : a.greedy) {
    const bool stochastic = g == "stochastic";
    for (const double eps : stochastic ? a.epsilons : std::vector<double>{0.1}) {
      dm::greedy_options go;
      go.threads = a.threads;
      go.method = g == "naive" ? dm::greedy_method::naive : g == "lazy" ? dm::greedy_method::lazy : dm::greedy_method::stochastic;
      go.epsilon = eps;
      const auto t0 = clk::now();
      const auto res = dm::greedy_select(f, count, go);
      const double secs = dm_bench::since(t0);
      char name[64];
      std::snprintf(name, sizeof name, stochastic ? "greedy %s, epsilon %g" : "greedy %s", g.c_str(), eps);
      rows.push_back(row{name, f(std::span<const index_t>(res.rows)), secs});
      std::fprintf(stderr, "%s: f %.6g, %.1f s\n", name, rows.back().f, secs);
    }
  }
  for (const index_t e : a.steps) {
    for (const index_t r : a.references) {
      for (const dm::credit_mode c : a.credits) {
        dm::settings o = opt;
        o.steps = e;
        o.credit = c;
        o.reference_size = r;
        const auto t0 = clk::now();
        const auto res = dm::basic_learner<dm::default_backend, dm::softmax_policy, dm::runtime_lr>(
                             o, ls.policy_object(), ls.schedule_object())
                             .select(p, div);
        const double secs = dm_bench::since(t0);
        const std::string v = r == 0 ? std::string("active batch") : std::to_string(r) + " drawn";
        rows.push_back(row{"learner, credit " + std::string(dm::enum_name(c)) + ", V " + v + ", E = " +
                               std::to_string(e),
                           f(std::span<const index_t>(res.rows)), secs});
        std::fprintf(stderr, "%s: f %.6g, %.1f s\n", rows.back().method.c_str(), rows.back().f, secs);
      }
    }
  }
  const double gain = !a.greedy.empty() ? rows.front().f - base : std::nan("");
  std::printf("%s, n = %lld, d = %lld, S = %lld; random subsets (mean of %d): f = %.6g\n\n", a.objective.c_str(),
              static_cast<long long>(a.n), static_cast<long long>(a.d), static_cast<long long>(count), a.random, base);
  std::printf("| method | f | share of the first greedy's gain | seconds |\n|---|---:|---:|---:|\n");
  for (const row& r : rows) {
    std::printf("| %s | %.6g | %.4f | %.2f |\n", r.method.c_str(), r.f, (r.f - base) / gain, r.seconds);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  datamask::passive_wait_unless_set(argv);  // first: see datamask/core/wait_policy.hpp
  const args a = parse(argc, argv);
  try {
    dm::learner_settings ls;
    if (a.objective == "pws") return run(a, dm::pairwise_similarity{});
    if (a.objective == "disf") return run(a, dm::disf{});
    for (const auto& [name, value] : a.sets) {  // the kernel and gamma reach facility location
      dm::settings unused;
      (void)set_setting(unused, ls, name, value);
    }
    return run(a, ls.facility_object());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "datamask_bench_credit: %s\n", e.what());
    return 1;
  }
}
