// SPDX-License-Identifier: Apache-2.0
//
// The continuous learner's passes on the GPU, one at a time, timed with CUDA events beside the
// device's measured copy bandwidth: the profile of an iteration of pairwise + quality on the
// Thrust backend under CUDA, the same over the block rounded to float16, the shapes of the
// column_sums kernel side by side, the tracked
// read-out's parts on the host and on the device, and DiSF's two O(n d^2) passes
// (benchmarks/GPU.md). Plain CUDA (no Google Benchmark), so that
// scripts/gpu-check builds and runs it on a machine with the toolkit only. Exit 77 without a GPU.
//   datamask_gpu_passes [rows (1000000)] [dims (768)] [repeats (10)] [no-disf]
// (repeats: of the iteration's passes; the read-out's parts and DiSF's passes take 3 each.)
// Each line: the pass, its median time over the repeats, the bytes of the block it reads per
// millisecond (GB/s) and that as a share of the copy bandwidth (a device-to-device copy of the
// block reads and writes it: 2 bytes moved per byte).

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <thrust/device_vector.h>

#include "datamask/exec/backend/thrust.hpp"
#include "datamask/learners/continuous/ascent.hpp"
#include "datamask/learners/continuous/learner.hpp"
#include "datamask/exec/ops.hpp"
#include "datamask/objectives/pairwise.hpp"

namespace {

using datamask::index_t;
using exec_t = datamask::thrust_backend::executor;

/// A value in [-1, 1) from a counter (splitmix64), so the block is made on the device.
struct hashed_value {
  std::uint64_t salt;
  __host__ __device__ float operator()(index_t i) const {
    std::uint64_t z = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull + salt;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0);
  }
};

/// inv[i] = 1 / ||x_i||, sq[i] = ||x_i||^2.
template <class T>
struct row_norms {
  datamask::matrix_view<const T> x;
  double* inv;
  double* sq;
  __host__ __device__ void operator()(index_t i) const {
    double acc = 0.0;
    for (index_t j = 0; j < x.cols; ++j) acc += static_cast<double>(x(i, j)) * static_cast<double>(x(i, j));
    sq[i] = acc;
    inv[i] = acc > 0.0 ? 1.0 / sqrt(acc) : 0.0;
  }
};

/// out[i] = x[i] rounded to float16 (nearest even).
struct to_float16 {
  const float* x;
  datamask::float16* out;
  __device__ void operator()(index_t i) const { out[i] = datamask::float16{__half_as_ushort(__float2half_rn(x[i]))}; }
};

/// w[i] = value on every `every`-th row, 0 elsewhere.
struct every_kth {
  double* w;
  index_t every;
  double value;
  __host__ __device__ void operator()(index_t i) const { w[i] = i % every == 0 ? value : 0.0; }
};

