// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: the files written from the per-block results (ids, CSV log, SVG plot; the
// JSON report's fields are the library's, datamask/run/report.hpp), built in memory and written
// as one atomic set.

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <ostream>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <datamask/datamask.hpp>
#include <datamask/core/input_checks.hpp>
#include <datamask/io/file.hpp>
#include <datamask/io/npy.hpp>
#include <datamask/run/report.hpp>
#include <datamask/run/pipeline.hpp>

#include "args.hpp"
#include <datamask/frontend/block_backend.hpp>
#include <datamask/frontend/corpus.hpp>

namespace dmselect {

using datamask::block_result;

/// The selected ids in output order, piece by piece: `each(piece)` calls `piece` with every run
/// of ids in turn (a block's, or a part of one), so that --out is written without holding them
/// all (merge streams the parts' ids files so).
using ids_pieces = std::function<void(const std::function<void(std::span<const datamask::id_t>)>& piece)>;

/// Writes the --out file of `count` ids on `out`: .npy (int64; uint64 for unsigned ids, read from
/// uint64: the same 8 bytes either way), or one decimal id a line (.csv under an "id" header).
/// @throws std::logic_error when `each` gives another number of ids than `count`
inline void write_ids(std::ostream& out, const std::string& path, index_t count, bool ids_unsigned, const ids_pieces& each) {
  index_t written = 0;
  if (path.ends_with(".npy")) {
    const std::int64_t shape[1] = {static_cast<std::int64_t>(count)};
    out << datamask::io::npy_bytes(ids_unsigned ? datamask::io::npy_dtype::uint64 : datamask::io::npy_dtype::int64,
                                   std::span<const std::int64_t>(shape), {});
    each([&](std::span<const datamask::id_t> ids) {
      out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size_bytes()));
      written += static_cast<index_t>(ids.size());
    });
  } else {
    if (path.ends_with(".csv")) out << "id\n";
    each([&](std::span<const datamask::id_t> ids) {
      for (const auto id : ids) out << datamask::id_text(id, ids_unsigned) << '\n';
      written += static_cast<index_t>(ids.size());
    });
  }
  if (written != count) {
    throw std::logic_error("wrote " + std::to_string(written) + " ids, expected " + std::to_string(count));
  }
}

/// The pieces of ids the blocks hold, in block order.
inline ids_pieces ids_of_blocks(const std::vector<block_result>& blocks) {
  return [&blocks](const auto& piece) {
    for (const auto& b : blocks) piece(std::span<const datamask::id_t>(b.ids));
  };
}

/// The report's "configuration": every option that determines the selection (the canonical
/// configuration, typed) less the policy-gradient learner's settings where another optimizer
/// ran, the backend that ran the blocks, the inputs, the threads used and the outputs (paths as
/// datamask::io::json_text gives them). The canonical configuration itself stays as it was (the
/// pg settings in, the backend out): checkpoints and parts hash it, and resumes and merges
/// compare it.
inline nlohmann::ordered_json configuration_json(const config& c) {
  using datamask::io::json_text;
  const auto texts = [](const std::vector<std::string>& paths) {
    auto a = nlohmann::ordered_json::array();
    for (const auto& p : paths) a.push_back(json_text(p));
    return a;
  };
  nlohmann::ordered_json j;
  j["embeddings"] = texts(c.embeddings);
  auto files = nlohmann::ordered_json::array();  // what the folders among them held, in the order read
  for (const auto& f : c.shard_files) files.push_back({{"file", json_text(f.path)}, {"rows", f.rows}, {"bytes", f.bytes}});
  j["embedding-files"] = files;
  j["quality"] = texts(c.quality);
  j["quality-columns"] = texts(c.quality_columns);  // each score column read, as "file" or "file (column)"
  j["ids"] = c.ids.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(json_text(c.ids));
  j["ids-dtype"] = c.ids_unsigned ? "uint64" : "int64";  // as --out writes them
  j.update(c.selection_json());  // the settings of the optimizer that ran
  j["backend"] = dmfront::block_backend_name();
  j["optimizer-requested"] = c.requested;  // "auto", or the optimizer named
  j["threads"] = c.run.threads;
  j["out"] = json_text(c.out);
  j["checkpoint"] = json_text(c.checkpoint);
  return j;
}

