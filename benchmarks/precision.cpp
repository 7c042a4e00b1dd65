// SPDX-License-Identifier: Apache-2.0
// One continuous-learner iteration's relaxation over a block stored in float32, float16 and
// bfloat16 (the same values for float32 and float16), side by side in one process, against this
// machine's read rate measured in the same run:
//
//   datamask_bench_precision [n d rounds disf_n]     (defaults: 1000000 256 7 100000)
//   datamask_bench_precision default ELEMENT [n d [ROWS]]   (ELEMENT: float32 or float16;
//                                                     defaults 300000 256; ROWS: a file for the
//                                                     selected rows, one a line, ascending)
//
// Pairwise similarity's relaxation is two passes over the block (X^T w and X s): its bytes per
// iteration are 2 n d times the element's size, and its rate is printed as a share of the read
// rate (a pass summing the float32 block's bytes as 64-bit words on every thread). DiSF's
// relaxation costs about 3 n d^2 flops (the scatter's symmetric rank updates and the quadratic
// forms), printed against Eigen's float GEMM in this binary. The float16 pairwise relaxation over
// a block that stays in the caches gives the rate of its arithmetic alone; the two passes timed
// alone (through a host executor) give what the rest of an iteration costs. Each figure is the
// median of `rounds` rounds; each round times every element type once, in turn.
//
// `default` runs the continuous learner with its defaults (pairwise similarity + quality, S = n / 10)
// on the synthetic corpus of datamask-select's --demo at n x d, its block held in ELEMENT only
// (a float16 block is rounded from the generated floats, which are then freed), and prints the
// selection's seconds, the process's peak resident memory during it (Linux: the peak is reset
// after the block is made) and the selection's f and rows' checksum. One process per element:
// run them in turn. RESULTS.md's "Half-precision blocks" section reads its figures from this
// program.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include <datamask/core/synthetic.hpp>

#include "bench_common.hpp"

