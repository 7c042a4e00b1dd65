// SPDX-License-Identifier: Apache-2.0
//
// datamask-select's main (dmfront::select_main, datamask/frontend/program.hpp), a library so that
// a program of a user's own objectives is datamask-select with a larger registry. Reads
// memory-mapped .npy embeddings (one file or shards), quality scores and ids; splits the corpus
// into blocks (groups of consecutive files, each split by a hash of the id: datamask::layout_corpus); selects exactly round(ratio * n) items with the optimizer
// --optimizer names: continuous (the continuous learner), pg (the policy-gradient learner), or a
// greedy baseline (greedy, lazy, stochastic); auto, the default, takes lazy greedy for facility
// location alone, the continuous learner when every objective has a relaxation, and stochastic
// greedy otherwise. Writes the ids, a JSON report, a per-step CSV log and an SVG plot, each
// atomically. --checkpoint/--resume continue an interrupted run to exactly the selection an
// uninterrupted run gives.
//
// Exit codes: 0 success; 2 bad input or usage; 1 internal error; 130/143 interrupted (during the
// final write: after the whole set is written).

#include <algorithm>
#include <chrono>
#include <iterator>
#include <map>
#include <utility>
#include <csignal>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#if __has_include(<unistd.h>)
#include <unistd.h>
#endif

#include <datamask/datamask.hpp>
#include <datamask/io/file.hpp>
#include <datamask/run/report.hpp>
#include <datamask/run/block_select.hpp>
#include <datamask/run/pipeline.hpp>
#include <datamask/core/wait_policy.hpp>
#include <datamask/frontend/program.hpp>

#include "args.hpp"
#include <datamask/frontend/block_backend.hpp>
#include "checkpoint.hpp"
#include "corpus.hpp"
#include "knn.hpp"
#include "mpi.hpp"
#include "outputs.hpp"
#include "paths.hpp"
#include "plan_file.hpp"
#include "shards.hpp"
#include "spread.hpp"

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

/// The exit code once the outputs are written: 0, or 128 + the signal that arrived while they
/// were (the set is written whole all the same: stopping between its renames would leave it half
/// replaced), said on stderr.
int written_exit_code(const config& c, const std::string& what) {
  if (g_signal == 0) return 0;
  std::fprintf(stderr, "\n%s: interrupted by signal %d while writing %s; the write was completed\n", c.program.c_str(),
               static_cast<int>(g_signal), what.c_str());
  return 128 + g_signal;
}

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// Progress on stderr: a bar with rate and time left when stderr is a terminal, a plain line
/// every 10% or 30 seconds otherwise; for the optimizer's steps over the run, and for each
/// block's kNN graph (rows), whose build time stays out of the steps' rate.
class progress {
 public:
  progress(bool quiet, index_t total, std::string unit) : quiet_(quiet), unit_(std::move(unit)), total_(total) {
#if __has_include(<unistd.h>)
    tty_ = ::isatty(2) != 0;
#endif
  }
  void step(index_t block, index_t blocks) {
    ++done_;
    if (quiet_ || total_ <= 0) return;
    const double el = seconds_since(t0_) - excluded_;
    if (tty_ && el - last_ < 0.1 && done_ != total_) return;
    if (!tty_ && static_cast<double>(done_) / static_cast<double>(total_) < next_ && el - last_ < 30.0 &&
        done_ != total_) {
      return;
    }
    last_ = el;
    line(unit_.c_str(), "block", block, blocks, done_, total_, el, next_);
  }
  void skip(index_t steps) { total_ -= steps; }
  /// A block's selection starts (its graph's rate and its 10% steps count from here).
  void begin_block() {
    block_t0_ = clock_type::now();
    graph_next_ = 0.1;
  }
  /// Rows of block `block`'s kNN graph compared so far (datamask::block_hooks::on_graph_progress).
  void graph_rows(index_t block, index_t blocks, index_t done, index_t total) {
    if (quiet_ || total <= 0) return;
    const double el = seconds_since(block_t0_);
    if (!tty_ && static_cast<double>(done) / static_cast<double>(total) < graph_next_ && done != total) return;
    line("rows", "kNN graph of block", block, blocks, done, total, el, graph_next_);
  }
  /// A block's graph took `seconds`: not the optimizer's time.
  void exclude(double seconds) { excluded_ += seconds; }
  /// Block `block`'s certificate (--certify), once its selection is evaluated; its seconds are
  /// not the optimizer's.
  void certified(index_t block, index_t blocks, const datamask::block_certificate& c) {
    excluded_ += c.seconds;
    if (quiet_) return;
    std::fprintf(stderr, "%scertificate of block %lld/%lld: %s\n", tty_ ? "\r" : "", static_cast<long long>(block + 1),
                 static_cast<long long>(blocks), certificate_text(c).c_str());
  }

