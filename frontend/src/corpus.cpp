// SPDX-License-Identifier: Apache-2.0

#include "datamask/frontend/corpus.hpp"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

#include <datamask/input_checks.hpp>
#include <datamask/io/npy.hpp>
#include <datamask/io/shard_rows.hpp>

#include "datamask/frontend/block_backend.hpp"

namespace dmfront {

void corpus::add_shard(const void* data, bool half, index_t rows, index_t cols) {
  shard_start.push_back(n);
  shards.push_back({static_cast<const unsigned char*>(data), half, rows});
  n += rows;
  d = cols;
}

void corpus::add_quality(std::string name, std::vector<double> scores, const std::string& rows_of) {
  datamask::check_row_count(name, scores.size(), n, rows_of);
  datamask::check_finite_scores(name, scores);
  quality.push_back(std::move(scores));
  quality_names.push_back(std::move(name));
}

void corpus::weigh_quality(const std::vector<double>& given, const std::string& name) {
  DATAMASK_EXPECTS(given.empty() || given.size() == quality.size(), name, given.size(), " weights for ",
                   quality.size(), " score columns");
  for (const double w : given) DATAMASK_EXPECTS(w >= 0.0, name, "weights must be >= 0, found ", w);
  quality_weights = given.empty() ? std::vector<double>(quality.size(), 1.0) : given;
}

void corpus::view_ids(std::span<const datamask::id_t> values, bool is_unsigned, const std::string& name,
                      const std::string& rows_of) {
  datamask::check_row_count(name, values.size(), n, rows_of);
  datamask::check_unique_ids(name, values, is_unsigned);
  ids = values;
  ids_unsigned = is_unsigned;
}

std::vector<index_t> corpus::rows_of_ids(std::span<const datamask::id_t> wanted, bool is_unsigned,
                                         const std::string& name) const {
  std::unordered_map<datamask::id_t, index_t> row_of;
  row_of.reserve(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) row_of.emplace(id(i), i);
  std::vector<index_t> rows;
  std::unordered_map<index_t, std::size_t> position_of;  // of each row in `wanted`
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    const auto it = row_of.find(wanted[i]);
    const auto text = [&] { return datamask::id_text(wanted[i], is_unsigned); };  // only for a message
    DATAMASK_EXPECTS(it != row_of.end(), name, "id ", text(), " (position ", i, ") is not in the corpus");
    const auto [first, fresh] = position_of.emplace(it->second, i);
    DATAMASK_EXPECTS(fresh, name, "id ", text(), " is given twice (positions ", first->second, " and ", i, ")");
    rows.push_back(it->second);
  }
  return rows;
}

std::vector<datamask::id_t> corpus::ids_of(std::span<const index_t> rows) const {
  std::vector<datamask::id_t> out;
  out.reserve(rows.size());
  for (const index_t r : rows) out.push_back(id(r));
  return out;
}

datamask::matrix_view<const float> corpus::whole_view() const {
  if (shards.size() != 1 || shards[0].half ||
      reinterpret_cast<std::uintptr_t>(shards[0].data) % alignof(float) != 0) {
    return {};
  }
  return datamask::make_matrix_view(reinterpret_cast<const float*>(shards[0].data), n, d);
}

void corpus::gather(std::span<const index_t> rows, float* out, int threads) const {
  const auto cols = static_cast<std::size_t>(d);
  datamask::io::gather_shard_rows(rows, d, shard_start, out, threads, [&](std::size_t s, index_t local, float* o) {
    const shard& h = shards[s];
    if (!h.half) {
      std::memcpy(o, h.data + static_cast<std::size_t>(local) * cols * sizeof(float), cols * sizeof(float));
      return;
    }
    const unsigned char* row = h.data + static_cast<std::size_t>(local) * cols * sizeof(std::uint16_t);
    for (std::size_t j = 0; j < cols; ++j) {
      std::uint16_t v;
      std::memcpy(&v, row + j * sizeof v, sizeof v);
      o[j] = datamask::io::half_to_float(v);
    }
  });
}

datamask::block_data corpus::block(std::span<const index_t> rows, bool whole, int threads) const {
  return datamask::gather_block(
      rows, d, whole ? whole_view() : datamask::matrix_view<const float>{},
      [&](std::span<const index_t> rs, float* out) { gather(rs, out, threads); },
      std::span<const std::vector<double>>(quality), quality_weights, [&](index_t r) { return id(r); });
}