/// The per-step log. `relaxed`: the continuous learner's, one row per iteration with its step
/// size and the relaxed f before the step (no rollouts, so no reward max and no term means).
inline std::string log_csv(const std::vector<block_result>& blocks, bool relaxed = false) {
  std::ostringstream os;
  os.precision(10);
  if (relaxed) {
    os << "block,iteration,step_size,relaxed_f\n";
    for (const auto& b : blocks) {
      for (const auto& h : b.history) os << b.block << "," << h.step << "," << h.lr << "," << h.reward_mean << "\n";
    }
    return os.str();
  }
  os << "block,step,lr,reward_mean,reward_max";
  const block_result* named = nullptr;
  for (const auto& b : blocks) {
    if (!b.terms.empty()) {
      named = &b;
      break;
    }
  }
  if (named) {
    for (const auto& t : named->terms) os << "," << t.name;
  }
  os << "\n";
  for (const auto& b : blocks) {
    for (const auto& h : b.history) {
      os << b.block << "," << h.step << "," << h.lr << "," << h.reward_mean << "," << h.reward_max;
      for (double v : h.term_means) os << "," << v;
      os << "\n";
    }
  }
  return os.str();
}

/// The curves of the plot: panel 0 the reward (series 0 its mean, series 1 its max) or the
/// relaxed f, then one panel per term; each value the mean over the blocks that have its step.
struct plot_curves {
  std::vector<std::string> names = {"reward"};
  index_t steps = 0;
  std::vector<std::array<std::vector<double>, 2>> sum;  // [panel][series][step - 1], over blocks
  std::vector<double> count;                            // blocks with each step

  plot_curves(const std::vector<block_result>& blocks, bool relaxed) {
    for (const auto& b : blocks) {
      for (const auto& h : b.history) steps = std::max(steps, h.step);
      if (!relaxed && names.size() == 1) {
        for (const auto& t : b.terms) names.push_back(t.name);
      }
    }
    const std::vector<double> zero(static_cast<std::size_t>(steps), 0.0);
    sum.assign(names.size(), {zero, zero});
    count = zero;
    for (const auto& b : blocks) {
      for (const auto& h : b.history) {
        const auto s = static_cast<std::size_t>(h.step - 1);
        count[s] += 1.0;
        sum[0][0][s] += h.reward_mean;
        sum[0][1][s] += h.reward_max;
        for (std::size_t t = 0; t < h.term_means.size() && t + 1 < names.size(); ++t) sum[t + 1][0][s] += h.term_means[t];
      }
    }
  }
  /// The mean at step s + 1 (NaN where no block has it).
  [[nodiscard]] double at(std::size_t panel, int series, std::size_t s) const {
    return count[s] > 0 ? sum[panel][static_cast<std::size_t>(series)][s] / count[s]
                        : std::numeric_limits<double>::quiet_NaN();
  }
};

/// One panel's frame in the SVG (pixels).
struct plot_frame {
  static constexpr double width = 760, height = 170, left = 70, top = 40;
  double y0 = 0.0, lo = 0.0, hi = 1.0;  // the panel's top and value range
  /// A curve as a polyline: at most ~1500 points, consecutive steps averaged into one.
  void polyline(std::ostream& os, const plot_curves& c, std::size_t panel, int series, const char* colour) const {
    os << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.2\" points=\"";
    const std::size_t steps = c.count.size(), stride = std::max<std::size_t>(1, steps / 1500);
    for (std::size_t s0 = 0; s0 < steps; s0 += stride) {
      double acc = 0, m = 0;
      for (std::size_t s = s0; s < std::min(steps, s0 + stride); ++s) {
        if (const double v = c.at(panel, series, s); std::isfinite(v)) {
          acc += v;
          m += 1;
        }
      }
      if (m == 0) continue;
      const double x = left + (steps > 1 ? width * static_cast<double>(s0) / static_cast<double>(steps - 1) : 0.0);
      os << x << "," << y0 + height - height * (acc / m - lo) / (hi - lo) << " ";
    }
    os << "\"/>\n";
  }
};