 private:
  /// One progress line (a bar on a terminal): done of total units in el seconds; `next` is the
  /// next tenth a plain line is due at.
  void line(const char* unit, const char* what, index_t block, index_t blocks, index_t done, index_t total, double el,
            double& next) const {
    const double rate = el > 0 ? static_cast<double>(done) / el : 0.0;
    const double left = rate > 0 ? static_cast<double>(total - done) / rate : 0.0;
    const double frac = static_cast<double>(done) / static_cast<double>(total);
    if (tty_) {
      const int width = 30;
      const int fill = static_cast<int>(frac * width);
      std::fprintf(stderr, "\r[%s%s] %3.0f%% %lld/%lld %s, %s %lld/%lld, %.1f %s/s, %s left   ",
                   std::string(static_cast<std::size_t>(fill), '#').c_str(),
                   std::string(static_cast<std::size_t>(width - fill), '.').c_str(), 100 * frac,
                   static_cast<long long>(done), static_cast<long long>(total), unit, what,
                   static_cast<long long>(block + 1), static_cast<long long>(blocks), rate, unit, clock_text(left).c_str());
      if (done == total) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    } else {
      while (next <= frac) next += 0.1;
      std::fprintf(stderr, "progress: %lld/%lld %s (%.0f%%), %s %lld/%lld, %.1f %s/s, %s left\n",
                   static_cast<long long>(done), static_cast<long long>(total), unit, 100 * frac, what,
                   static_cast<long long>(block + 1), static_cast<long long>(blocks), rate, unit, clock_text(left).c_str());
    }
  }

  static std::string clock_text(double s) {
    const auto t = static_cast<long long>(s + 0.5);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, (t / 60) % 60, t % 60);
    return buf;
  }
  bool quiet_;
  std::string unit_;  // "steps" (pg), "iterations" (continuous), "picks" (greedy), or "iterations and picks"
  bool tty_ = false;
  index_t total_;
  index_t done_ = 0;
  double last_ = 0.0;
  double next_ = 0.1;
  double excluded_ = 0.0;  // seconds of graph builds
  clock_type::time_point t0_ = clock_type::now();
  clock_type::time_point block_t0_ = t0_;
  double graph_next_ = 0.1;
};

struct run_context {
  const config& cfg;
  const datamask::block_run_settings& settings;  // every block's, its corpus calibration included
  const corpus& data;
  checkpoint_dir& ckpt;
  progress& prog;
  std::size_t blocks = 1;
  knn_run& knn;
};

/// The library's settings of a block run: the flags as datamask-select parsed them.
datamask::block_run_settings block_settings(const config& c, const knn_run& knn) {
  datamask::block_run_settings s = request_of(c).settings;  // auto stays auto: resolved per block
  s.graph = knn.loaded;
  return s;
}

/// The corpus's calibration into `s`: from --plan, or computed (dmfront::calibrate_corpus).
/// Returns what the run says of it (empty: nothing, each block calibrates itself).
std::string calibrate_corpus(const config& c, const corpus& k, const datamask::corpus_plan& plan,
                             const std::optional<run_plan>& given, const dmfront::planning& p,
                             datamask::block_run_settings& s) {
  if (given) {
    s.calibration = given->calibration;
    return s.calibration.empty() ? "" : "scales: calibrated once for the corpus, read from " + c.plan;
  }
  const auto sample = dmfront::calibrate_corpus(k, plan, s, p);
  if (sample.rows.empty()) return "";
  return "scales: calibrated once for the " + std::to_string(plan.layout.blocks()) + " blocks on " +
         std::to_string(sample.rows.size()) + " rows drawn from the corpus (subsets of " +
         std::to_string(sample.subset) + ")";
}

