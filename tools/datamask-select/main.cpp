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
#include <datamask/block_select.hpp>
#include <datamask/pipeline.hpp>

#include "args.hpp"
#include "checkpoint.hpp"
#include "corpus.hpp"
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
  std::optional<double> prune_threshold;
  checkpoint_dir& ckpt;
  progress& prog;
  std::size_t blocks = 1;
};

/// The library's settings of a block run: the flags as datamask-select parsed them.
datamask::block_run_settings block_settings(const config& c) {
  datamask::block_run_settings s;
  s.run = c.run;
  s.learn = c.learn;
  s.ascent = c.ascent;
  s.polish = c.polish;
  s.optimizer = datamask::parse_enum<datamask::block_optimizer>(c.optimizer, "optimizer");
  s.weights = datamask::weights_of(c.objectives, c.objective_weights);
  return s;
}

/// The program's side of a block run: progress, stop on a signal, and with --checkpoint the
/// policy gradient's snapshots and their resume.
datamask::block_hooks block_hooks(run_context& ctx, index_t b) {
  datamask::block_hooks h;
  const auto blocks = static_cast<index_t>(ctx.blocks);
  h.on_step = [&ctx, b, blocks](const datamask::step_record&) { ctx.prog.step(b, blocks); };
  h.stop = [] { return g_signal != 0; };
  if (!ctx.ckpt.active()) return h;
  h.snapshot_every = ctx.cfg.checkpoint_every;
  h.on_snapshot = [&ctx](const block_result& r, index_t step, std::span<const double> logits,
                         const datamask::best_rollout& best) { ctx.ckpt.save_snapshot(r, step, logits, best); };
  h.resume = [&ctx](block_result& r, index_t& step, std::vector<double>& logits, datamask::best_rollout& best) {
    if (!ctx.ckpt.load_snapshot(r.block, r.items, step, logits, r.history, best)) return false;
    ctx.prog.skip(std::min(step, ctx.cfg.run.steps));
    return true;
  };
  return h;
}

/// One block: gather its data, then the library's selection and evaluation.
block_result run_block(run_context& ctx, index_t b, const std::vector<index_t>& rows, index_t s_b) {
  const config& c = ctx.cfg;
  const corpus& k = ctx.data;
  if (s_b == 0) {  // nothing to select: no data to gather
    block_result r;
    r.block = b;
    r.items = static_cast<index_t>(rows.size());
    return r;
  }
  const auto data = datamask::gather_block(
      rows, k.d, ctx.blocks == 1 ? k.whole_view() : datamask::matrix_view<const float>{},
      [&](std::span<const index_t> rs, float* out) { k.gather(rs, out, c.run.threads); },
      std::span<const std::vector<double>>(k.quality), k.quality_weights, [&](index_t row) { return k.id(row); });
  block_result r;
  try {
    r = datamask::select_block(data.view(), b, s_b, ctx.prune_threshold, block_settings(c), block_hooks(ctx, b));
  } catch (const datamask::run_stopped&) {
    throw interrupted{g_signal, ctx.ckpt.active()};
  }
  // The progress plan counts --steps per block for the greedy baselines.
  if (c.optimizer != "pg" && c.optimizer != "continuous") ctx.prog.skip(c.run.steps);
  return r;
}

/// The global prune threshold over the whole corpus (the library's rank rule), if --prune.
std::optional<double> corpus_prune_threshold(const config& c, const corpus& k) {
  return datamask::corpus_prune_threshold(c.run.prune, k.quality, k.quality_weights);
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
                        : " (auto: facility location has no relaxation yet)");
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  run_context ctx{c, k, threshold, ckpt, prog, blocks.size()};
  rep.blocks = run_blocks(ctx, blocks, counts);
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
