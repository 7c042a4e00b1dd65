// SPDX-License-Identifier: Apache-2.0
// datamask_bench_facility_knn: dense facility location against facility location on a kNN
// graph (objectives/knn/graph.hpp, objectives/sparse_facility.hpp) on the benchmark's synthetic block
// (synthetic.hpp), f = 0.5 quality + 0.5 facility location (cosine), S = 0.1 n. Every selection
// is scored by the same f with DENSE facility location (whole block as reference set, scales
// calibrated as the policy-gradient learner calibrates them, seed 0), so sparse runs are judged
// on the objective they approximate; the sparse runs optimise f with those same (fixed) scales.
// Prints per method: K, seconds (graph build separately), f, its share of the reference's gain
// over random subsets, f with the sparse term (the f the sparse runs optimised), and the
// process's peak resident memory so far; and each graph's build time and bytes.
//
//   datamask_bench_facility_knn --n 20000 --d 64 --neighbors 16,64 --iterations 100,300
//       --dense lazy --sparse lazy,s0.1 --threads 2
//
// Graphs: --build LIST of builders, exact|clustered [exact] (objectives/knn/graph.hpp, objectives/knn/clustered.hpp),
// each with every K; clustered once per P of --probes LIST [0: the default], with --clusters C
// [0: about sqrt(n)]; each graph's build time (wall and CPU) and its recall@K estimated on --recall ROWS
// sampled rows against their exact neighbours [1000; 0: none]. --dense-f 0 scores every
// selection with f with the sparse term of the first graph instead of the dense term (at
// n = 10^6 one dense evaluation costs n S d = 2.6 10^13 multiply-adds): the scales are then
// calibrated on that sparse f, and the share's zero is its mean over random subsets. The last
// line gives the wall time since the program started and the peak resident memory against the
// embeddings' bytes.
//
// Options [defaults]: --n [20000], --d [64], --neighbors LIST [16,64], --iterations LIST of the
// continuous learner's iterations on each graph [100,300], --polish 0|1 [1], --dense LIST of
// greedies on dense facility location, naive|lazy|sEPS [lazy], --sparse LIST of greedies on
// each graph [lazy,s0.1], --random SUBSETS for the share's zero [20] (each costs a dense
// evaluation), --cache MiB for dense facility location's greedy similarity cache
// (`facility_location::cache_bytes`; 0: none) [256], --threads [0]; an empty list skips. The
// share's reference is the first method printed: the first dense greedy, else the first sparse
// greedy on the first graph.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <sys/resource.h>

#include <datamask/learners/continuous.hpp>
#include <datamask/datamask.hpp>
#include <datamask/core/wait_policy.hpp>
#include <datamask/learners/greedy/greedy.hpp>
#include <datamask/objectives/knn/clustered.hpp>
#include <datamask/objectives/knn/build.hpp>
#include <datamask/objectives/sparse_facility.hpp>

#include "bench_common.hpp"
#include "synthetic.hpp"

namespace dm = datamask;
using dm::index_t;

namespace {

using dm_bench::clk;

[[noreturn]] void usage(const std::string& why) { dm_bench::refuse("facility_knn", why); }

struct settings {
  index_t n = 20000;
  index_t d = 64;
  std::vector<index_t> neighbors{16, 64};
  std::vector<index_t> iterations{100, 300};
  bool polish = true;
  std::vector<std::string> dense{"lazy"};
  std::vector<std::string> sparse{"lazy", "s0.1"};
  int threads = 0;
  int random = 20;
  double cache_mib = 256.0;
  std::vector<std::string> build{"exact"};
  index_t clusters = 0;
  std::vector<index_t> probes{0};
  index_t recall = 1000;
  bool dense_f = true;
};

settings parse(int argc, char** argv) {
  settings s;
  auto num = [](const std::string& v) { return dm_bench::number(v, usage); };
  auto list = [&](const std::string& v) {
    std::vector<index_t> out;
    if (v.empty()) return out;
    for (const auto& t : dm_bench::split(v)) out.push_back(static_cast<index_t>(num(t)));
    return out;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(a + ": needs a value");
    const std::string v = argv[++i];
    if (a == "--n") s.n = static_cast<index_t>(num(v));
    else if (a == "--d") s.d = static_cast<index_t>(num(v));
    else if (a == "--neighbors") s.neighbors = list(v);
    else if (a == "--iterations") s.iterations = list(v);
    else if (a == "--polish") s.polish = num(v) != 0.0;
    else if (a == "--dense") s.dense = v.empty() ? std::vector<std::string>{} : dm_bench::split(v);
    else if (a == "--sparse") s.sparse = v.empty() ? std::vector<std::string>{} : dm_bench::split(v);
    else if (a == "--threads") s.threads = static_cast<int>(num(v));
    else if (a == "--random") s.random = static_cast<int>(num(v));
    else if (a == "--cache") s.cache_mib = num(v);
    else if (a == "--build") s.build = v.empty() ? std::vector<std::string>{} : dm_bench::split(v);
    else if (a == "--clusters") s.clusters = static_cast<index_t>(num(v));
    else if (a == "--probes") s.probes = list(v);
    else if (a == "--recall") s.recall = static_cast<index_t>(num(v));
    else if (a == "--dense-f") s.dense_f = num(v) != 0.0;
    else usage("unknown option '" + a + "'");
  }
  return s;
}

/// The 1, 5 and 15 minute load averages (the machine is shared: timings need them beside).
std::string loadavg() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "unknown";
  double a = 0.0, b = 0.0, c = 0.0;
  const int got = std::fscanf(f, "%lf %lf %lf", &a, &b, &c);
  std::fclose(f);
  if (got != 3) return "unknown";
  char text[64];
  std::snprintf(text, sizeof text, "%.2f %.2f %.2f", a, b, c);
  return text;
}