/// The program's side of a block run: progress, stop on a signal, and with --checkpoint the
/// learners' snapshots (pg: steps; continuous: iterations) and their resume.
datamask::block_hooks block_hooks(run_context& ctx, index_t b) {
  ctx.prog.begin_block();
  datamask::block_hooks h;
  const auto blocks = static_cast<index_t>(ctx.blocks);
  h.on_step = [&ctx, b, blocks](const datamask::step_record&) { ctx.prog.step(b, blocks); };
  h.on_pick = [&ctx, b, blocks](index_t) { ctx.prog.step(b, blocks); };
  h.stop = [] { return g_signal != 0; };
  h.on_graph_progress = [&ctx, b, blocks](index_t done, index_t total) { ctx.prog.graph_rows(b, blocks, done, total); };
  h.on_graph = [&ctx, b, blocks](const datamask::knn_graph& g, double seconds) {
    ctx.prog.exclude(seconds);
    note_graph(ctx.cfg, g, seconds, " of block " + std::to_string(b + 1) + "/" + std::to_string(blocks));
  };
  if (!ctx.ckpt.active()) return h;
  h.snapshot_every = ctx.cfg.checkpoint_every;
  h.on_snapshot = [&ctx](const block_result& r, index_t step, std::span<const double> state,
                         const datamask::best_rollout& best) { ctx.ckpt.save_snapshot(r, step, state, best); };
  h.resume = [&ctx](block_result& r, index_t& step, std::vector<double>& state, datamask::best_rollout& best) {
    if (!ctx.ckpt.load_snapshot(r.block, r.items, step, state, r.history, best)) return false;
    const bool cont = ctx.cfg.optimizer == "continuous";
    ctx.prog.skip(std::min(step, cont ? ctx.cfg.ascent.iterations : ctx.cfg.run.steps));
    return true;
  };
  return h;
}

/// Runs (or loads from the checkpoint) the blocks `mine`, in block order; `record` keeps a
/// finished block in the checkpoint.
std::vector<block_result> run_blocks(run_context& ctx, const datamask::corpus_plan& plan, std::span<const index_t> mine,
                                     const std::function<void(const block_result&)>& record) {
  dmfront::block_side side;
  side.before = [&](index_t) {
    if (g_signal != 0) throw interrupted{g_signal, ctx.ckpt.active()};
  };
  side.recorded = [&](index_t block) -> std::optional<block_result> {
    const auto b = static_cast<std::size_t>(block);
    if (!ctx.ckpt.done(b)) return std::nullopt;
    // The record's picks must be items of the block.
    return ctx.ckpt.load_block(block, ctx.data.ids_of(plan.blocks[b]), plan.counts[b], ctx.data.ids_unsigned);
  };
  side.hooks = [&](index_t block) { return block_hooks(ctx, block); };
  side.finished = [&](const block_result& r) {
    if (r.certificate) ctx.prog.certified(r.block, static_cast<index_t>(ctx.blocks), *r.certificate);
    if (ctx.ckpt.active()) record(r);
  };
  if (ctx.knn.loaded) side.graph_seconds = ctx.knn.seconds;
  try {
    return dmfront::run_blocks(ctx.data, plan, ctx.settings, mine, side);
  } catch (const datamask::run_stopped&) {
    throw interrupted{g_signal, ctx.ckpt.active()};
  }
}

/// The checkpoint folder, if --checkpoint. The ranks of an MPI job share it: on a fresh run rank
/// 0 creates it, then the other ranks open it as a resume does.
checkpoint_dir open_checkpoint(const config& c, std::uint64_t hash, std::size_t blocks, const mpi_world& world) {
  if (c.checkpoint.empty()) return {};
  if (!world.spread() || c.resume) return checkpoint_dir(c, hash, blocks);
  checkpoint_dir ckpt;
  if (world.rank() == 0) ckpt = checkpoint_dir(c, hash, blocks);
  world.barrier();
  if (world.rank() != 0) {
    config again = c;
    again.resume = true;
    ckpt = checkpoint_dir(again, hash, blocks);
  }
  return ckpt;
}

