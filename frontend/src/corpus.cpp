// SPDX-License-Identifier: Apache-2.0

#include "datamask/frontend/corpus.hpp"

#include <cstdint>
#include <algorithm>
#include <cmath>
#include <bit>
#include <optional>
#include <cstring>
#include <type_traits>
#include <stdexcept>
#include <unordered_map>

#include <datamask/core/input_checks.hpp>
#include <datamask/io/npy.hpp>
#include <datamask/io/shard_rows.hpp>

#include "datamask/frontend/block_backend.hpp"

namespace dmfront {

void corpus::add_shard(const void* data, datamask::element_kind element, index_t rows, index_t cols, std::string name) {
  shard_start.push_back(n);
  some_absent = some_absent || data == nullptr;
  shards.push_back({static_cast<const unsigned char*>(data), element, rows, std::move(name)});
  n += rows;
  d = cols;
}

void corpus::add_quality(std::string name, std::vector<double> scores, const std::string& rows_of) {
  datamask::check_row_count(name, scores.size(), window.second - window.first, rows_of);
  datamask::check_finite_scores(name, scores, window.first);
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
  datamask::check_row_count(name, values.size(), window.second - window.first, rows_of);
  datamask::check_unique_ids(name, values, is_unsigned, window.first);
  ids = values;
  ids_unsigned = is_unsigned;
}

std::vector<index_t> corpus::rows_of_ids(std::span<const datamask::id_t> wanted, bool is_unsigned,
                                         const std::string& name) const {
  std::unordered_map<datamask::id_t, index_t> row_of;
  row_of.reserve(static_cast<std::size_t>(window.second - window.first));
  for (index_t i = window.first; i < window.second; ++i) row_of.emplace(id(i), i);
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

double corpus::combined(index_t r) const {
  double c = 0.0;
  for (std::size_t a = 0; a < quality.size(); ++a) c += quality_weights[a] * quality[a][static_cast<std::size_t>(r - window.first)];
  return c;
}

std::vector<std::span<const double>> corpus::quality_rows(std::pair<index_t, index_t> rows) const {
  std::vector<std::span<const double>> out;
  for (const auto& col : quality) {
    out.push_back(std::span<const double>(col).subspan(static_cast<std::size_t>(rows.first - window.first),
                                                       static_cast<std::size_t>(rows.second - rows.first)));
  }
  return out;
}

std::vector<datamask::id_t> corpus::ids_of(std::span<const index_t> rows) const {
  std::vector<datamask::id_t> out;
  out.reserve(rows.size());
  for (const index_t r : rows) out.push_back(id(r));
  return out;
}

namespace {
/// Whether a run's blocks may hold 16-bit rows: not when an objective given at run time, whose
/// functions read float32 rows, counts in f.
bool keeps_16_bit(const datamask::block_run_settings& s) { return !s.weighs_external(); }

}  // namespace

template <class T>
datamask::matrix_view<const T> corpus::whole_view() const {
  if (shards.size() != 1 || shards[0].element != datamask::element_kind_of<T> || shards[0].data == nullptr ||
      reinterpret_cast<std::uintptr_t>(shards[0].data) % alignof(T) != 0) {
    return {};
  }
  return datamask::make_matrix_view(reinterpret_cast<const T*>(shards[0].data), n, d);
}

datamask::element_kind corpus::block_element(bool keep_16_bit) const {
  if (!keep_16_bit || shards.empty()) return datamask::element_kind::float32;
  // Another worker's shards (no data) are never read, so their kind does not count.
  std::optional<datamask::element_kind> kind;
  for (const shard& h : shards) {
    if (h.data == nullptr) continue;
    if (kind && h.element != *kind) return datamask::element_kind::float32;  // mixed kinds meet in float32
    kind = h.element;
  }
  return kind.value_or(datamask::element_kind::float32);
}

template <class T>
void corpus::gather(std::span<const index_t> rows, T* out, int threads) const {
  const auto cols = static_cast<std::size_t>(d);
  if (some_absent) {  // a clear error, never a read through null (the front end keeps such rows out)
    for (const index_t r : rows) {
      // The window's rows are in shards this worker holds (the binding gives no shape-only shard
      // inside it), so only a row outside it is looked up.
      if (r >= window.first && r < window.second) continue;
      const auto s = static_cast<std::size_t>(std::upper_bound(shard_start.begin(), shard_start.end(), r) -
                                              shard_start.begin() - 1);
      DATAMASK_EXPECTS(shards[s].data != nullptr, shards[s].name, "was not given to this worker (another worker's "
                       "rows), but its row ", r - shard_start[s], " is read");
    }
  }
  datamask::io::gather_shard_rows(rows, d, shard_start, out, threads, [&](std::size_t s, index_t local, T* o) {
    const shard& h = shards[s];
    const unsigned char* row = h.data + static_cast<std::size_t>(local) * cols * datamask::element_bytes(h.element);
    if constexpr (std::is_same_v<T, float>) {
      datamask::widen(row, h.element, cols, o);
    } else {
      if (h.element != datamask::element_kind_of<T>) throw std::logic_error(h.name + ": gathered as another 16-bit kind");
      std::memcpy(static_cast<void*>(o), row, cols * sizeof(T));  // as stored
    }
  });
}

template <class T>
datamask::basic_block_data<T> corpus::block(std::span<const index_t> rows, bool whole, int threads) const {
  return datamask::gather_block(
      rows, d, whole ? whole_view<T>() : datamask::matrix_view<const T>{},
      [&](std::span<const index_t> rs, T* out) { gather(rs, out, threads); },
      std::span<const std::vector<double>>(quality), quality_weights, [&](index_t r) { return id(r); }, window.first);
}

template datamask::matrix_view<const float> corpus::whole_view<float>() const;
template datamask::matrix_view<const datamask::float16> corpus::whole_view<datamask::float16>() const;
template datamask::matrix_view<const datamask::bfloat16> corpus::whole_view<datamask::bfloat16>() const;
template void corpus::gather<float>(std::span<const index_t>, float*, int) const;
template void corpus::gather<datamask::float16>(std::span<const index_t>, datamask::float16*, int) const;
template void corpus::gather<datamask::bfloat16>(std::span<const index_t>, datamask::bfloat16*, int) const;
template datamask::basic_block_data<float> corpus::block<float>(std::span<const index_t>, bool, int) const;
template datamask::basic_block_data<datamask::float16> corpus::block<datamask::float16>(std::span<const index_t>, bool,
                                                                                       int) const;
template datamask::basic_block_data<datamask::bfloat16> corpus::block<datamask::bfloat16>(std::span<const index_t>,
                                                                                         bool, int) const;

datamask::corpus_layout corpus::layout(index_t block_size) const {
  std::vector<index_t> rows;
  for (std::size_t f = 0; f + 1 < shard_start.size(); ++f) rows.push_back(shard_start[f + 1] - shard_start[f]);
  return datamask::layout_corpus(rows, block_size);
}

datamask::corpus_plan corpus::plan(const datamask::settings& run, index_t block_size,
                                   std::pair<index_t, index_t> held) const {
  return datamask::plan_corpus(layout(block_size), held, run, [&](index_t r) { return id(r); });
}

datamask::corpus_plan corpus::plan(const datamask::settings& run, index_t block_size) const {
  datamask::corpus_plan p = plan(run, block_size, {0, layout(block_size).groups()});
  p.prune_threshold = prune_threshold(*this, run.prune, {{0, n}, {}});
  return p;
}

std::pair<index_t, index_t> planned_rows(const datamask::corpus_layout& layout, std::span<const index_t> mine) {
  if (mine.empty()) return {0, 0};
  const auto& starts = layout.group_block;  // each group's first block, then the block count
  const auto group_from = [&](index_t b) {
    return static_cast<index_t>(std::lower_bound(starts.begin(), starts.end(), b) - starts.begin());
  };
  return {layout.group_row(group_from(mine.front())), layout.group_row(group_from(mine.back() + 1))};
}

std::optional<double> prune_threshold(const corpus& k, double prune, const planning& p) {
  if (prune <= 0.0) return std::nullopt;  // before the columns: a worker's rows may not be p.rows then
  const auto columns = k.quality_rows(p.rows);
  return datamask::corpus_prune_threshold(prune, k.n, columns, k.quality_weights, p.all);
}

namespace {

/// The rows `rows` of the corpus from every worker: each packs those among its own (`mine`: the
/// rows it plans), as [row, id, each score's bits, the floats' bits two to a word], and every
/// worker unpacks them all in row order.
datamask::block_data exchange_rows(const corpus& k, std::span<const index_t> rows, const planning& p, int threads) {
  std::vector<index_t> mine;
  for (const index_t r : rows) {
    if (r >= p.rows.first && r < p.rows.second) mine.push_back(r);
  }
  const datamask::block_data have = k.block(mine, false, threads);
  const std::size_t cols = k.quality.size(), d = static_cast<std::size_t>(k.d), words = 2 + cols + (d + 1) / 2;
  // A sample row may lie in a shard no worker has checked yet (a plan step, a shard without a
  // plan): said as the worker that reads its shard says it.
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const float* x = have.embeddings.data + i * static_cast<std::size_t>(have.embeddings.stride);
    for (std::size_t j = 0; j < d; ++j) {
      if (std::isfinite(x[j])) continue;
      const auto s = static_cast<std::size_t>(
          std::upper_bound(k.shard_start.begin(), k.shard_start.end(), mine[i]) - k.shard_start.begin() - 1);
      throw datamask::invalid_input(k.shards[s].name,
                                    datamask::detail::concat("row ", mine[i] - k.shard_start[s], ", column ", j, " is ",
                                                             std::isnan(x[j]) ? "NaN" : "infinite",
                                                             "; every value must be finite"));
    }
  }
  std::vector<std::uint64_t> packed;
  packed.reserve(mine.size() * words);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    packed.push_back(static_cast<std::uint64_t>(mine[i]));
    packed.push_back(static_cast<std::uint64_t>(have.ids[i]));
    for (std::size_t a = 0; a < cols; ++a) packed.push_back(std::bit_cast<std::uint64_t>(have.quality[a][i]));
    const float* x = have.embeddings.data + i * static_cast<std::size_t>(have.embeddings.stride);
    for (std::size_t j = 0; j < d; j += 2) {
      const std::uint64_t lo = std::bit_cast<std::uint32_t>(x[j]);
      const std::uint64_t hi = j + 1 < d ? std::bit_cast<std::uint32_t>(x[j + 1]) : 0u;
      packed.push_back(lo | (hi << 32));
    }
  }
  const std::vector<std::uint64_t> all = datamask::gather_all(p.all, packed);
  if (all.size() != rows.size() * words) {
    throw std::logic_error("received " + std::to_string(all.size() / words) + " calibration rows, expected " +
                           std::to_string(rows.size()));
  }
  datamask::block_data b;
  b.buffer.resize(rows.size() * d);
  b.quality.assign(cols, std::vector<double>(rows.size()));
  b.quality_weights = k.quality_weights;
  b.ids.resize(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {  // the workers' rows ascend with the worker
    const std::uint64_t* v = &all[i * words];
    if (static_cast<index_t>(v[0]) != rows[i]) throw std::logic_error("calibration rows received out of order");
    b.ids[i] = static_cast<datamask::id_t>(v[1]);
    for (std::size_t a = 0; a < cols; ++a) b.quality[a][i] = std::bit_cast<double>(v[2 + a]);
    for (std::size_t j = 0; j < d; ++j) {
      const std::uint64_t w = v[2 + cols + j / 2];
      b.buffer[i * d + j] = std::bit_cast<float>(static_cast<std::uint32_t>(j % 2 == 0 ? w : w >> 32));
    }
  }
  b.embeddings = datamask::make_matrix_view(static_cast<const float*>(b.buffer.data()), static_cast<index_t>(rows.size()), k.d);
  return b;
}

}  // namespace

datamask::calibration_sample calibrate_corpus(const corpus& k, const datamask::corpus_plan& plan,
                                              datamask::block_run_settings& s, const planning& p) {
  auto sample = datamask::calibration_rows(
      plan, s, p.rows, [&](index_t r) { return k.id(r); }, [&](index_t r) { return k.combined(r); }, p.all);
  if (!sample.rows.empty()) {
    s.calibration = calibrate_sample(exchange_rows(k, sample.rows, p, s.run.threads).view(), sample.subset, s);
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
        r = k.with_block(plan.blocks[b], one_block, s.run.threads, keeps_16_bit(s), [&](const auto& p) {
          return select_block(p, block, plan.counts[b], plan.prune_threshold, s,
                              side.hooks ? side.hooks(block) : datamask::block_hooks{});
        });
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
  const auto threshold = prune_threshold(k, s.run.prune, {{0, k.n}, {}});
  return k.with_block(all, true, s.run.threads, keeps_16_bit(s),
                      [&](const auto& p) { return evaluate_rows(p, 0, rows, threshold, s); });
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