/// The median of `repeats` timings of `run` in milliseconds (CUDA events on the default stream).
double median_ms(int repeats, const std::function<void()>& run) {
  cudaEvent_t a = nullptr;
  cudaEvent_t b = nullptr;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  run();  // warm: the pool's buffers, the kernels' first launch
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    cudaEventRecord(a);
    run();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0.0F;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// One printed line: a pass's time, its rate over `bytes`, and that rate's share of the first
/// line's (the copy bandwidth).
struct report_line {
  double copy_rate = 0.0;
  void operator()(const char* name, double ms, double bytes) {
    const double rate = bytes / (ms * 1e6);  // GB/s
    if (copy_rate == 0.0) copy_rate = rate;
    std::printf("%-44s %9.3f ms %8.1f GB/s %6.1f%%\n", name, ms, rate, 100.0 * rate / copy_rate);
  }
};

/// The copy bandwidth, then the executor's dense products and a reduce over the block `x`.
void time_products(exec_t& exec, const datamask::matrix_view<const float>& x, const double* inv, int repeats,
                   report_line& line) {
  const index_t n = x.rows;
  const index_t d = x.cols;
  const double block_bytes = static_cast<double>(n * d) * 4.0;
  {  // the copy bandwidth: the block read and written once
    thrust::device_vector<float> copy(static_cast<std::size_t>(n * d));
    line("copy (device to device, read + write)",
         median_ms(repeats, [&] { cudaMemcpy(thrust::raw_pointer_cast(copy.data()), x.data, static_cast<std::size_t>(block_bytes), cudaMemcpyDeviceToDevice); }),
         2.0 * block_bytes);
  }
  double* w = exec.scratch<double>(n);
  double* s = exec.scratch<double>(d);
  double* out = exec.scratch<double>(n);
  exec.for_each(n, datamask::ops::fill{w, 1.0 / static_cast<double>(n)});
  exec.for_each(d, datamask::ops::fill{s, 1.0});
  line("column_sums X^T w, every w_i != 0", median_ms(repeats, [&] { exec.column_sums(x, w, s); }), block_bytes);
  {  // the kernel's shapes side by side: V values per load, B rows of loads in flight, T threads
    namespace cd = datamask::detail::cuda_dense;
    const index_t rows = datamask::dense::chunk_rows(n, datamask::dense::column_chunks);
    const index_t chunks = (n + rows - 1) / rows;
    double* part = exec.scratch<double>(chunks * d);
    // A shape the block's layout refuses launches nothing: say so rather than time nothing.
    auto shape = [&](const char* name, auto launch) {
      if (!launch()) {
        std::printf("%-44s refused by this block's layout\n", name);
        return;
      }
      line(name, median_ms(repeats, [&] { (void)launch(); }), block_bytes);
    };
    shape("column partials, V 1, B 32, T 128",
          [&] { return cd::column_chunks_with<float, 1, 32, 128>(x, w, rows, chunks, part); });
    shape("column partials, V 4, B 16, T 64",
          [&] { return cd::column_chunks_with<float, 4, 16, 64>(x, w, rows, chunks, part); });
    shape("column partials, V 4, B 32, T 64",
          [&] { return cd::column_chunks_with<float, 4, 32, 64>(x, w, rows, chunks, part); });
    shape("column partials, V 4, B 8, T 192",
          [&] { return cd::column_chunks_with<float, 4, 8, 192>(x, w, rows, chunks, part); });
    shape("column partials, V 2, B 32, T 128",
          [&] { return cd::column_chunks_with<float, 2, 32, 128>(x, w, rows, chunks, part); });
  }
  line("column_sums X^T w (generic for_each pass)",
       median_ms(repeats, [&] { datamask::dense::column_sums(exec, x, w, s); }), block_bytes);
  {  // the kernel's promise: the generic pass's bits
    double* t = exec.scratch<double>(d);
    exec.column_sums(x, w, t);
    std::vector<double> a(static_cast<std::size_t>(d));
    std::vector<double> b(static_cast<std::size_t>(d));
    exec.download(static_cast<const double*>(s), std::span<double>(a));
    exec.download(static_cast<const double*>(t), std::span<double>(b));
    std::printf("column_sums: the kernel's bits %s the generic pass's\n", a == b ? "equal" : "DIFFER FROM");
  }
  exec.for_each(n, every_kth{w, 10, 0.1});
  line("column_sums X^T w, 1 row in 10", median_ms(repeats, [&] { exec.column_sums(x, w, s); }), block_bytes / 10.0);
  line("row_dots X s (executor's: tiled)", median_ms(repeats, [&] { exec.row_dots(x, s, out); }), block_bytes);
  line("row_dots X s (generic for_each pass)", median_ms(repeats, [&] { datamask::dense::row_dots(exec, x, s, out); }),
       block_bytes);
  line("reduce of n doubles (to the host)",
       median_ms(repeats, [&] { (void)exec.reduce(n, datamask::ops::product{w, inv}, datamask::ops::plus{}, 0.0); }),
       16.0 * static_cast<double>(n));
}

/// The parts of one continuous iteration on the pairwise relaxation (S = n / 10): the projection,
/// the relaxation, the iterate's download, and whole iterations of the default ascent; returns a
/// checksum of the values computed. `tag` names the block's element in the lines.
template <class T>
double time_ascent(exec_t& exec, const datamask::matrix_view<const T>& x, const double* inv, const double* sq,
                   int repeats, report_line& line, const std::string& tag = "") {
  const index_t n = x.rows;
  const double block_bytes = static_cast<double>(n * x.cols) * static_cast<double>(sizeof(T));
  const auto name = [&](const char* what) { return tag.empty() ? std::string(what) : tag + ": " + what; };
  std::vector<index_t> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), index_t{0});
  const index_t sel = n / 10;
  const datamask::candidate_rows c{exec.upload(std::span<const index_t>(all)), n, exec.scratch<index_t>(n)};
  double* y = exec.scratch<double>(n);
  double* p = exec.scratch<double>(n);
  double* out = exec.scratch<double>(n);
  line(name("capped-simplex projection (S = n / 10)").c_str(), median_ms(repeats, [&] {
         exec.for_each(n, every_kth{y, 3, 0.7});
         (void)datamask::project_capped_simplex(exec, c, y, static_cast<double>(sel), p, false);
       }), 8.0 * static_cast<double>(n));

  double sum = 0.0;
  const datamask::pairwise_similarity pw;
  datamask::relax_view<T> view{x, inv, sq, std::span<const double>(p, static_cast<std::size_t>(n)),
                               static_cast<double>(sel), 0};
  line(name("pairwise relax (value and gradient)").c_str(), median_ms(repeats, [&] { sum = pw.relax(exec, view, out); }),
       block_bytes);
  std::vector<double> host(static_cast<std::size_t>(n));
  line(name("download p (n doubles, pageable host memory)").c_str(),
       median_ms(repeats, [&] { exec.download(static_cast<const double*>(p), std::span<double>(host)); }),
       8.0 * static_cast<double>(n));

  // Whole iterations: the default ascent (normalised steps, projection) on the pairwise relaxation.
  const index_t iterations = 10;
  auto relaxed = [&](auto& scope, const double* pp, double* grad) {
    datamask::relax_view<T> v = view;
    v.p = std::span<const double>(pp, static_cast<std::size_t>(n));
    return pw.relax(scope, v, grad);
  };
  const datamask::ascent<> a(iterations);
  const double ms = median_ms(std::max(1, repeats / 5), [&] {
    auto st = a.run(exec, relaxed, n, std::span<const index_t>(all), sel,
                    datamask::first_iterate(n, std::span<const index_t>(all), sel, a.shape()));
    sum += st.relaxed.back();
  });
  line(name("ascent iteration (10 from the start, mean)").c_str(), ms / static_cast<double>(iterations), block_bytes);
  return sum;
}