/// Rank 0's side of an MPI run: every rank's blocks (its own included), in block order. The
/// other ranks send theirs and get an empty list.
std::vector<block_result> gather_blocks(const mpi_world& world, const run_header& header,
                                        std::vector<block_result> mine, bool quiet) {
  const auto texts = world.gather(worker_json(header, mine).dump());
  if (world.rank() != 0) return {};
  std::vector<block_result> all;
  std::vector<std::string> from;
  std::size_t bytes = 0;
  for (std::size_t r = 0; r < texts.size(); ++r) {
    const std::string name = "rank " + std::to_string(r);
    std::vector<block_result> got;
    check_same_run(header, "rank 0", read_worker_json(texts[r], name, got), name);
    bytes += r == 0 ? 0 : texts[r].size();
    for (auto& b : got) {
      all.push_back(std::move(b));
      from.push_back(name);
    }
  }
  if (!quiet) {
    std::fprintf(stderr, "gathered %zu bytes from %zu other rank%s (%zu blocks; %.0f bytes per block received)\n", bytes,
                 texts.size() - 1, texts.size() == 2 ? "" : "s", all.size() - mine.size(),
                 all.size() > mine.size() ? static_cast<double>(bytes) / static_cast<double>(all.size() - mine.size()) : 0.0);
  }
  return blocks_in_order(std::move(all), from, header.blocks);
}

/// The GPU of this process on a GPU build (that of its local rank: `datamask::device_for_local_rank`),
/// said by every rank of a job unless --quiet; -1 on the CPU.
/// @throws usage_error when built for CUDA and no device is found
int use_device(const config& c, const mpi_world& world, bool quiet) {
  int device = -1;
  try {
    device = dmfront::use_block_device(world.local_rank());
  } catch (const datamask::error& e) {
    throw usage_error(e.what());
  }
  if (device >= 0 && world.spread() && !quiet) {
    std::fprintf(stderr, "%s (rank %d of %d): backend %s, local rank %d, device %d\n", c.program.c_str(), world.rank(),
                 world.size(), dmfront::block_backend_name().c_str(), world.local_rank().value_or(0), device);
  }
  return device;
}

/// Whether a run of `c` over a corpus of `layout` needs values of the whole corpus that no block
/// holds: the prune threshold (a quantile of every score) or f's calibration (a sample of every row).
bool needs_corpus_values(const config& c, const datamask::corpus_layout& layout) {
  return c.run.prune > 0.0 || datamask::calibrates_corpus(layout.blocks(), request_of(c).settings);
}

/// The group hashes of every rank, each group once (ranks that share a group read the same bytes).
std::vector<std::pair<index_t, std::uint64_t>> every_rank_groups(const mpi_world& world,
                                                                  const std::vector<std::pair<index_t, std::uint64_t>>& mine) {
  std::vector<std::uint64_t> packed;
  for (const auto& [g, h] : mine) packed.insert(packed.end(), {static_cast<std::uint64_t>(g), h});
  const auto all = world.allgather(packed);
  std::map<index_t, std::uint64_t> groups;
  for (std::size_t i = 0; i + 1 < all.size(); i += 2) {
    const auto [at, fresh] = groups.emplace(static_cast<index_t>(all[i]), all[i + 1]);
    if (!fresh && at->second != all[i + 1]) {
      throw usage_error("two ranks read group " + std::to_string(at->first) + " of the input files with other bytes; "
                        "did the files change during the run?");
    }
  }
  return {groups.begin(), groups.end()};
}

