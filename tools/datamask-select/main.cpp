// SPDX-License-Identifier: Apache-2.0
//
// datamask-select: the command-line program of datamask. Reads memory-mapped .npy embeddings
// (one file or shards), quality scores and ids; splits the corpus into blocks by a hash of the
// id; selects exactly round(ratio * n) items with the optimizer --optimizer names: continuous
// (the continuous learner), pg (the policy-gradient learner), or a greedy baseline (greedy,
// lazy, stochastic); auto, the default, takes the continuous learner when every objective has a
// relaxation and pg otherwise. Writes the ids, a JSON report, a per-step CSV log and an SVG
// plot, each atomically. --checkpoint/--resume continue an interrupted run to exactly the
// selection an uninterrupted run gives.
//
// Exit codes: 0 success; 2 bad input or usage; 1 internal error; 130/143 interrupted.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#if __has_include(<unistd.h>)
#include <unistd.h>
#endif

#include <datamask/datamask.hpp>
#include <datamask/io/file.hpp>
#include <datamask/io/report.hpp>
#include <datamask/pipeline.hpp>

#include "args.hpp"
#include "checkpoint.hpp"
#include "corpus.hpp"
#include "knn.hpp"
#include "outputs.hpp"
#include "paths.hpp"
#include "wait_policy.hpp"

namespace dmselect {

namespace {

// Set by the signal handler, read at every step: the only mutable global, as a signal handler
// needs one.
volatile std::sig_atomic_t g_signal = 0;
extern "C" void on_signal(int sig) { g_signal = sig; }

struct interrupted {
  int sig;
  bool saved = false;  // a checkpoint holds the state
};

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// The diversity mix the flags choose: every objective is present, those not chosen weigh 0.
using mix_type = datamask::diversity_mix<datamask::pairwise_similarity, datamask::facility_location, datamask::disf,
                                         datamask::sparse_facility_location>;

mix_type make_mix(const config& c) {
  double w[3] = {0, 0, 0};
  const char* names[3] = {"pairwise", "facility", "disf"};
  for (std::size_t i = 0; i < c.objectives.size(); ++i) {
    for (int j = 0; j < 3; ++j) {
      if (c.objectives[i] == names[j]) w[j] = c.objective_weights.empty() ? 1.0 : c.objective_weights[i];
    }
  }
  datamask::facility_location fl = c.learn.facility_object();
  fl.cache_bytes = static_cast<std::size_t>(c.facility_cache_mib * 1024.0 * 1024.0);
  const double knn = c.neighbors > 0 || !c.graph.empty() ? w[1] : 0.0;  // facility on a kNN graph (knn.hpp)
  return datamask::mix(datamask::weighted{datamask::pairwise_similarity{}, w[0]}, datamask::weighted{fl, w[1] - knn},
                       datamask::weighted{datamask::disf{}, w[2]},
                       datamask::weighted{datamask::sparse_facility_location{}, knn});
}

/// Progress on stderr: a bar with rate and time left when stderr is a terminal, a plain line
/// every 10% or 30 seconds otherwise.
class progress {
 public:
  progress(bool quiet, index_t total, const char* unit) : quiet_(quiet), unit_(unit), total_(total) {
#if __has_include(<unistd.h>)
    tty_ = ::isatty(2) != 0;
#endif
  }
  void step(index_t block, index_t blocks) {
    ++done_;
    if (quiet_ || total_ <= 0) return;
    const double el = seconds_since(t0_);
    const double rate = el > 0 ? static_cast<double>(done_) / el : 0.0;
    const double left = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0.0;
    const double frac = static_cast<double>(done_) / static_cast<double>(total_);
    if (tty_) {
      if (el - last_ < 0.1 && done_ != total_) return;
      last_ = el;
      const int width = 30;
      const int fill = static_cast<int>(frac * width);
      std::fprintf(stderr, "\r[%s%s] %3.0f%% %lld/%lld %s, block %lld/%lld, %.1f %s/s, %s left   ",
                   std::string(static_cast<std::size_t>(fill), '#').c_str(),
                   std::string(static_cast<std::size_t>(width - fill), '.').c_str(), 100 * frac,
                   static_cast<long long>(done_), static_cast<long long>(total_), unit_, static_cast<long long>(block + 1),
                   static_cast<long long>(blocks), rate, unit_, clock_text(left).c_str());
      if (done_ == total_) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    } else if (frac >= next_ || el - last_ >= 30.0 || done_ == total_) {
      last_ = el;
      while (next_ <= frac) next_ += 0.1;
      std::fprintf(stderr, "progress: %lld/%lld %s (%.0f%%), block %lld/%lld, %.1f %s/s, %s left\n",
                   static_cast<long long>(done_), static_cast<long long>(total_), unit_, 100 * frac,
                   static_cast<long long>(block + 1), static_cast<long long>(blocks), rate, unit_, clock_text(left).c_str());
    }
  }
  void skip(index_t steps) { total_ -= steps; }