/// An SVG of the log: the reward (mean and max) in the first panel, then one panel per term,
/// each averaged over the blocks at every step.
/// `relaxed`: the continuous learner's log, one panel (the relaxed f per iteration).
inline std::string plot_svg(const std::vector<block_result>& blocks, bool relaxed = false) {
  const plot_curves c(blocks, relaxed);
  const std::size_t panels = c.names.size();
  plot_frame f;
  std::ostringstream os;
  os.precision(6);
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << f.width + 100 << "\" height=\""
     << f.top + panels * (f.height + 50) << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << f.left << "\" y=\"22\" font-size=\"15\">datamask-select: "
     << (relaxed ? "relaxed f per iteration (continuous learner)" : "per-step rollout statistics")
     << (blocks.size() > 1 ? " (mean over blocks)" : "") << "</text>\n";
  for (std::size_t p = 0; p < panels; ++p) {
    f.y0 = f.top + p * (f.height + 50) + 20;
    f.lo = std::numeric_limits<double>::infinity();
    f.hi = -f.lo;
    const int series = p == 0 && !relaxed ? 2 : 1;
    for (int k = 0; k < series; ++k) {
      for (std::size_t s = 0; s < c.count.size(); ++s) {
        if (const double v = c.at(p, k, s); std::isfinite(v)) {
          f.lo = std::min(f.lo, v);
          f.hi = std::max(f.hi, v);
        }
      }
    }
    if (!(f.hi >= f.lo)) f.lo = 0, f.hi = 1;
    if (f.hi == f.lo) f.hi = f.lo + 1;
    os << "<text x=\"" << f.left << "\" y=\"" << f.y0 - 6 << "\" font-weight=\"bold\">"
       << (p == 0 ? (relaxed ? "relaxed f, before each iteration's step" : "reward (blue: mean, orange: max)")
                  : c.names[p] + " (raw, mean over rollouts)")
       << "</text>\n"
       << "<rect x=\"" << f.left << "\" y=\"" << f.y0 << "\" width=\"" << f.width << "\" height=\"" << f.height
       << "\" fill=\"none\" stroke=\"#888\"/>\n"
       << "<text x=\"" << f.left - 6 << "\" y=\"" << f.y0 + 10 << "\" text-anchor=\"end\">" << f.hi << "</text>\n"
       << "<text x=\"" << f.left - 6 << "\" y=\"" << f.y0 + f.height << "\" text-anchor=\"end\">" << f.lo << "</text>\n"
       << "<text x=\"" << f.left << "\" y=\"" << f.y0 + f.height + 15 << "\">1</text>\n"
       << "<text x=\"" << f.left + f.width << "\" y=\"" << f.y0 + f.height + 15 << "\" text-anchor=\"end\">"
       << (relaxed ? "iteration " : "step ") << c.steps << "</text>\n";
    const char* colour[2] = {"#1f77b4", "#ff7f0e"};
    for (int k = series - 1; k >= 0; --k) f.polyline(os, c, p, k, colour[k]);
  }
  os << "</svg>\n";
  return os.str();
}

/// A certificate in words (the progress and summary lines): the certified share, the bound and
/// gap, the method and its seconds; or "no certificate" and why.
inline std::string certificate_text(const datamask::block_certificate& c) {
  char buf[320];
  if (!c.certified()) {
    std::snprintf(buf, sizeof buf, "no certificate (%s; %.2f s)", c.reason.c_str(), c.seconds);
  } else {
    std::snprintf(buf, sizeof buf, "certified share %.4f%% of the best possible gain over random (optimum <= %.8g, gap %.3g; %s, %.2f s)",
                  100.0 * c.certified_share, c.bound, c.gap, c.method.c_str(), c.seconds);
  }
  return buf;
}

/// Writes the outputs (the ids from `ids`, in output order), then prints the summary on stdout.
inline void write_outputs(const config& c, datamask::io::run_report& rep, const dmfront::run_totals& t,
                          const ids_pieces& ids) {
  // Written as a set (the ids streamed, the rest built in memory): a failure on one leaves none replaced.
  const auto t_write = std::chrono::steady_clock::now();
  std::vector<datamask::io::output_file> files;
  if (!c.out.empty()) {
    files.push_back({c.out, {}, [&](std::ostream& out) { write_ids(out, c.out, rep.selected, c.ids_unsigned, ids); }});
  }
  const bool relaxed = c.optimizer == "continuous";  // one row per iteration: the relaxed f
  if (!c.log.empty()) files.push_back({c.log, log_csv(rep.blocks, relaxed), {}});
  if (!c.plot.empty()) files.push_back({c.plot, plot_svg(rep.blocks, relaxed), {}});
  rep.seconds.emplace_back("write", std::chrono::duration<double>(std::chrono::steady_clock::now() - t_write).count());
  if (!c.report.empty()) files.push_back({c.report, datamask::io::report_json(rep).dump(2) + "\n", {}});
  datamask::io::write_files_atomic(std::span<const datamask::io::output_file>(files));

  std::printf("selected %lld of %lld items (%zu block%s, %.2f s optimising, optimizer %s)\n",
              static_cast<long long>(rep.selected), static_cast<long long>(rep.rows), rep.blocks.size(),
              rep.blocks.size() == 1 ? "" : "s", t.optimize_seconds, t.optimizers.c_str());
  std::printf("objective %.6g =", t.objective);
  for (std::size_t i = 0; i < t.terms.size(); ++i) {
    std::printf("%s %.3g * %s %.6g / %.3g", i ? " +" : "", t.terms[i].weight, t.terms[i].name.c_str(), t.terms[i].raw,
                t.terms[i].scale);
  }
  std::printf("\n");
  if (t.certificate) std::printf("%s\n", certificate_text(*t.certificate).c_str());
  for (const std::string* out : {&c.out, &c.report, &c.log, &c.plot}) {
    if (!out->empty()) std::printf("wrote %s\n", out->c_str());
  }
}