namespace {

using namespace dm_bench;

/// A block of n x d elements of T and the per-row quantities a relaxation reads.
template <class T>
struct block {
  std::vector<T> x;
  std::vector<double> inv_norms;
  std::vector<double> sq_norms;
  index_t n;
  index_t d;
  block(const std::vector<float>& values, index_t rows, index_t cols) : n(rows), d(cols) {
    x.reserve(values.size());
    for (float v : values) {
      if constexpr (dm::half_precision<T>) {
        x.push_back(T::from(v));
      } else {
        x.push_back(static_cast<T>(v));
      }
    }
    for (index_t i = 0; i < n; ++i) {
      double sq = 0.0;
      for (index_t j = 0; j < d; ++j) {
        const double e = static_cast<float>(x[static_cast<std::size_t>(i * d + j)]);
        sq += e * e;
      }
      sq_norms.push_back(sq);
      inv_norms.push_back(sq > 0.0 ? 1.0 / std::sqrt(sq) : 0.0);
    }
  }
  [[nodiscard]] dm::relax_view<T> view(std::span<const double> p, double total) const {
    return dm::relax_view<T>{dm::make_matrix_view(x.data(), n, d), inv_norms.data(), sq_norms.data(), p, total, 0};
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Seconds of one relaxation of `objective` at p.
template <class Objective, class T>
double time_relax(const Objective& objective, const block<T>& b, std::span<const double> p, double total,
                  std::vector<double>& grad) {
  dm::host_executor exec;
  const auto t0 = clk::now();
  const double f = objective.relax(exec, b.view(p, total), grad.data());
  const double sec = since(t0);
  if (!std::isfinite(f)) refuse("precision", "the relaxation gave " + std::to_string(f));
  return sec;
}

/// Seconds of the relaxation's two passes alone over a block: X^T w (`column_sums`), then X s
/// (`row_dots`), each through a host executor.
template <class T>
std::pair<double, double> time_passes(const block<T>& b, std::span<const double> w, std::vector<double>& out) {
  dm::host_executor exec;
  const auto x = dm::make_matrix_view(b.x.data(), b.n, b.d);
  std::vector<double> s(static_cast<std::size_t>(b.d), 1.0 / static_cast<double>(b.d));
  const auto t0 = clk::now();
  exec.column_sums(x, w.data(), out.data());
  const double sums = since(t0);
  const auto t1 = clk::now();
  exec.row_dots(x, s.data(), out.data());
  return {sums, since(t1)};
}

/// Seconds of one pass reading the float32 block's bytes on every thread (64-bit words, four sums).
double time_read(const std::vector<float>& data) {
  const auto* words = reinterpret_cast<const std::uint64_t*>(data.data());
  const auto count = static_cast<index_t>(data.size() * sizeof(float) / sizeof(std::uint64_t));
  constexpr index_t chunk = index_t{1} << 14;  // 128 KiB a task
  const index_t chunks = (count + chunk - 1) / chunk;
  std::vector<std::uint64_t> sums(static_cast<std::size_t>(chunks));
  dm::host_executor exec;
  const auto t0 = clk::now();
  exec.for_each(chunks, [&](index_t c) {
    std::uint64_t s[4] = {0, 0, 0, 0};
    const index_t end = std::min(count, (c + 1) * chunk);
    index_t i = c * chunk;
    for (; i + 4 <= end; i += 4) {
      for (int l = 0; l < 4; ++l) s[l] += words[i + l];
    }
    for (; i < end; ++i) s[0] += words[i];
    sums[static_cast<std::size_t>(c)] = s[0] + s[1] + s[2] + s[3];
  }, static_cast<double>(chunk));
  const double sec = since(t0);
  std::uint64_t total = 0;
  for (auto v : sums) total += v;
  if (total == 42) std::printf(" ");  // keeps the sums alive
  return sec;
}

/// GFLOP/s of Eigen's float GEMM in this binary on every thread, in the quadratic forms' shape:
/// C = A G, A m x d in blocks of 512 rows over the threads, G d x d.
double gemm_rate(index_t m, index_t d, int rounds) {
  using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const mat a = mat::Random(m, d);
  const mat g = mat::Random(d, d);
  mat c(m, d);
  constexpr index_t rows = 512;
  dm::host_executor exec;
  std::vector<double> secs;
  for (int r = 0; r <= rounds; ++r) {
    const auto t0 = clk::now();
    exec.for_each((m + rows - 1) / rows, [&](index_t b) {
      const index_t len = std::min(rows, m - b * rows);
      c.middleRows(b * rows, len).noalias() = a.middleRows(b * rows, len) * g;
    }, 2.0 * static_cast<double>(rows * d * d));
    if (r > 0) secs.push_back(since(t0));
  }
  return 2.0 * static_cast<double>(m) * static_cast<double>(d) * static_cast<double>(d) / median(secs) / 1e9;
}

struct row {
  std::string type;
  std::size_t element;
  double ms;
  double sums_ms = 0.0;  ///< X^T w alone (`passes` runs only)
  double dots_ms = 0.0;  ///< X s alone
};

/// The three blocks' medians, and of the read pass over the float32 block in the same rounds.
struct timings {
  std::vector<row> rows;
  double read_ms;
};

/// Each block's relaxation of `objective` (and with `passes`, its two passes alone), in turn
/// within each round; medians.
template <class Objective>
timings run(const Objective& objective, const std::vector<float>& values, index_t n, index_t d, int rounds,
            bool passes) {
  const block<float> f32(values, n, d);
  const block<dm::float16> f16(values, n, d);
  const block<dm::bfloat16> bf16(values, n, d);
  // p as an ascent holds it: every entry in (0, 1), summing to S = n / 10; no zero row is skipped.
  dm::rng::philox_key key = dm::rng::block_key(7, 0);
  std::vector<double> p(static_cast<std::size_t>(n));
  double total = 0.0;
  for (index_t i = 0; i < n; ++i) {
    p[static_cast<std::size_t>(i)] = 0.2 * dm::rng::uniform01(key, static_cast<std::uint64_t>(i), 0u, 0u);
    total += p[static_cast<std::size_t>(i)];
  }
  std::vector<double> grad(static_cast<std::size_t>(n));
  std::vector<double> t32;
  std::vector<double> t16;
  std::vector<double> tb16;
  std::vector<double> reads;
  std::vector<double> pass[3][2];  // [block][X^T w, X s]
  auto time_both = [&](int k, const auto& b) {
    if (!passes) return;
    const auto [sums, dots] = time_passes(b, p, grad);
    pass[k][0].push_back(sums);
    pass[k][1].push_back(dots);
  };
  for (int r = 0; r <= rounds; ++r) {  // round 0 warms the pages and the caches, untimed
    const double a = time_relax(objective, f32, p, total, grad);
    const double b = time_relax(objective, f16, p, total, grad);
    const double c = time_relax(objective, bf16, p, total, grad);
    const double e = time_read(values);
    if (r == 0) continue;
    time_both(0, f32);
    time_both(1, f16);
    time_both(2, bf16);
    t32.push_back(a);
    t16.push_back(b);
    tb16.push_back(c);
    reads.push_back(e);
  }
  timings out{{{"float32", 4, 1e3 * median(t32)}, {"float16", 2, 1e3 * median(t16)}, {"bfloat16", 2, 1e3 * median(tb16)}},
              1e3 * median(reads)};
  if (passes) {
    for (int k = 0; k < 3; ++k) {
      out.rows[static_cast<std::size_t>(k)].sums_ms = 1e3 * median(pass[k][0]);
      out.rows[static_cast<std::size_t>(k)].dots_ms = 1e3 * median(pass[k][1]);
    }
  }
  return out;
}

/// Milliseconds per 10^6 rows of the pairwise relaxation over a float16 block that stays in
/// the caches (the first 2048 rows: 1 MiB at d = 256, two chunks of X^T w, so each thread's half
/// in its core's L2; relaxed `repeats` times): the rate of its arithmetic alone.
double in_cache_ms(const std::vector<float>& values, index_t d, int rounds) {
  const index_t n = std::min<index_t>(2048, static_cast<index_t>(values.size()) / d);
  const block<dm::float16> b(std::vector<float>(values.begin(), values.begin() + n * d), n, d);
  const std::vector<double> p(static_cast<std::size_t>(n), 0.1);
  std::vector<double> grad(static_cast<std::size_t>(n));
  constexpr int repeats = 400;
  std::vector<double> secs;
  for (int r = 0; r <= rounds; ++r) {
    double sec = 0.0;
    for (int k = 0; k < repeats; ++k) sec += time_relax(dm::pairwise_similarity{}, b, p, 0.1 * n, grad);
    if (r > 0) secs.push_back(sec);
  }
  return 1e3 * median(secs) / repeats * 1e6 / static_cast<double>(n);
}

/// The process's peak resident memory in MiB since the last `reset_peak` (Linux: VmHWM), or -1.
double peak_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1.0;
}
/// Resets the peak resident memory to the current (Linux: clear_refs 5).
void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

/// One default continuous run on the synthetic corpus held in T; prints time, peak memory, f.
template <class T>
int default_run(const char* element, index_t n, index_t d, const char* rows_file) {
  dm::synthetic_options so;
  so.n = n;
  so.d = d;
  so.seed = 1;
  dm::synthetic_corpus corpus = dm::make_synthetic_corpus(so);
  std::vector<T> low;
  if constexpr (dm::half_precision<T>) {
    low.reserve(corpus.embeddings.size());
    for (float v : corpus.embeddings) low.push_back(T::from(v));
    std::vector<float>().swap(corpus.embeddings);
  }
  dm::problem<T> p;
  if constexpr (dm::half_precision<T>) {
    p.embeddings = dm::make_matrix_view(static_cast<const T*>(low.data()), n, d);
  } else {
    p.embeddings = dm::make_matrix_view(static_cast<const T*>(corpus.embeddings.data()), n, d);
  }
  p.quality.push_back(dm::quality_column{std::span<const double>(corpus.quality), 1.0});
  dm::continuous_options o;
  o.common.ratio = 0.1;
  const double before = peak_mib();
  reset_peak();
  const auto t0 = clk::now();
  const auto res = dm::continuous_learner(o).select(p, dm::pairwise_similarity{});
  const double sec = since(t0);
  std::uint64_t sum = 0;
  for (index_t r : res.rows) sum = sum * 1000003u + static_cast<std::uint64_t>(r);
  std::printf("%s block %lld x %lld: %.2f s, peak resident %.0f MiB during the selection (%.0f MiB before), "
              "f %.17g, rows checksum %016llx\n",
              element, static_cast<long long>(n), static_cast<long long>(d), sec, peak_mib(), before, res.objective,
              static_cast<unsigned long long>(sum));
  if (rows_file != nullptr) {
    std::vector<index_t> rows = res.rows;
    std::sort(rows.begin(), rows.end());
    std::ofstream out(rows_file);
    for (index_t r : rows) out << r << '\n';
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto arg = [&](int k, double fallback) {
      return argc > k ? number(argv[k], [](const std::string& m) { refuse("precision", m); }) : fallback;
    };
    if (argc > 1 && std::string(argv[1]) == "default") {
      const std::string element = argc > 2 ? argv[2] : "";
      const auto n = static_cast<index_t>(arg(3, 3e5));
      const auto d = static_cast<index_t>(arg(4, 256));
      const char* rows = argc > 5 ? argv[5] : nullptr;
      if (element == "float32") return default_run<float>("float32", n, d, rows);
      if (element == "float16") return default_run<dm::float16>("float16", n, d, rows);
      refuse("precision", "default: expected float32 or float16, found '" + element + "'");
    }
    const auto n = static_cast<index_t>(arg(1, 1e6));
    const auto d = static_cast<index_t>(arg(2, 256));
    const int rounds = static_cast<int>(arg(3, 7));
    const auto disf_n = static_cast<index_t>(arg(4, 1e5));
    if (n < 2 || d < 1 || rounds < 1 || disf_n < 2) refuse("precision", "expected n >= 2, d >= 1, rounds >= 1, disf_n >= 2");
    std::mt19937_64 gen(1);
    std::normal_distribution<float> normal;
    // Values a float16 holds exactly, so the float32 and float16 blocks hold the same values.
    std::vector<float> values(static_cast<std::size_t>(n * d));
    for (auto& v : values) v = dm::float16::from(normal(gen));
    const timings pws = run(dm::pairwise_similarity{}, values, n, d, rounds, true);
    const double read_rate = static_cast<double>(values.size() * sizeof(float)) / (pws.read_ms / 1e3) / 1e9;
    std::printf("machine: %d threads; read rate %.2f GB/s (a pass summing the float32 block's %.2f GB, in the same rounds)\n",
                dm::detail::resolve_threads(0), read_rate, static_cast<double>(values.size() * 4) / 1e9);
    std::printf("\npairwise relaxation, n = %lld, d = %lld (2 passes over the block), medians of %d rounds\n",
                static_cast<long long>(n), static_cast<long long>(d), rounds);
    std::printf("| element | ms | x float32 | GB/s read | share of read rate |\n|---|---:|---:|---:|---:|\n");
    for (const row& r : pws.rows) {
      const double gbs = 2.0 * static_cast<double>(n * d) * static_cast<double>(r.element) / (r.ms / 1e3) / 1e9;
      std::printf("| %s | %.2f | %.3f | %.2f | %.1f%% |\n", r.type.c_str(), r.ms, r.ms / pws.rows[0].ms, gbs,
                  100.0 * gbs / read_rate);
    }
    std::printf("float16 over a block in the caches (2048 rows): %.2f ms per 10^6 rows\n",
                in_cache_ms(values, d, rounds));
    std::printf("\nthe two passes alone (X^T w by column_sums, X s by row_dots), the same rounds\n");
    std::printf("| element | X^T w ms | X s ms | GB/s read (both) | rest of the relaxation ms |\n|---|---:|---:|---:|---:|\n");
    for (const row& r : pws.rows) {
      const double both = r.sums_ms + r.dots_ms;
      const double gbs = 2.0 * static_cast<double>(n * d) * static_cast<double>(r.element) / (both / 1e3) / 1e9;
      std::printf("| %s | %.2f | %.2f | %.2f | %.2f |\n", r.type.c_str(), r.sums_ms, r.dots_ms, gbs, r.ms - both);
    }
    values.resize(static_cast<std::size_t>(disf_n * d));
    const double gemm = gemm_rate(65536, d, rounds);
    std::printf("\nDiSF relaxation, n = %lld, d = %lld (3 n d^2 flops); Eigen float GEMM %.1f GFLOP/s\n",
                static_cast<long long>(disf_n), static_cast<long long>(d), gemm);
    std::printf("| element | ms | x float32 | GFLOP/s | share of GEMM rate |\n|---|---:|---:|---:|---:|\n");
    const timings disf = run(dm::disf{}, values, disf_n, d, rounds, false);
    for (const row& r : disf.rows) {
      const double gf = 3.0 * static_cast<double>(disf_n) * static_cast<double>(d * d) / (r.ms / 1e3) / 1e9;
      std::printf("| %s | %.2f | %.3f | %.1f | %.1f%% |\n", r.type.c_str(), r.ms, r.ms / disf.rows[0].ms, gf, 100.0 * gf / gemm);
    }
  } catch (const std::exception& e) {
    refuse("precision", e.what());
  }
  return 0;
}