 private:
  static std::string clock_text(double s) {
    const auto t = static_cast<long long>(s + 0.5);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, (t / 60) % 60, t % 60);
    return buf;
  }
  bool quiet_;
  const char* unit_;  // "steps" (pg) or "iterations" (continuous)
  bool tty_ = false;
  index_t total_;
  index_t done_ = 0;
  double last_ = 0.0;
  double next_ = 0.1;
  clock_type::time_point t0_ = clock_type::now();
};

struct run_context {
  const config& cfg;
  const corpus& data;
  const mix_type& mix;
  std::optional<double> prune_threshold;
  checkpoint_dir& ckpt;
  progress& prog;
  std::size_t blocks = 1;
  knn_run& knn;
};

/// The learner's options for block b (the flags, S_b, the global prune threshold).
datamask::options block_options(const config& c, index_t b, index_t s_b, std::optional<double> threshold) {
  datamask::options o;
  static_cast<datamask::settings&>(o) = c.run;
  o.count = s_b;
  o.prune = 0.0;  // the corpus-level threshold below replaces the per-block quantile
  o.prune_threshold = threshold;
  o.block = static_cast<std::uint64_t>(b);
  o.evaluate_selection = false;  // evaluated by evaluate_block, timed on its own
  return o;
}

/// The program's side of a learner run: resume from the block's snapshot, progress, stop on a
/// signal, snapshots. Returns the rows selected and their scales.
std::vector<index_t> learn_block(run_context& ctx, const datamask::problem<float>& p, datamask::options& o,
                                 block_result& r, std::vector<double>& scales) {
  const config& c = ctx.cfg;
  const index_t b = r.block;
  if (ctx.ckpt.active()) {
    index_t step = 0;
    std::vector<double> logits;
    if (ctx.ckpt.load_snapshot(b, r.items, step, logits, r.history, o.initial_best)) {
      o.first_step = step + 1;
      o.initial_logits = std::move(logits);
      ctx.prog.skip(std::min(step, c.run.steps));
    }
  }
  const auto blocks = static_cast<index_t>(ctx.blocks);
  o.on_step = [&](const datamask::step_info& s) {
    r.history.push_back(datamask::step_record{s.step, s.lr, s.reward_mean, s.reward_max,
                                              std::vector<double>(s.term_means.begin(), s.term_means.end())});
    ctx.prog.step(b, blocks);
  };
  o.stop = [](const datamask::step_info&) { return g_signal != 0; };
  o.snapshot_every = ctx.ckpt.active() ? c.checkpoint_every : 0;
  o.on_snapshot = [&](const datamask::step_info& s, std::span<const double> logits, const datamask::best_rollout& best) {
    if (ctx.ckpt.active()) ctx.ckpt.save_snapshot(r, s.step, logits, best);
    if (g_signal != 0) throw interrupted{g_signal, ctx.ckpt.active()};
  };
  const datamask::learner<datamask::eigen_backend, datamask::softmax_policy, datamask::runtime_lr> L(
      o, c.learn.policy_object(), c.learn.schedule_object());
  auto res = L.select(p, ctx.mix);
  r.ids = std::move(res.ids);
  r.kept = res.kept;
  r.steps_run = res.steps_run;
  r.zero_variance_steps = res.zero_variance_steps;
  r.nonfinite_steps = res.nonfinite_steps;
  scales.clear();
  for (const auto& t : res.terms) scales.push_back(t.scale);
  return std::move(res.rows);
}

/// The continuous learner on one block: progress per iteration, stop on a signal. The mix holds
/// only the relaxable objectives (facility location, which has no relaxation, is refused by
/// check_args); its terms are those of ctx.mix, whose facility term then weighs 0. A block is
/// checkpointed when it finishes (an interrupted block restarts: its ascent is short).
std::vector<index_t> continuous_block(run_context& ctx, const datamask::problem<float>& p, const datamask::options& o,
                                      block_result& r, std::vector<double>& scales) {
  const config& c = ctx.cfg;
  const index_t b = r.block;
  const auto blocks = static_cast<index_t>(ctx.blocks);
  datamask::continuous_options co;
  static_cast<datamask::settings&>(co.common) = static_cast<const datamask::settings&>(o);
  co.ascent = c.ascent;
  co.polish = c.polish;
  co.on_step = [&](const datamask::continuous_step_info& s) {
    r.history.push_back(datamask::step_record{s.iteration, s.lr, s.relaxed, s.relaxed, {}});
    ctx.prog.step(b, blocks);
  };
  co.stop = [](const datamask::continuous_step_info&) { return g_signal != 0; };
  double w[3] = {0, 0, 0};
  for (std::size_t i = 0; i < c.objectives.size(); ++i) {
    const double wi = c.objective_weights.empty() ? 1.0 : c.objective_weights[i];
    if (c.objectives[i] == "pairwise") w[0] = wi;
    if (c.objectives[i] == "disf") w[1] = wi;
    if (c.objectives[i] == "facility") w[2] = wi;  // on a kNN graph: check_args refuses dense facility
  }
  const auto mix = datamask::mix(datamask::weighted{datamask::pairwise_similarity{}, w[0]},
                                 datamask::weighted{datamask::disf{}, w[1]},
                                 datamask::weighted{std::get<datamask::sparse_facility_location>(ctx.mix.objectives),
                                                    w[2]});
  const datamask::basic_continuous_learner<datamask::eigen_backend> L(co);
  auto res = L.select(p, mix);
  if (g_signal != 0) throw interrupted{g_signal, ctx.ckpt.active()};
  r.ids = std::move(res.ids);
  r.kept = res.kept;
  r.steps_run = res.steps_run;
  scales.clear();
  for (const auto& t : res.terms) scales.push_back(t.scale);
  return std::move(res.rows);
}

/// One block: gather its data, select (learner or greedy baseline), evaluate.
block_result run_block(run_context& ctx, index_t b, const std::vector<index_t>& rows, index_t s_b) {
  const config& c = ctx.cfg;
  const corpus& k = ctx.data;
  block_result r;
  r.block = b;
  r.items = static_cast<index_t>(rows.size());
  r.selected = s_b;
  if (s_b == 0) return r;
  const auto data = datamask::gather_block(
      rows, k.d, ctx.blocks == 1 ? k.whole_view() : datamask::matrix_view<const float>{},
      [&](std::span<const index_t> rs, float* out) { k.gather(rs, out, c.run.threads); },
      std::span<const std::vector<double>>(k.quality), k.quality_weights, [&](index_t row) { return k.id(row); });
  const datamask::problem<float> p = data.view();
  datamask::options o = block_options(c, b, s_b, ctx.prune_threshold);
  const mix_type mix = block_mix(ctx.mix, c, ctx.knn, p, b);  // with the block's kNN graph, if any
  run_context bctx{c, k, mix, ctx.prune_threshold, ctx.ckpt, ctx.prog, ctx.blocks, ctx.knn};

  const auto t0 = clock_type::now();
  std::vector<index_t> sel_rows;
  std::vector<double> scales;
  if (c.optimizer == "pg") {
    sel_rows = learn_block(bctx, p, o, r, scales);
  } else if (c.optimizer == "continuous") {
    sel_rows = continuous_block(bctx, p, o, r, scales);
  } else {
    datamask::greedy_options g;
    g.method = c.optimizer == "greedy" ? datamask::greedy_method::naive
               : c.optimizer == "lazy" ? datamask::greedy_method::lazy
                                       : datamask::greedy_method::stochastic;
    // A signal ends the greedy within about 0.1 s (greedy_options::stop); its partial
    // selection is dropped: an interrupted run writes no output.
    g.stop = [] { return g_signal != 0; };
    sel_rows = datamask::greedy_select_block(p, mix, o, g, scales, r.kept);
    if (g_signal != 0) throw interrupted{g_signal, ctx.ckpt.active()};
    ctx.prog.skip(c.run.steps);  // the progress plan counts --steps per block for the greedy baselines
    for (index_t row : sel_rows) r.ids.push_back(data.ids[static_cast<std::size_t>(row)]);
  }
  r.optimize_seconds = seconds_since(t0);

  const auto t1 = clock_type::now();
  datamask::evaluate_block(p, mix, o, scales, sel_rows, r);
  r.evaluate_seconds = seconds_since(t1);
  return r;
}

/// The global prune threshold over the whole corpus (the library's rank rule), if --prune.
std::optional<double> corpus_prune_threshold(const config& c, const corpus& k) {
  if (c.run.prune <= 0.0) return std::nullopt;
  std::vector<std::span<const double>> columns(k.quality.begin(), k.quality.end());
  return datamask::prune_threshold(datamask::combined_quality(columns, k.quality_weights), c.run.prune);
}

/// Runs (or loads from the checkpoint) every block, in order.
std::vector<block_result> run_blocks(run_context& ctx, const std::vector<std::vector<index_t>>& blocks,
                                     const std::vector<index_t>& counts) {
  std::vector<block_result> results;
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    if (g_signal != 0) throw interrupted{g_signal, ctx.ckpt.active()};
    if (ctx.ckpt.done(b)) {
      results.push_back(ctx.ckpt.load_block(static_cast<index_t>(b)));
      continue;
    }
    try {
      results.push_back(run_block(ctx, static_cast<index_t>(b), blocks[b], counts[b]));
    } catch (const datamask::invalid_input& e) {
      if (blocks.size() == 1) throw;
      throw datamask::invalid_input(e.input(), "block " + std::to_string(b) + ": " +
                                                   std::string(e.what()).substr(e.input().size() + 2));
    }
    if (ctx.ckpt.active()) ctx.ckpt.finish_block(results.back());
  }
  return results;
}