/// The corpus of the run (--demo or the files), what worker `share` reads of it (corpus.hpp's
/// worker_reading), with what the report says of it; `c` learns the ids' type and the quality
/// columns read. Under MPI every rank learns every group's hash, so that each has the input hash.
corpus load(config& c, const mpi_world& world, const worker_share& share, datamask::io::run_report& rep) {
  const auto t_load = clock_type::now();
  corpus k;
  if (c.demo) {
    k = demo_corpus(c.run.seed);
  } else {
    worker_reading who;
    who.worker = share.index;
    who.workers = share.count;
    // A worker that takes the corpus-wide values neither from a plan nor from its peers (a shard
    // without --plan) computes them from every row's scores and ids.
    const bool told = world.spread() || (!c.plan.empty() && !c.planning);
    who.every_row = [&](const datamask::corpus_layout& l) { return share.count == 1 || (!told && needs_corpus_values(c, l)); };
    who.embeddings = !c.planning;
    k = load_corpus(c, who);
  }
  if (world.spread()) k.group_hashes = every_rank_groups(world, k.group_hashes);
  k.hash = input_hash(k.fingerprint, k.group_hashes);
  rep.seconds.emplace_back("load", seconds_since(t_load));
  c.ids_unsigned = k.ids_unsigned;  // the outputs write the ids in their type
  c.quality_columns = k.quality_names;
  for (const auto& f : k.files) c.shard_files.push_back({f.path(), f.rows(), f.file_bytes().size()});
  rep.configuration = configuration_json(c);
  rep.input_hash = k.hash;
  rep.rows = k.n;
  rep.dims = k.d;
  return k;
}

/// The plan of the blocks `mine` (their groups' rows, S per block) and the corpus's prune
/// threshold: from --plan, or computed by this worker alone (`p`: every row) or with its peers.
datamask::corpus_plan plan_corpus(const config& c, const corpus& k, std::span<const index_t> mine,
                                  const std::optional<run_plan>& given, const dmfront::planning& p,
                                  datamask::io::run_report& rep) {
  const auto t_prune = clock_type::now();
  datamask::corpus_plan plan = k.plan(c.run, c.block_size, datamask::groups_of_blocks(k.layout(c.block_size), mine));
  plan.prune_threshold = given ? given->prune_threshold : dmfront::prune_threshold(k, c.run.prune, p);
  rep.selected = plan.total;
  if (plan.prune_threshold) rep.prune_threshold = *plan.prune_threshold;
  rep.seconds.emplace_back("prune", seconds_since(t_prune));
  return plan;
}

/// auto's optimizer of each block (datamask::auto_block_optimizer: by cost), its refusals checked
/// before anything is written.
std::vector<std::optional<datamask::block_optimizer>> block_optimizers(const config& c,
                                                                       const datamask::block_run_settings& settings,
                                                                       const datamask::corpus_plan& plan, index_t dims) {
  auto optimizers = dmfront::block_optimizers(settings, plan, dims);
  try {
    dmfront::refuse_unread_on_blocks(request_of(c), plan, optimizers, program_spelling());
  } catch (const datamask::invalid_input& e) {
    throw usage_error(e.what());
  }
  return optimizers;
}

/// What the progress counts, as its lines say it.
std::string progress_unit(const dmfront::progress_plan& planned) {
  return planned.unit().empty() ? "iterations and picks" : std::string(planned.unit()) + "s";
}

/// The optimizer of the run as the program says it, with why when auto chose it.
std::string optimizer_line(const config& c, const datamask::block_run_settings& settings,
                           const dmfront::progress_plan& planned) {
  const std::size_t by_cost = planned.greedy_by_cost, blocks = planned.blocks;
  if (blocks == 0) return "none (every item selected: S = n, nothing to choose)";
  const std::string name = by_cost == blocks && by_cost > 0 ? "greedy" : c.optimizer;
  if (c.requested != "auto") return name;
  if (c.optimizer == "continuous") {
    const std::string greedy_blocks =
        by_cost == 0 ? ""
        : by_cost == blocks
            ? "naive greedy on every block, where it costs no more operations than the learner (see --help); "
            : "naive greedy on " + std::to_string(by_cost) + " of " + std::to_string(blocks) +
                  " blocks, where it costs no more operations than the learner (see --help); ";
    return name + " (auto: every diversity term has a relaxation; " + greedy_blocks +
           "--optimizer pg for the policy gradient)";
  }
  if (c.optimizer == "lazy") {
    return name + " (auto: facility location alone is submodular, and lazy greedy picks naive greedy's set; "
                  "--optimizer stochastic for a faster, weaker one)";
  }
  const datamask::unrelaxed term = datamask::unrelaxed_term(settings, settings.knn());
  if (term.dense_facility && term.count == 1) {
    return name + " (auto: dense facility location has no relaxation; stochastic greedy reaches more than the "
                  "policy gradient in less time; --optimizer lazy or pg to choose)";
  }
  return name + " (auto: " + term.has_none() + ", so stochastic greedy; --optimizer greedy, lazy or pg to choose)";
}