/// The block rounded to float16 (half its bytes): the two dense passes and the ascent's parts
/// over it, each line's rate in the bytes it reads (the copy line's share, as above).
double time_float16(exec_t& exec, const datamask::matrix_view<const float>& x, int repeats, report_line& line) {
  const index_t n = x.rows;
  const index_t d = x.cols;
  thrust::device_vector<datamask::float16> hs(static_cast<std::size_t>(n * d));
  exec.for_each(n * d, to_float16{x.data, thrust::raw_pointer_cast(hs.data())});
  const datamask::matrix_view<const datamask::float16> h(thrust::raw_pointer_cast(hs.data()), n, d);
  double* inv = exec.scratch<double>(n);
  double* sq = exec.scratch<double>(n);
  exec.for_each(n, row_norms<datamask::float16>{h, inv, sq});
  const double bytes = static_cast<double>(n * d) * 2.0;
  double* w = exec.scratch<double>(n);
  double* s = exec.scratch<double>(d);
  double* out = exec.scratch<double>(n);
  exec.for_each(n, datamask::ops::fill{w, 1.0 / static_cast<double>(n)});
  exec.for_each(d, datamask::ops::fill{s, 1.0});
  line("float16: column_sums X^T w, every w_i != 0", median_ms(repeats, [&] { exec.column_sums(h, w, s); }), bytes);
  line("float16: row_dots X s", median_ms(repeats, [&] { exec.row_dots(h, s, out); }), bytes);
  return time_ascent(exec, h, inv, sq, repeats, line, "float16");
}