/// The report's record of the blocks' graphs (none: null): K (the largest; a block smaller than
/// --neighbors caps it), how they were made, the seconds building or loading them took in all and
/// the largest one's bytes. From the blocks' own records, so one process, the ranks of a job and
/// merged shards report the same.
inline nlohmann::ordered_json graph_json(const std::vector<block_result>& blocks, double& seconds) {
  nlohmann::ordered_json j(nullptr);
  seconds = 0.0;
  for (const auto& r : blocks) {
    const datamask::block_graph& g = r.graph;
    if (g.neighbors == 0) continue;
    if (j.is_null()) {
      j = {{"neighbors", g.neighbors}, {"source", datamask::io::json_text(g.source)}, {"seconds", 0.0},
           {"bytes", g.bytes}};
    }
    j["neighbors"] = std::max(j["neighbors"].get<index_t>(), g.neighbors);
    j["bytes"] = std::max(j["bytes"].get<std::size_t>(), g.bytes);
    seconds += g.seconds;
  }
  if (!j.is_null()) j["seconds"] = seconds;
  return j;
}

/// Warns (stderr) of each term that calibration found constant on some block
/// (datamask::constant_term_tolerance): its scale is 1, and it does not tell subsets apart.
inline void warn_constant_terms(const std::string& program, const std::vector<block_result>& blocks) {
  std::vector<std::pair<std::string, std::size_t>> constant;  // term, blocks
  for (const auto& r : blocks) {
    for (const auto& t : r.terms) {
      if (!t.constant || r.selected == 0 || r.selected == r.items) continue;  // all selected: no choice to weigh in
      auto it = std::find_if(constant.begin(), constant.end(), [&](const auto& c) { return c.first == t.name; });
      if (it == constant.end()) it = constant.insert(constant.end(), {t.name, 0});
      ++it->second;
    }
  }
  for (const auto& [name, count] : constant) {
    std::fprintf(stderr,
                 "%s: warning: the %s term is constant on the calibration subsets of %zu of %zu "
                 "block%s (its std is 0 or rounding noise); its scale is 1, so it weighs nothing in the choice\n",
                 program.c_str(), name.c_str(), count, blocks.size(), blocks.size() == 1 ? "" : "s");
  }
}

/// The outputs of a run from every block's result (rep.blocks, in block order), whichever
/// process computed each block: the ids block by block, each in its selection order (`ids`: from
/// elsewhere than the blocks, which then hold none: a merge's parts' ids files), and every total
/// summed over the blocks in block order, as one process sums them.
inline void write_run_outputs(const config& c, datamask::io::run_report& rep, const ids_pieces& ids = {}) {
  const dmfront::run_totals t = dmfront::totals_of(rep.blocks, rep.selected, c.optimizer, !ids);
  double graph = 0.0;
  if (auto g = graph_json(rep.blocks, graph); !g.is_null()) {
    rep.configuration["graph-built"] = std::move(g);
    rep.seconds.emplace_back("graph", graph);
  }
  rep.seconds.emplace_back("optimize", t.optimize_seconds);
  rep.seconds.emplace_back("evaluate", t.evaluate_seconds);
  if (t.certificate) rep.seconds.emplace_back("certify", t.certificate->seconds);
  if (!c.quiet) warn_constant_terms(c.program, rep.blocks);
  write_outputs(c, rep, t, ids ? ids : ids_of_blocks(rep.blocks));
}

}  // namespace dmselect
