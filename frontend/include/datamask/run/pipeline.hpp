// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The corpus-level pipeline: what turns one corpus (possibly larger than a block) into
/// one exact selection, on the rules of plan.hpp: each block's problem, its selection by a greedy
/// baseline or its evaluation, and the totals over blocks.
///
/// These rules live in the library, not in a program, because every front end must apply them
/// identically: datamask-select, the Python package, and a scale-out run whose shards or ranks
/// each see only some blocks yet must produce the selection of one process, bit for bit.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "datamask/objectives/certify.hpp"
#include "datamask/learners/greedy/greedy.hpp"
#include "datamask/objectives/function.hpp"
#include "datamask/core/options.hpp"
#include "datamask/run/plan.hpp"
#include "datamask/learners/pg/select.hpp"

namespace datamask {

/// @brief One block's inputs gathered into memory it owns: its rows of the embeddings in T
/// (float32, or float16/bfloat16 as stored), or a view of the whole mapped corpus, its quality
/// scores and its ids. `view()` views them.
template <class T>
struct basic_block_data {
  std::vector<T> buffer;                      ///< the block's rows, when they had to be copied
  matrix_view<const T> embeddings;            ///< buffer, or a zero-copy view of the corpus
  std::vector<std::vector<double>> quality;   ///< the block's scores, one vector per column
  std::vector<double> quality_weights;        ///< one weight per column
  std::vector<id_t> ids;                      ///< the block's ids, in row order