/// The outputs of a run that is not a shard: under MPI, rank 0 gathers every rank's blocks and
/// writes; the others return 0.
int write_outputs(const config& c, const mpi_world& world, const run_header& header, std::vector<block_result> done,
                  datamask::io::run_report& rep, bool checkpointed) {
  if (world.spread()) {
    const auto t_gather = clock_type::now();
    done = gather_blocks(world, header, std::move(done), c.quiet);
    if (world.rank() != 0) return 0;
    rep.seconds.emplace_back("gather", seconds_since(t_gather));
  }
  rep.blocks = std::move(done);
  if (g_signal != 0) throw interrupted{g_signal, checkpointed};
  write_run_outputs(c, rep);
  return written_exit_code(c, "the outputs");
}

/// `datamask-select plan`: the corpus-wide values of a run, computed once and written to --plan
/// for its shards; under mpirun the ranks compute them together (each holding its share of the
/// ids and scores) and rank 0 writes the file. Returns the exit code.
int write_plan_file(const config& c, const mpi_world& world, const corpus& k, const datamask::corpus_plan& plan,
                    const dmfront::planning& p) {
  const auto t0 = clock_type::now();
  datamask::block_run_settings s = request_of(c).settings;
  // Collectives first (under MPI every rank takes part), then rank 0 writes.
  const auto sample = dmfront::calibrate_corpus(k, plan, s, p);
  auto rows_hashes = every_rank_groups(world, k.rows_hashes);
  if (world.rank() != 0) return 0;
  write_plan(c.plan, run_plan{k.fingerprint, c.canonical(), plan.prune_threshold, s.calibration, std::move(rows_hashes)});
  if (!c.quiet) {
    std::fprintf(stderr, "%s plan: %lld items in %lld files, %lld groups, %lld blocks; selecting %lld; prune threshold %s; "
                 "calibration %s (%.2f s); wrote %s\n", c.program.c_str(), static_cast<long long>(k.n),
                 static_cast<long long>(k.files.size()), static_cast<long long>(plan.layout.groups()),
                 static_cast<long long>(plan.layout.blocks()), static_cast<long long>(plan.total),
                 plan.prune_threshold ? std::to_string(*plan.prune_threshold).c_str() : "none",
                 sample.rows.empty() ? "none (each block calibrates itself)"
                                     : ("on " + std::to_string(sample.rows.size()) + " rows").c_str(),
                 seconds_since(t0), c.plan.c_str());
  }
  return written_exit_code(c, c.plan);
}