datamask::corpus_plan corpus::plan(const datamask::settings& run, index_t block_size) const {
  return datamask::plan_corpus(n, run, block_size, [&](index_t r) { return id(r); },
                               std::span<const std::vector<double>>(quality), quality_weights);
}

datamask::calibration_sample calibrate_corpus(const corpus& k, const datamask::corpus_plan& plan,
                                              datamask::block_run_settings& s) {
  auto sample = datamask::calibration_rows(plan, s, [&](index_t r) { return k.id(r); },
                                           std::span<const std::vector<double>>(k.quality), k.quality_weights);
  if (!sample.rows.empty()) {
    s.calibration = calibrate_sample(k.block(sample.rows, false, s.run.threads).view(), sample.subset, s);
  }
  return sample;
}

std::vector<datamask::block_result> run_blocks(const corpus& k, const datamask::corpus_plan& plan,
                                               const datamask::block_run_settings& s, std::span<const index_t> run,
                                               const block_side& side) {
  std::vector<datamask::block_result> results;
  const bool one_block = plan.blocks.size() == 1;
  for (const index_t block : run) {
    const auto b = static_cast<std::size_t>(block);
    if (side.before) side.before(block);
    if (side.recorded) {
      if (auto r = side.recorded(block)) {
        results.push_back(std::move(*r));
        continue;
      }
    }
    datamask::block_result r;
    r.block = block;
    r.items = static_cast<index_t>(plan.blocks[b].size());
    if (plan.counts[b] > 0) {  // else nothing to select: no data to gather
      try {
        const datamask::block_data data = k.block(plan.blocks[b], one_block, s.run.threads);
        r = select_block(data.view(), block, plan.counts[b], plan.prune_threshold, s,
                         side.hooks ? side.hooks(block) : datamask::block_hooks{});
      } catch (const datamask::invalid_input& e) {
        if (one_block) throw;
        throw datamask::in_block(e, block);
      }
      if (side.graph_seconds && s.graph) r.graph.seconds = *side.graph_seconds;  // loaded once, before the blocks
    }
    results.push_back(std::move(r));
    if (side.finished) side.finished(results.back());
  }
  return results;
}

datamask::block_result evaluate_subset(const corpus& k, std::span<const index_t> rows,
                                       const datamask::block_run_settings& s, const std::string& name) {
  DATAMASK_EXPECTS(!rows.empty(), name, "the subset is empty; f needs at least one item");
  std::vector<index_t> all(static_cast<std::size_t>(k.n));
  for (index_t i = 0; i < k.n; ++i) all[static_cast<std::size_t>(i)] = i;
  const auto threshold = datamask::corpus_prune_threshold(s.run.prune, k.quality, k.quality_weights);
  const datamask::block_data data = k.block(all, true, s.run.threads);
  return evaluate_rows(data.view(), 0, rows, threshold, s);
}

run_totals totals_of(std::span<const datamask::block_result> blocks, index_t selected, std::string_view run_optimizer,
                     bool with_ids) {
  run_totals t;
  index_t picked = 0;
  for (const auto& b : blocks) {
    if (with_ids) t.ids.insert(t.ids.end(), b.ids.begin(), b.ids.end());
    picked += with_ids ? static_cast<index_t>(b.ids.size()) : b.selected;
    t.optimize_seconds += b.optimize_seconds;
    t.evaluate_seconds += b.evaluate_seconds;
    if (!b.optimizer.empty() && ("," + t.optimizers + ",").find("," + b.optimizer + ",") == std::string::npos) {
      t.optimizers += (t.optimizers.empty() ? "" : ",") + b.optimizer;
    }
  }
  if (picked != selected) {
    throw std::logic_error("selected " + std::to_string(picked) + " items, expected " + std::to_string(selected));
  }
  if (t.optimizers.empty()) t.optimizers = selected > 0 ? "none" : run_optimizer;  // none: every item selected
  t.terms = datamask::total_terms(blocks, t.objective);
  t.certificate = datamask::total_certificate(blocks, t.objective);
  return t;
}

}  // namespace dmfront
