// SPDX-License-Identifier: Apache-2.0
#pragma once

// datamask-select: per-block results and the files written from them (ids, JSON report, CSV
// log, SVG plot), each built in memory and written atomically.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <datamask/datamask.hpp>
#include <datamask/io/file.hpp>
#include <datamask/io/npy.hpp>

#include "args.hpp"

namespace dmselect {

struct history_row {
  index_t step = 0;
  double lr = 0.0, reward_mean = 0.0, reward_max = 0.0;
  std::vector<double> terms;
};

struct block_result {
  index_t block = 0;
  index_t items = 0;
  index_t selected = 0;
  index_t kept = 0;
  index_t steps_run = 0;
  index_t zero_variance_steps = 0;
  index_t nonfinite_steps = 0;
  std::vector<datamask::id_t> ids;  // selection order
  std::vector<datamask::term_value> terms;
  double objective = 0.0;
  double optimize_seconds = 0.0;
  double evaluate_seconds = 0.0;
  bool from_checkpoint = false;  // finished in an earlier run
  std::vector<history_row> history;
};

/// A double as JSON (non-finite values become null).
inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
inline std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      o += '\\';
      o += ch;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      o += buf;
    } else {
      o += ch;
    }
  }
  return o + "\"";
}

inline std::string ids_file_bytes(const std::string& path, const std::vector<datamask::id_t>& ids) {
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0) {
    std::vector<std::int64_t> v(ids.begin(), ids.end());
    const std::int64_t shape[1] = {static_cast<std::int64_t>(v.size())};
    return datamask::io::npy_bytes(std::span<const std::int64_t>(v), std::span<const std::int64_t>(shape));
  }
  std::string out;
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0) out = "id\n";
  for (auto id : ids) out += std::to_string(static_cast<std::int64_t>(id)) + "\n";
  return out;
}

/// The terms of a block or of the whole run, as a JSON object (indented by `ind`).
inline std::string json_objective(const std::vector<datamask::term_value>& terms, double total,
                                  const std::string& ind) {
  std::ostringstream os;
  os << "{\n" << ind << "  \"total\": " << json_number(total) << ",\n" << ind << "  \"terms\": {";
  for (std::size_t t = 0; t < terms.size(); ++t) {
    os << (t ? "," : "") << "\n"
       << ind << "    " << json_string(terms[t].name) << ": {\"raw\": " << json_number(terms[t].raw)
       << ", \"scale\": " << json_number(terms[t].scale) << ", \"weight\": " << json_number(terms[t].weight)
       << "}";
  }
  os << "\n" << ind << "  }\n" << ind << "}";
  return os.str();
}

/// The totals over blocks: raw is the selection-weighted mean of the block values, scale the
/// effective divisor (raw over the selection-weighted mean of raw / scale), so that total is
/// still the weighted sum of raw / scale. With one block both equal the block's.
inline std::vector<datamask::term_value> total_terms(const std::vector<block_result>& blocks, double& total) {
  std::vector<datamask::term_value> out;
  std::size_t with_selection = 0;
  for (const auto& b : blocks) {
    if (b.selected > 0) {
      ++with_selection;
      out = b.terms;
      total = b.objective;
    }
  }
  if (with_selection == 1) return out;  // exactly the block's values
  out.clear();
  index_t s = 0;
  for (const auto& b : blocks) {
    if (b.selected > 0 && out.empty()) out = b.terms;
    s += b.selected;
  }
  total = 0.0;
  for (std::size_t t = 0; t < out.size(); ++t) {
    double raw = 0.0, scaled = 0.0, scale_mean = 0.0;
    for (const auto& b : blocks) {
      if (b.selected == 0) continue;
      const double w = static_cast<double>(b.selected) / static_cast<double>(s);
      raw += w * b.terms[t].raw;
      scaled += w * b.terms[t].raw / b.terms[t].scale;
      scale_mean += w * b.terms[t].scale;
    }
    out[t].raw = raw;
    out[t].scale = (raw != 0.0 && scaled != 0.0) ? raw / scaled : scale_mean;
    total += out[t].weight * scaled;
  }
  return out;
}

struct run_summary {
  std::uint64_t input_hash = 0;
  index_t n = 0, d = 0, selected = 0;
  double prune_threshold = -std::numeric_limits<double>::infinity();
  std::vector<std::pair<std::string, double>> phases;  // name, seconds
  bool resumed = false;
};