/// A selection run (not `merge`).
int run(int argc, char** argv, const std::string& program, const dmfront::objective_registry& objectives,
        const mpi_world& world, bool plan_step) {
  config c;
  c.program = program;
  c.registry = objectives;
  c.planning = plan_step;
  if (!parse_args(argc, argv, c)) return 0;
  const worker_share shard = shard_share(c);
  if (world.spread() && !c.shard.empty()) throw usage_error("--shard: not with mpirun (the ranks share the blocks)");
  const worker_share share = world.spread() ? worker_share{world.rank(), world.size()} : shard;
  const bool quiet = c.quiet;
  if (world.rank() != 0) c.quiet = true;  // progress and messages from rank 0
  const int device = use_device(c, world, quiet);
  check_output_paths(c);  // before any work: writable, distinct, none an input
  const auto part = part_paths(c, shard);
  if (!c.shard.empty()) prepare_parts(part);

  datamask::io::run_report rep;
  const corpus k = load(c, world, share, rep);
  const datamask::corpus_layout layout = k.layout(c.block_size);
  const auto nb = layout.blocks();
  const auto mine = datamask::worker_blocks(nb, share.index, share.count);
  // Who computes the corpus-wide values: the ranks together, each from the groups whose first
  // block it runs; or this process alone from every row (it holds them all: corpus.hpp).
  const dmfront::planning planners =
      world.spread() ? dmfront::planning{dmfront::planned_rows(layout, mine),
                                         [&world](const std::vector<std::uint64_t>& v) { return world.allgather(v); }}
                     : dmfront::planning{{0, k.n}, {}};
  std::optional<run_plan> given;
  if (!c.plan.empty() && !c.planning) given = read_plan(c.plan, c, k.fingerprint, k.rows_hashes);
  if (!world.spread() && !given && share.count > 1 && needs_corpus_values(c, layout) && !c.quiet) {
    std::fprintf(stderr, "%s: note: --shard without --plan: this shard read every row's scores and ids for the %s; "
                 "run `datamask-select plan --plan PLAN.json` once with these options and give every shard --plan "
                 "PLAN.json, so that each reads its own rows only\n", c.program.c_str(),
                 c.run.prune > 0.0 ? "prune threshold" : "calibration of f over the corpus");
  }
  const datamask::corpus_plan plan = plan_corpus(c, k, mine, given, planners, rep);
  const index_t total = plan.total;
  const auto& blocks = plan.blocks;
  const std::optional<double> threshold = plan.prune_threshold;
  if (c.planning) return write_plan_file(c, world, k, plan, planners);
  knn_run knn = load_graph_option(c, k.n, blocks.size());  // before anything is written
  datamask::block_run_settings settings = block_settings(c, knn);
  const auto optimizers = block_optimizers(c, settings, plan, k.d);
  const auto t_calibrate = clock_type::now();
  const std::string calibrated = calibrate_corpus(c, k, plan, given, planners, settings);
  rep.seconds.emplace_back("calibrate", seconds_since(t_calibrate));

  run_header header = make_header(c, k.fingerprint, k.group_hashes, k.n, k.d, layout, total, threshold,
                                  settings.calibration);
  const auto block_ids = [&](index_t b) { return k.ids_of(blocks[static_cast<std::size_t>(b)]); };
  if (!c.shard.empty() && shard_finished(part, header, mine, block_ids, k.ids_unsigned, c.quiet)) {
    if (!c.quiet) std::fprintf(stderr, "%s: shard %s is finished (%s); skipped\n", c.program.c_str(), c.shard.c_str(), part.marker.c_str());
    return 0;
  }
  checkpoint_dir ckpt = open_checkpoint(c, k.hash, blocks.size(), world);
  // A rank re-reads the shared manifest before adding its block, so the blocks the other ranks
  // recorded stay in it (one lost to two simultaneous rewrites is only run again on --resume).
  const auto record = [&](const block_result& r) {
    if (!world.spread()) return ckpt.finish_block(r);
    config again = c;
    again.resume = true;
    checkpoint_dir(again, k.hash, blocks.size()).finish_block(r);
  };
  rep.resumed = c.resume;
  // Progress counts what the blocks still to run repeat.
  std::vector<index_t> to_run;
  std::copy_if(mine.begin(), mine.end(), std::back_inserter(to_run),
               [&](index_t b) { return !ckpt.done(static_cast<std::size_t>(b)); });
  const dmfront::progress_plan planned = dmfront::plan_progress(settings, plan, optimizers, to_run);
  progress prog(c.quiet, planned.total(), progress_unit(planned));
  if (!c.quiet) {
    std::fprintf(stderr, "%s %s: %lld items x %lld dims in %zu block%s; selecting %lld%s\n", c.program.c_str(),
                 datamask::version_string, static_cast<long long>(k.n), static_cast<long long>(k.d), blocks.size(),
                 blocks.size() == 1 ? "" : "s", static_cast<long long>(total), c.resume ? " (resuming)" : "");
    if (!k.quality_names.empty()) {  // which columns --quality read (a CSV's names)
      std::fprintf(stderr, "quality columns: %s\n", joined(k.quality_names).c_str());
    }
    if (share.count > 1) {
      std::fprintf(stderr, "%s %lld of %lld: %zu of the %lld blocks\n", world.spread() ? "rank" : "shard",
                   static_cast<long long>(share.index), static_cast<long long>(share.count), mine.size(),
                   static_cast<long long>(nb));
    }
    if (device >= 0 && !world.spread()) std::fprintf(stderr, "backend: %s, device %d\n", dmfront::block_backend_name().c_str(), device);
    std::fprintf(stderr, "optimizer: %s\n", optimizer_line(c, settings, planned).c_str());
    if (c.certify && settings.weights.facility > 0.0 && settings.run.lambda < 1.0) {
      std::fprintf(stderr, "%s: note: --certify: facility location's bound reads the block's pairs in each of its "
                   "dual steps whatever the optimizer took: on real data it took %s of the optimising time, %s "
                   "(benchmarks/RESULTS.md, \"The certificate's cost on real data\"), the most where the optimizer "
                   "is fastest; fewer --certify-steps cost less and bound less tightly, but not below the pairs' "
                   "first reading\n",
                   c.program.c_str(), settings.knn() ? detail::certify_cost::knn : detail::certify_cost::dense,
                   settings.knn() ? "on a kNN graph" : "dense");
    }
  }
  if (!calibrated.empty() && !c.quiet) std::fprintf(stderr, "%s\n", calibrated.c_str());
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  run_context ctx{c, settings, k, ckpt, prog, blocks.size(), knn};
  std::vector<block_result> done = run_blocks(ctx, plan, mine, record);
  // A signal after the last block, before anything is written: no output, as during the blocks.
  if (g_signal != 0) throw interrupted{g_signal, ckpt.active()};
  if (!c.shard.empty()) {
    write_part(part, header, done, k.ids_unsigned);
    if (!c.quiet) std::fprintf(stderr, "wrote %s and %s\n", part.part.c_str(), part.marker.c_str());
    return written_exit_code(c, "the part " + part.part);
  }
  return write_outputs(c, world, header, std::move(done), rep, ckpt.active());
}