/// The continuous learner's tracked read-out of one iterate (S = n / 10, 3 rows in 10 with p > 0),
/// its parts timed both ways: on the host, as the learner runs it (download p, `read_out`, the
/// pairwise term of the S rows on the host's threads), and on the device through the backend
/// (the positive rows, `top_rows` of them, the pairwise term and the quality's `gather_sum` of
/// one subset of S rows). Moving the read-out to the device as those parts ran slower in the
/// program (77 against 51 ms per read-out, benchmarks/GPU.md, 2026-11-28): these lines say which
/// part to write as a kernel first.
void time_read_out(const datamask::matrix_view<const float>& x, report_line& line) {
  const index_t n = x.rows;
  const index_t d = x.cols;
  const index_t s = n / 10;
  std::vector<float> hx(static_cast<std::size_t>(n * d));
  cudaMemcpy(hx.data(), x.data, hx.size() * sizeof(float), cudaMemcpyDeviceToHost);
  const datamask::problem<float> prob{datamask::matrix_view<const float>(hx.data(), n, d), {}, {}};
  const auto prep = datamask::detail::prepare(prob, false, 0);
  std::vector<double> hp(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) hp[i] = i % 10 < 3 ? static_cast<double>((i * 7919) % 1000 + 1) / 1000.0 : 0.0;
  std::vector<index_t> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), index_t{0});
  const datamask::thrust_backend b;
  const auto ds = b.make_dataset(prob.embeddings, std::span<const double>(prep.inv_norms),
                                 std::span<const double>(prep.sq_norms), std::span<const datamask::id_t>(prep.ids));
  const auto p = b.to_device(std::span<const double>(hp));
  const auto kept = b.to_device(std::span<const index_t>(all));
  const datamask::pairwise_similarity pw;
  std::vector<index_t> rows;
  line("read-out on the host: datamask::read_out",
       median_ms(3, [&] { rows = datamask::read_out(hp, prep.ids, all, s); }), 8.0 * static_cast<double>(n));
  const datamask::subset_view<float> sv{prob.embeddings, prep.inv_norms.data(), prep.sq_norms.data(),
                                        datamask::index_view(std::span<const index_t>(rows)), {}, 0};
  double fh = 0.0;
  line("read-out on the host: pairwise term of S rows", median_ms(3, [&] { fh = pw(sv); }),
       static_cast<double>(s * d) * 4.0);
  std::vector<index_t> positive;
  for (index_t i = 0; i < n; ++i) {
    if (hp[i] > 0.0) positive.push_back(i);
  }
  const auto pos = b.to_device(std::span<const index_t>(positive));
  line("read-out on the device: top_rows of the positive rows",
       median_ms(3, [&] { rows = b.top_rows(p, ds, pos, s); }), 8.0 * static_cast<double>(positive.size()));
  line("  (top_rows of every row)", median_ms(3, [&] { (void)b.top_rows(p, ds, kept, s); }), 8.0 * static_cast<double>(n));
  const auto subset = b.to_device(std::span<const index_t>(rows));
  std::vector<double> out(1);
  line("read-out on the device: pairwise term of S rows",
       median_ms(3, [&] { b.evaluate(pw, ds, subset, 1, s, kept, out); }), static_cast<double>(s * d) * 4.0);
  std::printf("  (pairwise term: host %.17g, device %.17g)\n", fh, out[0]);
  line("read-out on the device: gather_sum of S values",
       median_ms(3, [&] { b.gather_sum(p, subset, 1, s, out); }), 16.0 * static_cast<double>(s));
  // As the continuous learner runs a tracked read-out: the positive rows by keep_if, the S
  // largest kept on the device, then the pairwise term and the quality sum of them.
  auto exec = b.make_executor(ds);
  const double* pd = datamask::thrust_backend::data(p);
  line("tracked read-out as the learner runs it: keep_if, largest, evaluate, gather_sum",
       median_ms(3, [&] {
         auto scope = exec.scope();
         index_t* pos_rows = scope.scratch<index_t>(n);
         const index_t count = scope.keep_if(n, datamask::detail::continuous::positive_at{pd}, pos_rows);
         const auto top = b.largest(pd, ds, static_cast<const index_t*>(pos_rows), count, s);
         b.evaluate(pw, ds, top, 1, s, kept, out);
         b.gather_sum(p, top, 1, s, out);
       }),
       8.0 * static_cast<double>(n) + static_cast<double>(s * d) * 4.0);
  // A polish round's choice of its 32 + 32 candidates (`polish_ranking`), after a refresh.
  const auto relaxed = [&](exec_t& scope, const double* at, double* grad) {
    datamask::relax_view<float> v = b.relaxation_view(ds);
    v.p = std::span<const double>(at, static_cast<std::size_t>(n));
    v.total = static_cast<double>(s);
    return pw.relax(scope, v, grad);
  };
  datamask::polish_ranking rank(b, ds, exec, relaxed, n, datamask::thrust_backend::data(kept), n, nullptr);
  rank.start(rows);
  line("polish ranking: refresh (the relaxation's gradient at the selection)", median_ms(3, [&] { rank.refresh(); }),
       2.0 * static_cast<double>(n * d) * 4.0);
  line("polish ranking: one round's choice, best_outside(32) and worst_inside(32)",
       median_ms(3, [&] {
         (void)rank.best_outside(32);
         (void)rank.worst_inside(32);
       }),
       16.0 * static_cast<double>(n));
}