inline std::string report_json(const config& c, const run_summary& r, const std::vector<block_result>& blocks) {
  std::ostringstream os;
  char hash[24];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(r.input_hash));
  os << "{\n  \"program\": \"datamask-select\",\n  \"version\": " << json_string(datamask::version_string)
     << ",\n  \"configuration\": {";
  // The canonical configuration, one key per option, plus the inputs and outputs.
  std::istringstream lines(c.canonical());
  std::string line;
  bool first = true;
  auto field = [&](const std::string& k, const std::string& v) {
    os << (first ? "" : ",") << "\n    " << json_string(k) << ": " << v;
    first = false;
  };
  auto strings = [&](const std::vector<std::string>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + json_string(v[i]);
    return s + "]";
  };
  field("embeddings", strings(c.embeddings));
  field("quality", strings(c.quality));
  field("ids", c.ids.empty() ? "null" : json_string(c.ids));
  while (std::getline(lines, line)) {
    const auto eq = line.find('=');
    const std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    char* end = nullptr;
    const double num = std::strtod(v.c_str(), &end);
    const bool numeric = !v.empty() && end == v.c_str() + v.size() && std::isfinite(num);
    if (k == "objective" || k == "objective-weights" || k == "quality-weights" || k == "scales") {
      // Lists: JSON arrays.
      std::string arr = "[";
      std::size_t start = 0;
      while (!v.empty()) {
        const auto comma = v.find(',', start);
        const std::string item = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        arr += (start ? ", " : "") + (k == "objective" ? json_string(item) : item);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      field(k, arr + "]");
    } else if (v == "true" || v == "false") {
      field(k, v);
    } else {
      field(k, numeric ? v : json_string(v));
    }
  }
  field("threads", std::to_string(c.threads));
  field("out", json_string(c.out));
  field("checkpoint", json_string(c.checkpoint));
  os << "\n  },\n  \"input\": {\"rows\": " << r.n << ", \"dims\": " << r.d << ", \"hash\": \"" << hash
     << "\"},\n  \"resumed\": " << (r.resumed ? "true" : "false")
     << ",\n  \"prune_threshold\": " << json_number(r.prune_threshold) << ",\n  \"blocks\": [";
  double total = 0.0;
  index_t steps = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const auto& b = blocks[i];
    steps += b.steps_run;
    os << (i ? "," : "") << "\n    {\n      \"block\": " << b.block << ",\n      \"items\": " << b.items
       << ",\n      \"kept\": " << b.kept << ",\n      \"selected\": " << b.selected
       << ",\n      \"steps_run\": " << b.steps_run << ",\n      \"zero_variance_steps\": " << b.zero_variance_steps
       << ",\n      \"nonfinite_steps\": " << b.nonfinite_steps
       << ",\n      \"from_checkpoint\": " << (b.from_checkpoint ? "true" : "false")
       << ",\n      \"seconds\": {\"optimize\": " << json_number(b.optimize_seconds)
       << ", \"evaluate\": " << json_number(b.evaluate_seconds) << "},\n      \"objective\": "
       << json_objective(b.terms, b.objective, "      ") << "\n    }";
  }
  const auto tt = total_terms(blocks, total);
  os << "\n  ],\n  \"total\": {\n    \"blocks\": " << blocks.size() << ",\n    \"selected\": " << r.selected
     << ",\n    \"steps_run\": " << steps << ",\n    \"objective\": " << json_objective(tt, total, "    ")
     << ",\n    \"seconds\": {";
  for (std::size_t i = 0; i < r.phases.size(); ++i) {
    os << (i ? ", " : "") << json_string(r.phases[i].first) << ": " << json_number(r.phases[i].second);
  }
  os << "}\n  }\n}\n";
  return os.str();
}

inline std::string log_csv(const std::vector<block_result>& blocks) {
  std::ostringstream os;
  os.precision(10);
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
      for (double v : h.terms) os << "," << v;
      os << "\n";
    }
  }
  return os.str();
}