/// run() with its errors said and turned into exit codes. Under MPI every message names the rank.
int run_and_report(int argc, char** argv, const dmfront::objective_registry& objectives, const mpi_world& world) {
  // A user's own program (dmfront::select_main) says its own name.
  const std::string program =
      argc > 0 && argv[0][0] != '\0' ? std::filesystem::path(argv[0]).filename().string() : "datamask-select";
  const std::string who = world.spread() ? program + " (rank " + std::to_string(world.rank()) + " of " +
                                               std::to_string(world.size()) + ")"
                                         : program;
  try {
    mpi_world::check_supported();  // first: a merge under mpirun without MPI would run once per copy
    if (argc > 1 && std::string_view(argv[1]) == "merge") {
      if (world.spread()) throw usage_error("merge: run it as one process (every rank would write the outputs)");
      return merge_main(argc - 1, argv + 1);
    }
    if (argc > 1 && std::string_view(argv[1]) == "plan") return run(argc - 1, argv + 1, program, objectives, world, true);
    return run(argc, argv, program, objectives, world, false);
  } catch (const interrupted& i) {
    std::fprintf(stderr, "\n%s: interrupted by signal %d; no output written%s\n", who.c_str(), i.sig,
                 i.saved ? "; the checkpoint is saved: rerun with --resume to continue" : "");
    return 128 + i.sig;
  } catch (const usage_error& e) {
    std::fprintf(stderr, "%s: %s\n", who.c_str(), e.what());
    return 2;
  } catch (const datamask::invalid_input& e) {
    // The library names its settings (prune, count, ...); say them as the options they came from.
    std::fprintf(stderr, "%s: %s\n", who.c_str(), option_message(e).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", who.c_str(), e.what());
    return 1;
  }
}

}  // namespace
}  // namespace dmselect

int dmfront::select_main(int argc, char** argv, const objective_registry& objectives) {
  datamask::passive_wait_unless_set(argv);  // first: no thread of the library exists yet
  const dmselect::mpi_world world(argc, argv);
  // The caller's signal handlers come back on return (the run installs its own).
  const auto caller_int = std::signal(SIGINT, SIG_DFL);
  const auto caller_term = std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, caller_int);
  std::signal(SIGTERM, caller_term);
  const int code = dmselect::run_and_report(argc, argv, objectives, world);
  std::signal(SIGINT, caller_int);
  std::signal(SIGTERM, caller_term);
  // A failing rank ends the whole job (the others may wait for it); rank 0 then writes nothing.
  if (code != 0 && world.spread()) {
    std::fflush(stderr);
    world.abort(code);
  }
  return code;
}