/// Writes the outputs, then prints the summary on stdout.
void write_outputs(const config& c, datamask::io::run_report& rep, const std::vector<datamask::id_t>& selected,
                   double optimize) {
  const auto t_write = clock_type::now();
  if (!c.out.empty()) datamask::io::write_file_atomic(c.out, ids_file_bytes(c.out, selected));
  const bool relaxed = c.optimizer == "continuous";  // one row per iteration: the relaxed f
  if (!c.log.empty()) datamask::io::write_file_atomic(c.log, log_csv(rep.blocks, relaxed));
  if (!c.plot.empty()) datamask::io::write_file_atomic(c.plot, plot_svg(rep.blocks, relaxed));
  rep.seconds.emplace_back("write", seconds_since(t_write));
  if (!c.report.empty()) datamask::io::write_file_atomic(c.report, datamask::io::report_json(rep).dump(2) + "\n");

  double f_total = 0.0;
  const auto terms = datamask::total_terms(rep.blocks, f_total);
  std::printf("selected %lld of %lld items (%zu block%s, %.2f s optimising, optimizer %s)\n",
              static_cast<long long>(rep.selected), static_cast<long long>(rep.rows), rep.blocks.size(),
              rep.blocks.size() == 1 ? "" : "s", optimize, c.optimizer.c_str());
  std::printf("objective %.6g =", f_total);
  for (std::size_t t = 0; t < terms.size(); ++t) {
    std::printf("%s %.3g * %s %.6g / %.3g", t ? " +" : "", terms[t].weight, terms[t].name.c_str(), terms[t].raw,
                terms[t].scale);
  }
  std::printf("\n");
  for (const std::string* out : {&c.out, &c.report, &c.log, &c.plot}) {
    if (!out->empty()) std::printf("wrote %s\n", out->c_str());
  }
}