  /// @brief The block as the learner's input (views into this object: keep it alive).
  [[nodiscard]] problem<T> view() const {
    problem<T> p;
    p.embeddings = embeddings;
    for (std::size_t a = 0; a < quality.size(); ++a) {
      p.quality.push_back(quality_column{std::span<const double>(quality[a]), quality_weights[a]});
    }
    p.ids = ids;
    return p;
  }
};

/// @brief A block of float32 rows.
using block_data = basic_block_data<float>;

/// @brief Gathers one block of a corpus.
/// @param rows the block's rows of the corpus, in order
/// @param d the embedding dimension
/// @param whole a view of the whole corpus in T when one exists and the block is the whole
///        corpus (no copy then); empty otherwise
/// @param gather callable `void(std::span<const index_t> rows, T* out)`: copies the rows
/// @param columns the corpus's quality columns, holding the rows from `first_row` on;
/// @param weights their weights
/// @param id_of callable `id_t(index_t row)`
template <class T, class Gather, class IdOf>
[[nodiscard]] basic_block_data<T> gather_block(std::span<const index_t> rows, index_t d, matrix_view<const T> whole,
                                               Gather&& gather, std::span<const std::vector<double>> columns,
                                               std::span<const double> weights, IdOf&& id_of, index_t first_row = 0) {
  basic_block_data<T> b;
  const auto n = static_cast<index_t>(rows.size());
  if (!whole.empty() && whole.rows == n) {
    b.embeddings = whole;
  } else {
    b.buffer.resize(rows.size() * static_cast<std::size_t>(d));
    gather(rows, b.buffer.data());
    b.embeddings = make_matrix_view(static_cast<const T*>(b.buffer.data()), n, d);
  }
  b.quality.resize(columns.size());
  for (std::size_t a = 0; a < columns.size(); ++a) {
    b.quality[a].resize(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) b.quality[a][i] = columns[a][static_cast<std::size_t>(rows[i] - first_row)];
  }
  b.quality_weights.assign(weights.begin(), weights.end());
  b.ids.resize(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) b.ids[i] = id_of(rows[i]);
  return b;
}

/// @brief The kNN graph a block's facility-location term ran on (sparse facility location):
/// neighbours per item, how it was made, the seconds building it took and its bytes.
/// `neighbors == 0`: the block used no graph.
struct block_graph {
  index_t neighbors = 0;
  std::string source;
  double seconds = 0.0;  ///< building it for this block (0 for a graph given by the caller)
  std::size_t bytes = 0;
  std::optional<double> recall;  ///< an approximate graph's estimated recall@K (`knn_graph::recall`)
};

/// @brief How far a block's selection can be from the best one (`block_run_settings::certify`;
/// `certify` of datamask/objectives/certify.hpp on the f the run optimised, with its scales). The bound is
/// over every set of S_b items of the whole block (rows a prune left out included).
struct block_certificate {
  /// The terms' methods joined by '+' ("top-S", "frank-wolfe", "lagrangian-dual"); "none": no
  /// certificate (a term has no bound: `reason` says which), and bound, gap and share are NaN.
  std::string method = "none";
  std::string reason;
  double bound = std::numeric_limits<double>::quiet_NaN();  ///< >= max f over sets of S_b items
  double gap = std::numeric_limits<double>::quiet_NaN();    ///< bound - objective >= 0
  double random_mean = std::numeric_limits<double>::quiet_NaN();  ///< mean f of random S_b-subsets
  /// (objective - random_mean) / (bound - random_mean) (`certified_share`)
  double certified_share = std::numeric_limits<double>::quiet_NaN();
  double seconds = 0.0;         ///< the bounds, their checks and the random subsets
  double random_seconds = 0.0;  ///< of which the random subsets
  [[nodiscard]] bool certified() const { return method != "none"; }
};

/// @brief Calls `f(name, number)` for each number of a certificate (`block_certificate`, const or
/// not), in the report's order: the one list of them that the report, the block records and the
/// Python result are written and read from.
template <class Certificate, class F>
  requires std::is_same_v<std::remove_const_t<Certificate>, block_certificate>
void for_each_certificate_number(Certificate& c, F&& f) {
  f("bound", c.bound);
  f("gap", c.gap);
  f("certified_share", c.certified_share);
  f("random_mean", c.random_mean);
  f("seconds", c.seconds);
  f("random_seconds", c.random_seconds);
}

/// @brief A block's certificate from `certify`'s report of its selection: the report's value is
/// f of the selection as `evaluate_block` computes it (`objective`: the same f, the rows in
/// another order, so equal up to rounding); the bound is at least `objective`, so gap >= 0.
[[nodiscard]] inline block_certificate block_certificate_of(const certificate_report& c, double objective) {
  block_certificate out;
  out.random_mean = c.random_mean;
  out.seconds = c.seconds + c.random_seconds;
  out.random_seconds = c.random_seconds;
  if (!c.certified) {
    out.reason = c.reason;
    return out;
  }
  out.method.clear();
  for (const auto& t : c.terms) out.method += (out.method.empty() ? "" : "+") + t.method;
  out.bound = std::max(c.bound, objective);
  out.gap = out.bound - objective;
  out.certified_share = certified_share(objective, out.bound, out.random_mean);
  return out;
}

/// @brief What one block's selection produced (the per-block part of a report).
struct block_result {
  index_t block = 0;
  index_t items = 0;
  index_t selected = 0;
  index_t kept = 0;
  std::string optimizer;           ///< the one that ran (`auto` resolved for this block); empty: none ran
  index_t steps_run = 0;
  index_t zero_variance_steps = 0;
  index_t nonfinite_steps = 0;
  std::vector<id_t> ids;           ///< selection order
  std::vector<term_value> terms;   ///< raw on the selection (whole block as V), scale, weight
  double objective = 0.0;          ///< sum of weight * raw / scale
  double optimize_seconds = 0.0;
  double evaluate_seconds = 0.0;
  bool from_checkpoint = false;    ///< finished in an earlier run
  block_graph graph;               ///< the kNN graph of its facility term, if any
  std::vector<step_record> history;
  std::optional<block_certificate> certificate;  ///< with `block_run_settings::certify` only
};

/// @brief The terms over all blocks: raw is the selection-weighted mean of the blocks' values,
/// scale the effective divisor (raw over the selection-weighted mean of raw / scale), so that
/// `total` is still the weighted sum of raw / scale. With one block that selects, both are
/// exactly that block's.
/// @param[out] total f over the whole selection
[[nodiscard]] inline std::vector<term_value> total_terms(std::span<const block_result> blocks, double& total) {
  std::vector<term_value> out;
  std::size_t with_selection = 0;
  index_t s = 0;
  for (const auto& b : blocks) {
    if (b.selected == 0) continue;
    if (with_selection++ == 0) out = b.terms;
    total = b.objective;
    s += b.selected;
  }
  if (with_selection <= 1) return out;
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
    out[t].constant = std::any_of(blocks.begin(), blocks.end(),
                                  [t](const block_result& b) { return b.selected > 0 && b.terms[t].constant; });
    total += out[t].weight * scaled;
  }
  return out;
}