/// CPU seconds (user + system, all threads) of the process so far: on a shared machine a build's
/// CPU time varies less than its wall time.
double cpu_seconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

double peak_mib() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return static_cast<double>(r.ru_maxrss) / 1024.0;  // Linux: KiB
}

dm::greedy_options greedy_of(const std::string& name, int threads) {
  dm::greedy_options g;
  g.threads = threads;
  if (name == "naive") g.method = dm::greedy_method::naive;
  else if (name == "lazy") g.method = dm::greedy_method::lazy;
  else if (name.size() > 1 && name[0] == 's') {
    g.method = dm::greedy_method::stochastic;
    g.epsilon = dm_bench::number(name.substr(1), usage);
  } else {
    usage("greedy '" + name + "': naive, lazy or sEPS");
  }
  return g;
}

}  // namespace

/// The graphs to build: (label, settings) per builder, K and P.
std::vector<std::pair<std::string, dm::knn_settings>> graphs_of(const settings& s) {
  std::vector<std::pair<std::string, dm::knn_settings>> out;
  for (index_t k : s.neighbors) {
    for (const auto& b : s.build) {
      dm::knn_settings ks;
      ks.neighbors = k;
      ks.threads = s.threads;
      ks.build = dm::parse_enum<dm::knn_build>(b, "--build");
      if (ks.build != dm::knn_build::clustered) {
        out.emplace_back(b, ks);
        continue;
      }
      ks.clusters = s.clusters;
      for (index_t pr : s.probes) {
        ks.probes = pr;
        const index_t c = s.clusters > 0 ? s.clusters : dm::default_clusters(s.n);
        const index_t used = std::min(c, pr > 0 ? pr : dm::default_probes(c));
        std::string label = "C";  // appended piece by piece: GCC 12 warns falsely (-Wrestrict) on a + chain
        label += std::to_string(c);
        label += " P";
        label += std::to_string(used);
        out.emplace_back(label, ks);
      }
    }
  }
  return out;
}

// One run of the benchmark: the f every selection is scored with, the scales the sparse runs
// optimise with, and the first line's f, the reference of the share column.
struct bench_run {
  const settings& s;
  const dm::problem<float>& p;
  dm::settings opt;
  index_t count = 0;
  dm::facility_location dense;
  std::unique_ptr<dm::objective_function<float, dm::facility_location>> f;
  // The sparse runs optimise f with the dense term's scales (fixed): the same weights of quality
  // against coverage, so the sparse term stands in for the dense one in the same f. Without
  // the dense f, the scales are calibrated on the first graph's sparse f.
  dm::settings fixed;
  double random = 0.0;
  double reference = 0.0;
  bool have_reference = false;
  std::function<double(std::span<const index_t>)> score;  // the first graph's sparse f without --dense-f
  std::vector<std::unique_ptr<dm::objective_function<float, dm::sparse_facility_location>>> first;

  bench_run(const settings& set, const dm::problem<float>& prob)
      : s(set), p(prob), opt(dm_bench::bench_options(set.threads)), count(dm::detail::selection_size(opt, set.n)) {
    dense.cache_bytes = static_cast<std::size_t>(s.cache_mib * 1024.0 * 1024.0);
    fixed = opt;
    fixed.scaling = dm::term_scaling::fixed;
    if (!s.dense_f) return;
    f = std::make_unique<dm::objective_function<float, dm::facility_location>>(p, dense, opt.lambda, opt.quality,
                                                                               false, s.threads);
    dm_bench::calibrate(*f, p, dense, opt);
    for (const auto& t : f->terms()) fixed.scales.push_back(t.scale);
    random = dm_bench::random_mean(*f, s.n, count, s.random);
  }

  void header() const {
    std::printf("n %lld, d %lld, S %lld, threads %d; f = 0.5 quality + 0.5 facility (cosine), scored %s; "
                "load average %s\n",
                static_cast<long long>(s.n), static_cast<long long>(s.d), static_cast<long long>(count), s.threads,
                s.dense_f ? "with the dense term" : "with the first graph's sparse term", loadavg().c_str());
    if (s.dense_f) std::printf("random subsets: f %.6f\n", random);
    std::printf("%-28s %6s %-12s %9s %9s %12s %8s %12s %9s\n", "method", "K", "graph", "graph s", "select s",
                "f (scored)", "share", "f (sparse)", "peak MiB");
  }