/// DiSF's two O(n d^2) passes (its relaxation's iteration is one of each), with their FP64 rates:
/// medians of 3 (each pass takes about a second at 10^6 x 768).
void time_disf(exec_t& exec, const datamask::matrix_view<const float>& x, report_line& line) {
  const index_t n = x.rows;
  const index_t d = x.cols;
  double* w = exec.scratch<double>(n);
  double* mu = exec.scratch<double>(d);
  double* g = exec.scratch<double>(d * d);
  double* out = exec.scratch<double>(n);
  exec.for_each(n, datamask::ops::fill{w, 1.0 / static_cast<double>(n)});
  exec.for_each(d, datamask::ops::fill{mu, 0.0});
  exec.for_each(d * d, datamask::ops::fill{g, 1e-3});
  const double bytes = static_cast<double>(n * d) * 4.0;
  const double half = static_cast<double>(n) * static_cast<double>(d) * static_cast<double>(d + 1) / 2.0;
  const double ms_scatter = median_ms(3, [&] { exec.scatter(x, mu, w, g); });
  line("DiSF scatter X^T diag(w) X", ms_scatter, bytes);
  std::printf("  %.1f GFLOP/s in double (n d (d + 1) / 2 multiply-adds)\n", 2.0 * half / (ms_scatter * 1e6));
  const double ms_quad = median_ms(3, [&] { exec.quadratic_forms(x, mu, g, out); });
  line("DiSF quadratic_forms (x_i - mu)^T G (x_i - mu)", ms_quad, bytes);
  std::printf("  %.1f GFLOP/s in double (n d^2 multiply-adds)\n",
              2.0 * static_cast<double>(n) * static_cast<double>(d) * static_cast<double>(d) / (ms_quad * 1e6));
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("datamask_gpu_passes: no CUDA device");
    return 77;
  }
  const index_t n = argc > 1 ? std::atoll(argv[1]) : 1000000;
  const index_t d = argc > 2 ? std::atoll(argv[2]) : 768;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 10;
  if (n < 16 || d < 1 || repeats < 1) {
    std::fprintf(stderr, "datamask_gpu_passes: rows >= 16, dims >= 1 and repeats >= 1, found %lld %lld %d\n",
                 static_cast<long long>(n), static_cast<long long>(d), repeats);
    return 2;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s; block %lld x %lld float (%.2f GB); median of %d\n", prop.name, static_cast<long long>(n),
              static_cast<long long>(d), static_cast<double>(n * d) * 4e-9, repeats);

  thrust::device_vector<float> xs(static_cast<std::size_t>(n * d));
  thrust::transform(thrust::counting_iterator<index_t>(0), thrust::counting_iterator<index_t>(n * d), xs.begin(),
                    hashed_value{12345});
  const datamask::matrix_view<const float> x(thrust::raw_pointer_cast(xs.data()), n, d);
  exec_t exec;
  double* inv = exec.scratch<double>(n);
  double* sq = exec.scratch<double>(n);
  exec.for_each(n, row_norms<float>{x, inv, sq});
  report_line line;
  time_products(exec, x, inv, repeats, line);
  std::printf("(checksum %.6g)\n", time_ascent(exec, x, inv, sq, repeats, line));
  std::printf("(checksum %.6g)\n", time_float16(exec, x, repeats, line));
  time_read_out(x, line);
  if (argc <= 4 || std::string(argv[4]) != "no-disf") time_disf(exec, x, line);
  return 0;
}