/// @brief The certificate over all blocks (none: no block that selects has one): each number
/// the selection-weighted mean of the blocks' (S_b / S), as `total_terms` weighs the objective,
/// so the bound of the whole selection's f is the weighted sum of the blocks' bounds. With one
/// block that selects, exactly that block's. A block without a certificate leaves the whole
/// selection without one (method "none", its reason).
/// @param total f over the whole selection (`total_terms`)
[[nodiscard]] inline std::optional<block_certificate> total_certificate(std::span<const block_result> blocks,
                                                                        double total) {
  std::vector<const block_result*> with;
  index_t s = 0;
  for (const auto& b : blocks) {
    if (b.selected == 0) continue;
    if (!b.certificate) return std::nullopt;
    with.push_back(&b);
    s += b.selected;
  }
  if (with.empty()) return std::nullopt;
  if (with.size() == 1) return with.front()->certificate;
  block_certificate out;
  double bound = 0.0, random = 0.0;
  std::string method = with.front()->certificate->method;
  bool none = false;
  for (const block_result* b : with) {
    const block_certificate& c = *b->certificate;
    const double w = static_cast<double>(b->selected) / static_cast<double>(s);
    bound += w * c.bound;
    random += w * c.random_mean;
    out.seconds += c.seconds;
    out.random_seconds += c.random_seconds;
    if (!c.certified() && !none) out.reason = detail::concat("block ", b->block, ": ", c.reason);
    none = none || !c.certified();
    if (c.method != method) method = "mixed";
  }
  out.random_mean = random;
  if (none) return out;
  out.method = method;
  out.bound = std::max(bound, total);
  out.gap = out.bound - total;
  out.certified_share = certified_share(total, out.bound, random);
  return out;
}

/// @brief f of block `p` under `o`, on `prepared` when the caller prepared the block.
template <class T, class Mix>
[[nodiscard]] objective_function<T, Mix> block_objective(const problem<T>& p, const Mix& mix, const settings& o,
                                                         const detail::prepared* prepared = nullptr) {
  return objective_function<T, Mix>(p.embeddings, detail::prepared_of(p, prepared, o.normalized, o.threads),
                                        mix, o.lambda, o.quality, o.threads);
}

/// @brief Evaluates a block's selection with the library's f (whole block as V): fills the
/// result's terms (raw, and the scale, weight and `constant` mark of `calibrated`) and objective,
/// and returns that f (scaled), for what else needs it on the same block (a certificate).
/// @param calibrated the terms of f as the optimizer scaled them, in order
/// @param prepared the block's per-row quantities when the caller has them (else null)
template <class T, class Mix>
objective_function<T, Mix> evaluate_block(const problem<T>& p, const Mix& mix, const settings& o,
                                              std::span<const term_value> calibrated,
                                              std::span<const index_t> rows, block_result& r,
                                              const detail::prepared* prepared = nullptr) {
  objective_function<T, Mix> f = block_objective(p, mix, o, prepared);
  f.set_scales(scales_of(calibrated));
  const std::vector<double> raw = f.raw(rows);
  r.terms = f.terms();
  constexpr std::string_view where = "on the selection";
  for (std::size_t t = 0; t < raw.size(); ++t) {
    r.terms[t].raw = raw[t];
    r.terms[t].constant = calibrated[t].constant;
    detail::check_finite_term(r.terms[t], raw[t], where);
  }
  r.objective = f.combine(raw);
  if (!std::isfinite(r.objective)) {  // finite terms whose weighted sum overflows
    throw invalid_input("objective", detail::concat("f is ", r.objective, " ", where, ", not finite, though every term is: ",
                                            "their weighted sum overflows; scale the inputs down"));
  }
  return f;
}

}  // namespace datamask