int run(int argc, char** argv) {
  config c;
  if (!parse_args(argc, argv, c)) return 0;
  check_output_paths(c);  // before any work: writable, distinct, none an input

  datamask::io::run_report rep;
  rep.configuration = configuration_json(c);
  const auto t_load = clock_type::now();
  const corpus k = c.demo ? demo_corpus(c.run.seed) : load_corpus(c);
  rep.seconds.emplace_back("load", seconds_since(t_load));
  rep.input_hash = k.hash;
  rep.rows = k.n;
  rep.dims = k.d;

  const index_t total = datamask::selection_size(k.n, c.run.ratio, c.run.count);
  rep.selected = total;
  const auto blocks = datamask::assign_blocks(k.n, c.block_size, [&](index_t r) { return k.id(r); });
  std::vector<index_t> sizes;
  for (const auto& b : blocks) sizes.push_back(static_cast<index_t>(b.size()));
  const auto counts = datamask::split_selection(sizes, k.n, total);
  knn_run knn = load_graph_option(c, k.n, blocks.size());  // before anything is written

  const auto t_prune = clock_type::now();
  const std::optional<double> threshold = corpus_prune_threshold(c, k);
  if (threshold) rep.prune_threshold = *threshold;
  rep.seconds.emplace_back("prune", seconds_since(t_prune));

  checkpoint_dir ckpt;
  if (!c.checkpoint.empty()) ckpt = checkpoint_dir(c, k.hash, blocks.size());
  rep.resumed = c.resume;
  index_t planned = 0;
  const bool cont = c.optimizer == "continuous";
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    if (!ckpt.done(b) && counts[b] > 0) planned += cont ? c.ascent.iterations : c.run.steps;
  }
  progress prog(c.quiet, planned, cont ? "iterations" : "steps");
  if (!c.quiet) {
    std::fprintf(stderr, "datamask-select %s: %lld items x %lld dims in %zu block%s; selecting %lld%s\n",
                 datamask::version_string, static_cast<long long>(k.n), static_cast<long long>(k.d), blocks.size(),
                 blocks.size() == 1 ? "" : "s", static_cast<long long>(total), c.resume ? " (resuming)" : "");
    std::fprintf(stderr, "optimizer: %s%s\n", c.optimizer.c_str(),
                 c.requested != "auto" ? ""
                 : cont ? " (auto: every diversity term has a relaxation; --optimizer pg for the policy gradient)"
                        : " (auto: dense facility location has no relaxation)");
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const mix_type mix = make_mix(c);
  run_context ctx{c, k, mix, threshold, ckpt, prog, blocks.size(), knn};
  rep.blocks = run_blocks(ctx, blocks, counts);
  if (c.neighbors > 0 || !c.graph.empty()) {
    rep.configuration["graph-built"] = graph_json(knn);
    rep.seconds.emplace_back("graph", knn.seconds);
  }
  double optimize = 0.0, evaluate = 0.0;
  for (const auto& r : rep.blocks) {
    optimize += r.optimize_seconds;
    evaluate += r.evaluate_seconds;
  }
  rep.seconds.emplace_back("optimize", optimize);
  rep.seconds.emplace_back("evaluate", evaluate);

  // Block by block, each in its selection order.
  std::vector<datamask::id_t> selected;
  for (const auto& r : rep.blocks) selected.insert(selected.end(), r.ids.begin(), r.ids.end());
  if (static_cast<index_t>(selected.size()) != total) {
    throw std::logic_error("selected " + std::to_string(selected.size()) + " items, expected " + std::to_string(total));
  }
  write_outputs(c, rep, selected, optimize);
  return 0;
}

}  // namespace
}  // namespace dmselect

int main(int argc, char** argv) {
  dmselect::passive_wait_unless_set(argv);  // first: no thread exists yet
  try {
    return dmselect::run(argc, argv);
  } catch (const dmselect::interrupted& i) {
    std::fprintf(stderr, "\ndatamask-select: interrupted by signal %d; no output written%s\n", i.sig,
                 i.saved ? "; the checkpoint is saved: rerun with --resume to continue" : "");
    return 128 + i.sig;
  } catch (const dmselect::usage_error& e) {
    std::fprintf(stderr, "datamask-select: %s\n", e.what());
    return 2;
  } catch (const datamask::invalid_input& e) {
    // The library names its settings (prune, count, ...); say them as the options they came from.
    std::fprintf(stderr, "datamask-select: %s\n", dmselect::option_message(e).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "datamask-select: internal error: %s\n", e.what());
    return 1;
  }
}