  // One table line: a selection scored with the run's f, its share of the first line's gain.
  void line(const std::string& method, index_t k, const std::string& graph, double graph_s, double sel_s,
            std::span<const index_t> rows, double sparse_f) {
    const double v = s.dense_f ? (*f)(rows) : score(rows);
    if (!have_reference) reference = v;
    have_reference = true;
    const double share = (v - random) / (reference - random);
    std::printf("%-28s %6s %-12s %9.2f %9.2f %12.6f %7.2f%% %12.6f %9.0f\n", method.c_str(),
                k > 0 ? std::to_string(k).c_str() : "dense", graph.c_str(), graph_s, sel_s, v, 100.0 * share,
                sparse_f, peak_mib());
    std::fflush(stdout);
  }

  void dense_greedies() {
    for (const auto& name : s.dense) {
      if (!s.dense_f) usage("--dense needs the dense f (--dense-f 1)");
      const auto t0 = clk::now();
      const auto r = dm::greedy_select(*f, count, greedy_of(name, s.threads));
      line("greedy " + name, 0, "", 0.0, dm_bench::since(t0), r.rows, std::nan(""));
    }
  }

  // One graph: built and timed, its recall, then the sparse greedies and continuous runs on it.
  void graph(const std::string& label, const dm::knn_settings& ks) {
    const index_t k = ks.neighbors;
    const auto t0 = clk::now();
    const double cpu0 = cpu_seconds();
    const dm::sparse_facility_location sparse{std::make_shared<const dm::knn_graph>(dm::build_knn_graph(p, ks))};
    const double graph_s = dm_bench::since(t0);
    const double graph_cpu = cpu_seconds() - cpu0;
    const auto t1 = clk::now();
    const double recall = s.recall > 0 ? dm::knn_recall(p, *sparse.graph, ks, std::min(s.recall, s.n)) : std::nan("");
    std::printf("graph %s, K = %lld: %.2f s (%.2f s CPU), %.1f MiB, recall@K %.4f on %lld rows (%.2f s); peak %.0f MiB; "
                "load average %s\n",
                label.c_str(), static_cast<long long>(k), graph_s, graph_cpu,
                static_cast<double>(sparse.graph->bytes()) / (1024.0 * 1024.0), recall,
                static_cast<long long>(std::min(s.recall, s.n)), dm_bench::since(t1), peak_mib(), loadavg().c_str());
    auto fs = std::make_unique<dm::objective_function<float, dm::sparse_facility_location>>(
        p, sparse, opt.lambda, opt.quality, false, s.threads);
    if (!s.dense_f && !score) {
      dm_bench::calibrate(*fs, p, sparse, opt);
      for (const auto& t : fs->terms()) fixed.scales.push_back(t.scale);
      random = dm_bench::random_mean(*fs, s.n, count, s.random);
      std::printf("random subsets: f %.6f (sparse, graph %s)\n", random, label.c_str());
      const auto* scorer = fs.get();
      score = [scorer](std::span<const index_t> rows) { return (*scorer)(rows); };
    }
    fs->set_scales(fixed.scales);
    for (const auto& name : s.sparse) {
      const auto t2 = clk::now();
      const auto r = dm::greedy_select(*fs, count, greedy_of(name, s.threads));
      const double sec = dm_bench::since(t2);
      line("greedy " + name, k, label, graph_s, sec, r.rows, (*fs)(r.rows));
    }
    for (index_t it : s.iterations) {
      dm::continuous_options co;
      co.common = fixed;
      co.ascent.iterations = it;
      co.polish.enabled = s.polish;
      const auto t2 = clk::now();
      const auto res = dm::continuous_learner(co).select(p, sparse);
      const double sec = dm_bench::since(t2);
      line("continuous " + std::to_string(it) + (s.polish ? " +polish" : ""), k, label, graph_s, sec, res.rows,
           (*fs)(res.rows));
    }
    if (!s.dense_f && first.empty()) first.push_back(std::move(fs));  // the scorer of later graphs
  }
};

int main(int argc, char** argv) {
  datamask::passive_wait_unless_set(argv);  // first: see datamask/core/wait_policy.hpp
  const auto start = clk::now();
  const settings s = parse(argc, argv);
  try {
    const dm_bench::block& b = dm_bench::data(s.n, s.d);
    const dm::problem<float> p = b.problem();
    bench_run run(s, p);
    run.header();
    run.dense_greedies();
    for (const auto& [label, ks] : graphs_of(s)) run.graph(label, ks);
    const double bytes = static_cast<double>(b.x.size() * sizeof(float));
    std::printf("end to end: %.1f s wall; peak %.0f MiB = %.2f x the embeddings' %.0f MiB; load average %s\n",
                dm_bench::since(start), peak_mib(), peak_mib() * 1024.0 * 1024.0 / bytes, bytes / (1024.0 * 1024.0),
                loadavg().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "datamask_bench_facility_knn: %s\n", e.what());
    return 1;
  }
  return 0;
}