/// An SVG of the log: the reward (mean and max) in the first panel, then one panel per term,
/// each averaged over the blocks at every step.
inline std::string plot_svg(const std::vector<block_result>& blocks) {
  index_t steps = 0;
  std::vector<std::string> names = {"reward"};
  for (const auto& b : blocks) {
    for (const auto& h : b.history) steps = std::max(steps, h.step);
    if (names.size() == 1 && !b.terms.empty()) {
      for (const auto& t : b.terms) names.push_back(t.name);
    }
  }
  const std::size_t panels = names.size();
  // series[p][0/1][step-1]: mean over blocks (for p = 0, series 1 is the max reward).
  std::vector<std::vector<std::vector<double>>> sum(panels, std::vector<std::vector<double>>(2, std::vector<double>(static_cast<std::size_t>(steps), 0.0)));
  std::vector<double> cnt(static_cast<std::size_t>(steps), 0.0);
  for (const auto& b : blocks) {
    for (const auto& h : b.history) {
      const auto s = static_cast<std::size_t>(h.step - 1);
      cnt[s] += 1.0;
      sum[0][0][s] += h.reward_mean;
      sum[0][1][s] += h.reward_max;
      for (std::size_t t = 0; t < h.terms.size() && t + 1 < panels; ++t) sum[t + 1][0][s] += h.terms[t];
    }
  }
  const double w = 760, ph = 170, left = 70, top = 40;
  std::ostringstream os;
  os.precision(6);
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w + 100 << "\" height=\""
     << top + panels * (ph + 50) << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << left << "\" y=\"22\" font-size=\"15\">datamask-select: per-step rollout statistics"
     << (blocks.size() > 1 ? " (mean over blocks)" : "") << "</text>\n";
  for (std::size_t p = 0; p < panels; ++p) {
    const double y0 = top + p * (ph + 50) + 20;
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    const int nser = p == 0 ? 2 : 1;
    for (int sidx = 0; sidx < nser; ++sidx) {
      for (std::size_t s = 0; s < cnt.size(); ++s) {
        if (cnt[s] == 0) continue;
        const double v = sum[p][sidx][s] / cnt[s];
        if (std::isfinite(v)) {
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
      }
    }
    if (!(hi >= lo)) lo = 0, hi = 1;
    if (hi == lo) hi = lo + 1;
    os << "<text x=\"" << left << "\" y=\"" << y0 - 6 << "\" font-weight=\"bold\">"
       << (p == 0 ? "reward (blue: mean, orange: max)" : names[p] + " (raw, mean over rollouts)") << "</text>\n"
       << "<rect x=\"" << left << "\" y=\"" << y0 << "\" width=\"" << w << "\" height=\"" << ph
       << "\" fill=\"none\" stroke=\"#888\"/>\n"
       << "<text x=\"" << left - 6 << "\" y=\"" << y0 + 10 << "\" text-anchor=\"end\">" << hi << "</text>\n"
       << "<text x=\"" << left - 6 << "\" y=\"" << y0 + ph << "\" text-anchor=\"end\">" << lo << "</text>\n"
       << "<text x=\"" << left << "\" y=\"" << y0 + ph + 15 << "\">1</text>\n"
       << "<text x=\"" << left + w << "\" y=\"" << y0 + ph + 15 << "\" text-anchor=\"end\">step " << steps << "</text>\n";
    const char* colour[2] = {"#1f77b4", "#ff7f0e"};
    for (int sidx = nser - 1; sidx >= 0; --sidx) {
      os << "<polyline fill=\"none\" stroke=\"" << colour[sidx] << "\" stroke-width=\"1.2\" points=\"";
      // At most ~1500 points: average consecutive steps into buckets.
      const std::size_t stride = std::max<std::size_t>(1, cnt.size() / 1500);
      for (std::size_t s0 = 0; s0 < cnt.size(); s0 += stride) {
        double acc = 0, m = 0;
        for (std::size_t s = s0; s < std::min(cnt.size(), s0 + stride); ++s) {
          if (cnt[s] > 0 && std::isfinite(sum[p][sidx][s])) {
            acc += sum[p][sidx][s] / cnt[s];
            m += 1;
          }
        }
        if (m == 0) continue;
        const double x = left + (steps > 1 ? w * static_cast<double>(s0) / static_cast<double>(steps - 1) : 0.0);
        const double y = y0 + ph - ph * (acc / m - lo) / (hi - lo);
        os << x << "," << y << " ";
      }
      os << "\"/>\n";
    }
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace dmselect
