// SPDX-License-Identifier: Apache-2.0
// 16-bit embedding elements (datamask/core/half.hpp): every binary16 and bfloat16 value widens
// exactly (against the value each bit pattern denotes, computed in double), rounding to them is to
// nearest even, the host executor's passes and the learners' whole runs over a 16-bit block give
// the bits of the float32 block holding the same values, and .npy files of either are read so.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <datamask/io/npy.hpp>

#include "helpers.hpp"

using datamask::bfloat16;
using datamask::float16;
using datamask::index_t;

namespace {

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

/// The value a binary16 pattern denotes, from the standard's definition (NaN for NaNs).
double half_value(std::uint16_t h) {
  const int sign = (h >> 15) != 0 ? -1 : 1;
  const int exp = (h >> 10) & 0x1F;
  const int mant = h & 0x3FF;
  if (exp == 0x1F) return mant == 0 ? sign * HUGE_VAL : std::nan("");
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

/// The value a bfloat16 pattern denotes: sign, 8 exponent bits, 7 mantissa bits.
double bfloat16_value(std::uint16_t h) {
  const int sign = (h >> 15) != 0 ? -1 : 1;
  const int exp = (h >> 7) & 0xFF;
  const int mant = h & 0x7F;
  if (exp == 0xFF) return mant == 0 ? sign * HUGE_VAL : std::nan("");
  if (exp == 0) return sign * std::ldexp(mant, -133);
  return sign * std::ldexp(128 + mant, exp - 134);
}

/// Whether `h` is the nearest pattern to x among the finite neighbours of the format, ties to
/// the even mantissa: |x - value(h)| <= |x - value(h +- 1)|, strictly unless h is even.
template <class Value>
bool nearest_even(double x, std::uint16_t h, Value value) {
  const double v = value(h);
  if (std::isinf(v)) return true;  // overflow: checked by the caller
  for (int step : {-1, 1}) {
    const int hn = static_cast<int>(h & 0x7FFF) + step;
    if (hn < 0 || hn > 0x7FFF) continue;
    const double vn = value(static_cast<std::uint16_t>((h & 0x8000) | hn));
    if (std::isnan(vn) || std::isinf(vn)) continue;
    const double dist = std::abs(x - v);
    const double dn = std::abs(x - vn);
    if (dn < dist || (dn == dist && (h & 1) != 0)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("every float16 and bfloat16 pattern widens to the value it denotes", "[half]") {
  std::vector<float16> halves(65536);
  std::vector<bfloat16> brains(65536);
  for (std::uint32_t h = 0; h < 65536; ++h) {
    halves[h].bits = static_cast<std::uint16_t>(h);
    brains[h].bits = static_cast<std::uint16_t>(h);
  }
  std::vector<float> wide(65536);
  std::vector<float> wide_b(65536);
  datamask::widen(halves.data(), 13, wide.data());  // a tail after 8 values
  datamask::widen(halves.data() + 13, 65536 - 13, wide.data() + 13);  // F16C where this CPU has it
  datamask::widen(brains.data(), 65536, wide_b.data());
  index_t wrong = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const double v = half_value(bits);
    const float scalar = halves[h];
    if (std::isnan(v)) {
      wrong += !(std::isnan(scalar) && std::isnan(wide[h]));
    } else {
      wrong += !(static_cast<double>(scalar) == v && std::signbit(scalar) == std::signbit(v) &&
                 std::bit_cast<std::uint32_t>(wide[h]) == std::bit_cast<std::uint32_t>(scalar));
    }
    const double vb = bfloat16_value(bits);
    const float scalar_b = brains[h];
    if (std::isnan(vb)) {
      wrong += !(std::isnan(scalar_b) && std::isnan(wide_b[h]));
    } else {
      wrong += !(static_cast<double>(scalar_b) == vb && std::signbit(scalar_b) == std::signbit(vb) &&
                 std::bit_cast<std::uint32_t>(wide_b[h]) == std::bit_cast<std::uint32_t>(scalar_b));
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("rounding to float16 and bfloat16 is to nearest, ties to even", "[half]") {
  dmtest::rng r(11);
  index_t wrong = 0;
  // Every finite pattern round-trips; midpoints between neighbours go to the even one.
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const double v = half_value(bits);
    if (!std::isnan(v)) wrong += float16::from(static_cast<float>(v)).bits != bits;
    const double vb = bfloat16_value(bits);
    if (!std::isnan(vb)) wrong += bfloat16::from(static_cast<float>(vb)).bits != bits;
  }
  for (std::uint32_t h = 0; h + 1 < 0x7C00; ++h) {
    const double mid = (half_value(static_cast<std::uint16_t>(h)) + half_value(static_cast<std::uint16_t>(h + 1))) / 2;
    wrong += float16::from(static_cast<float>(mid)).bits != ((h & 1) == 0 ? h : h + 1);
  }
  for (int t = 0; t < 200000; ++t) {
    // Values over the float16 range and beyond (log-uniform), both signs.
    const double x = (r.uniform() < 0.5 ? -1 : 1) * std::exp2(-30 + 50 * r.uniform());
    const auto xf = static_cast<float>(x);
    const std::uint16_t h = float16::from(xf).bits;
    if (std::abs(xf) >= 65520.0f) {
      wrong += (h & 0x7FFF) != 0x7C00;  // past the largest finite half's rounding range: infinity
    } else {
      wrong += !nearest_even(xf, h, half_value);
    }
    wrong += !nearest_even(xf, bfloat16::from(xf).bits, bfloat16_value);
  }
  CHECK(wrong == 0);
  CHECK(std::isnan(static_cast<float>(float16::from(std::nanf("")))));
  CHECK(std::isnan(static_cast<float>(bfloat16::from(std::nanf("")))));
  // bfloat16's ties (to the even top half), overflow past its largest finite value, and a NaN
  // whose payload lies in the dropped half only.
  const auto brain = [](std::uint32_t bits) { return bfloat16::from(std::bit_cast<float>(bits)).bits; };
  CHECK(brain(0x3F808000u) == 0x3F80u);
  CHECK(brain(0x3F818000u) == 0x3F82u);
  CHECK(brain(0x3F808001u) == 0x3F81u);
  CHECK(brain(0x7F7FFFFFu) == 0x7F80u);
  CHECK(brain(0x7F7F7FFFu) == 0x7F7Fu);
  CHECK(brain(0xFF800000u) == 0xFF80u);
  CHECK(std::isnan(static_cast<float>(bfloat16{brain(0x7F800001u)})));
}

namespace {

/// A random n x d block in T and the float32 block of the same values.
template <class T>
struct twin_blocks {
  std::vector<T> low;
  std::vector<float> wide;
  twin_blocks(index_t n, index_t d, std::uint64_t seed) {
    dmtest::rng r(seed);
    for (index_t k = 0; k < n * d; ++k) {
      low.push_back(T::from(static_cast<float>(r.normal())));
      wide.push_back(low.back());
    }
  }
};

/// `stride`: elements between rows (>= d: rows that are a slice of wider ones).
template <class T>
void check_passes_match_float(index_t n, index_t d, index_t stride) {
  const twin_blocks<T> b(n, stride, static_cast<std::uint64_t>(n * 131 + d));
  const datamask::matrix_view<const T> xl(b.low.data(), n, d, stride);
  const datamask::matrix_view<const float> xw(b.wide.data(), n, d, stride);
  dmtest::rng r(5);
  std::vector<double> w(static_cast<std::size_t>(n));
  for (auto& v : w) v = r.uniform() < 0.3 ? 0.0 : r.uniform();  // zero weights are skipped
  std::vector<double> s(static_cast<std::size_t>(d));
  std::vector<double> mu(static_cast<std::size_t>(d));
  std::vector<double> g(static_cast<std::size_t>(d * d));
  for (auto& v : s) v = r.normal();
  for (auto& v : mu) v = 0.1 * r.normal();
  for (auto& v : g) v = r.normal();
  datamask::host_executor exec(2);
  auto same = [](const std::vector<double>& a, const std::vector<double>& c) {
    return std::equal(a.begin(), a.end(), c.begin(), c.end(), same_bits);
  };
  std::vector<double> lo(static_cast<std::size_t>(d));
  std::vector<double> hi(static_cast<std::size_t>(d));
  exec.column_sums(xl, w.data(), lo.data());
  exec.column_sums(xw, w.data(), hi.data());
  CHECK(same(lo, hi));
  lo.assign(static_cast<std::size_t>(n), 0.0);
  hi.assign(static_cast<std::size_t>(n), 0.0);
  exec.row_dots(xl, s.data(), lo.data());
  exec.row_dots(xw, s.data(), hi.data());
  CHECK(same(lo, hi));
  // Rows of a list, in any order and repeated (the greedy's gains): each row's value of the pass
  // over the whole block, for either element; a count that is not a multiple of the kernel's 4.
  std::vector<index_t> list(static_cast<std::size_t>(n / 2 + 3));
  for (auto& i : list) i = r.below(n);
  std::vector<double> lo_list(list.size());
  std::vector<double> hi_list(list.size());
  datamask::row_dots_of(xl, list.data(), static_cast<index_t>(list.size()), s.data(), lo_list.data());
  datamask::row_dots_of(xw, list.data(), static_cast<index_t>(list.size()), s.data(), hi_list.data());
  for (std::size_t t = 0; t < list.size(); ++t) {
    CHECK(same_bits(lo_list[t], hi[static_cast<std::size_t>(list[t])]));
    CHECK(same_bits(hi_list[t], hi[static_cast<std::size_t>(list[t])]));
  }
  // The weighted sums of the listed rows (a selection's evaluation): each element's terms in
  // list order, as a plain loop adds them.
  std::vector<double> sums_ref(static_cast<std::size_t>(d), 0.5);
  for (index_t i : list) {
    for (index_t j = 0; j < d; ++j) sums_ref[static_cast<std::size_t>(j)] += static_cast<double>(xw(i, j)) * w[static_cast<std::size_t>(i)];
  }
  std::vector<double> sums_lo(static_cast<std::size_t>(d), 0.5);
  std::vector<double> sums_hi(static_cast<std::size_t>(d), 0.5);
  datamask::row_sums_of(xl, list.data(), static_cast<index_t>(list.size()), w.data(), sums_lo.data());
  datamask::row_sums_of(xw, list.data(), static_cast<index_t>(list.size()), w.data(), sums_hi.data());
  CHECK(same(sums_lo, sums_ref));
  CHECK(same(sums_hi, sums_ref));
  // A double block of the same values takes the listed rows' plain loops (the kernels read float
  // and 16-bit elements only): the same bits.
  const std::vector<double> wide64(b.wide.begin(), b.wide.end());
  const datamask::matrix_view<const double> xd(wide64.data(), n, d, stride);
  std::vector<double> d_list(list.size());
  datamask::row_dots_of(xd, list.data(), static_cast<index_t>(list.size()), s.data(), d_list.data());
  for (std::size_t t = 0; t < list.size(); ++t) CHECK(same_bits(d_list[t], hi[static_cast<std::size_t>(list[t])]));
  std::vector<double> sums_d(static_cast<std::size_t>(d), 0.5);
  datamask::row_sums_of(xd, list.data(), static_cast<index_t>(list.size()), w.data(), sums_d.data());
  CHECK(same(sums_d, sums_ref));
  exec.quadratic_forms(xl, mu.data(), g.data(), lo.data());
  exec.quadratic_forms(xw, mu.data(), g.data(), hi.data());
  CHECK(same(lo, hi));
  lo.assign(static_cast<std::size_t>(d * d), 0.0);
  hi.assign(static_cast<std::size_t>(d * d), 0.0);
  exec.scatter(xl, mu.data(), w.data(), lo.data());
  exec.scatter(xw, mu.data(), w.data(), hi.data());
  CHECK(same(lo, hi));
  // The generic passes (a device's), each element widened where it is read.
  lo.assign(static_cast<std::size_t>(d), 0.0);
  hi.assign(static_cast<std::size_t>(d), 0.0);
  datamask::dense::column_sums(exec, xl, w.data(), lo.data());
  datamask::dense::column_sums(exec, xw, w.data(), hi.data());
  CHECK(same(lo, hi));
  lo.assign(static_cast<std::size_t>(n), 0.0);
  hi.assign(static_cast<std::size_t>(n), 0.0);
  datamask::dense::row_dots(exec, xl, s.data(), lo.data());
  datamask::dense::row_dots(exec, xw, s.data(), hi.data());
  CHECK(same(lo, hi));
  // The executor's passes over the float32 block (AVX2 kernels where the CPU has them): the
  // generic passes' bits.
  std::vector<double> generic(static_cast<std::size_t>(d));
  hi.assign(static_cast<std::size_t>(d), 0.0);
  exec.column_sums(xw, w.data(), hi.data());
  datamask::dense::column_sums(exec, xw, w.data(), generic.data());
  CHECK(same(hi, generic));
  generic.assign(static_cast<std::size_t>(n), 0.0);
  hi.assign(static_cast<std::size_t>(n), 0.0);
  exec.row_dots(xw, s.data(), hi.data());
  datamask::dense::row_dots(exec, xw, s.data(), generic.data());
  CHECK(same(hi, generic));
}

}  // namespace

TEST_CASE("the host executor's passes give the generic passes' bits, and over a 16-bit block the float32 block's", "[half][exec]") {
  // Below and above `float_product_rows` (double and float d x d products); d with and without
  // a tail after the 8-wide conversions and the four-lane dots.
  for (index_t n : {index_t{1}, index_t{777}, index_t{5000}}) {
    for (index_t d : {index_t{1}, index_t{5}, index_t{40}, index_t{44}, index_t{131}}) {
      CAPTURE(n, d);
      check_passes_match_float<float16>(n, d, d);
      check_passes_match_float<bfloat16>(n, d, d);
      check_passes_match_float<float16>(n, d, d + 3);
    }
  }
}

namespace {

/// The host's SIMD kernels at level `at` over an n x d block of T (rows `stride` apart) against
/// plain loops in double: X^T w over a range of rows in row order (rows with w_i = 0 skipped, as
/// `dense::column_sums` skips them), X s by `dense::lane_dot`, and both over rows listed out of
/// order. Every level must give these bits.
template <class T>
void check_simd_level(datamask::detail::simd_rows::level at, index_t n, index_t d, index_t stride) {
  namespace simd = datamask::detail::simd_rows;
  dmtest::rng r(static_cast<std::uint64_t>(n * 7919 + d));
  std::vector<T> x;
  std::vector<float> f;  // the same values as floats
  for (index_t k = 0; k < n * stride; ++k) {
    const auto v = static_cast<float>(r.normal());
    if constexpr (std::is_same_v<T, float>) {
      x.push_back(v);
    } else {
      x.push_back(T::from(v));
    }
    f.push_back(static_cast<float>(x.back()));
  }
  const datamask::matrix_view<const T> xv(x.data(), n, d, stride);
  std::vector<double> w(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) w[static_cast<std::size_t>(i)] = i % 5 == 3 ? 0.0 : r.normal();
  std::vector<double> s(static_cast<std::size_t>(d));
  for (auto& v : s) v = r.normal();
  auto at_ = [&](index_t i, index_t j) { return static_cast<double>(f[static_cast<std::size_t>(i * stride + j)]); };
  // X^T w over rows [first, n), added to a nonzero start.
  const index_t first = n / 3;
  std::vector<double> ref(static_cast<std::size_t>(d), 0.25);
  for (index_t i = first; i < n; ++i) {
    if (w[static_cast<std::size_t>(i)] == 0.0) continue;
    for (index_t j = 0; j < d; ++j) ref[static_cast<std::size_t>(j)] += at_(i, j) * w[static_cast<std::size_t>(i)];
  }
  std::vector<double> acc(static_cast<std::size_t>(d), 0.25);
  simd::accumulate(xv, first, n, w.data(), acc.data(), at);
  for (index_t j = 0; j < d; ++j) CHECK(same_bits(acc[static_cast<std::size_t>(j)], ref[static_cast<std::size_t>(j)]));
  // X s over rows [first, n).
  std::vector<double> out(static_cast<std::size_t>(n), -1.0);
  simd::dots(xv, first, n, s.data(), out.data(), at);
  for (index_t i = first; i < n; ++i) {
    const double want = datamask::dense::lane_dot(f.data() + i * stride, s.data(), d);
    CHECK(same_bits(out[static_cast<std::size_t>(i)], want));
  }
  // Both over rows listed out of order (a stochastic round's sample; a selection's rows).
  const std::vector<index_t> list = r.distinct(n, n / 2 + 1);
  std::vector<double> listed(list.size());
  simd::dots(xv, list.data(), static_cast<index_t>(list.size()), s.data(), listed.data(), at);
  for (std::size_t t = 0; t < list.size(); ++t) {
    CHECK(same_bits(listed[t], datamask::dense::lane_dot(f.data() + list[t] * stride, s.data(), d)));
  }
  std::vector<double> sums_ref(static_cast<std::size_t>(d), 0.5);
  for (index_t i : list) {
    for (index_t j = 0; j < d; ++j) sums_ref[static_cast<std::size_t>(j)] += at_(i, j) * w[static_cast<std::size_t>(i)];
  }
  std::vector<double> sums(static_cast<std::size_t>(d), 0.5);
  simd::sums(xv, list.data(), static_cast<index_t>(list.size()), w.data(), sums.data(), at);
  for (index_t j = 0; j < d; ++j) CHECK(same_bits(sums[static_cast<std::size_t>(j)], sums_ref[static_cast<std::size_t>(j)]));
}

}  // namespace

TEST_CASE("every SIMD level of the host's passes this CPU runs gives the plain loops' bits", "[half][exec]") {
  namespace simd = datamask::detail::simd_rows;
  // AVX2, then AVX-512 where the CPU has it; d below, at and between the 32-column stripes, the
  // eight-wide steps and the four-wide tails; row counts with and without a partial group.
  int levels = 0;
  for (auto at : {simd::level::avx2, simd::level::avx512}) {
    if (simd::best() < at) continue;
    ++levels;
    for (index_t n : {index_t{1}, index_t{7}, index_t{61}, index_t{300}}) {
      for (index_t d : {index_t{1}, index_t{7}, index_t{12}, index_t{32}, index_t{45}, index_t{72}, index_t{256}}) {
        CAPTURE(static_cast<int>(at), n, d);
        check_simd_level<float>(at, n, d, d);
        check_simd_level<float16>(at, n, d, d);
        check_simd_level<bfloat16>(at, n, d, d);
        check_simd_level<float16>(at, n, d, d + 5);
      }
    }
  }
  if (levels < 2) WARN("this CPU runs " << levels << " of the two SIMD levels: the others went untested here");
}

namespace {

/// A clustered n x d block in T, the float32 block of the same values, quality scores and ids.
template <class T>
struct twin_problem {
  twin_blocks<T> x;
  std::vector<double> q;
  index_t n;
  index_t d;
  twin_problem(index_t rows, index_t cols, std::uint64_t seed) : x(0, cols, seed), n(rows), d(cols) {
    dmtest::rng r(seed);
    std::vector<double> centres(static_cast<std::size_t>(6 * d));
    for (auto& c : centres) c = 2.0 * r.normal();
    for (index_t i = 0; i < n; ++i) {
      const index_t c = r.below(6);
      for (index_t j = 0; j < d; ++j) {
        x.low.push_back(T::from(static_cast<float>(centres[static_cast<std::size_t>(c * d + j)] + r.normal())));
        x.wide.push_back(x.low.back());
      }
      q.push_back(r.uniform());
    }
  }
  template <class U>
  datamask::problem<U> problem(const std::vector<U>& values) const {
    datamask::problem<U> p;
    p.embeddings = datamask::make_matrix_view(values.data(), n, d);
    p.quality.push_back(datamask::quality_column{std::span<const double>(q), 1.0});
    return p;
  }
};

/// The policy-gradient learner (options `o`), the greedies `methods` (S = `count`) and the
/// certificate of pg's selection on f over a 16-bit block: its float32 twin's, bit for bit.
template <class T, class D>
void check_pg_greedy_certify(const datamask::problem<T>& low, const datamask::problem<float>& wide, const D& objective,
                             const datamask::settings& o, std::initializer_list<datamask::greedy_method> methods,
                             index_t count) {
  const auto pl = datamask::learner<>(o).select(low, objective);
  const auto pw = datamask::learner<>(o).select(wide, objective);
  CHECK(pl.rows == pw.rows);
  CHECK(same_bits(pl.objective, pw.objective));
  const datamask::objective_function<T, D> fl(low, objective, 0.5);
  const datamask::objective_function<float, D> fw(wide, objective, 0.5);
  for (auto method : methods) {
    datamask::greedy_options g;
    g.method = method;
    const auto gl = datamask::greedy_select(fl, count, g);
    const auto gw = datamask::greedy_select(fw, count, g);
    CHECK(gl.rows == gw.rows);
    CHECK(same_bits(gl.objective, gw.objective));
  }
  // The certificate of a selection: the same report.
  datamask::certify_settings cs;
  cs.random_subsets = 4;
  const auto rl = datamask::certify(fl, std::span<const index_t>(pl.rows), cs);
  const auto rw = datamask::certify(fw, std::span<const index_t>(pw.rows), cs);
  CHECK(rl.certified == rw.certified);
  CHECK(rl.reason == rw.reason);
  CHECK(same_bits(rl.bound, rw.bound));
  CHECK(same_bits(rl.random_mean, rw.random_mean));
}

/// The continuous learner's defaults (ratio 0.1) on a 16-bit block: its float32 twin's rows, f
/// and history, bit for bit.
template <class T, class D>
void check_continuous(const datamask::problem<T>& low, const datamask::problem<float>& wide, const D& objective) {
  datamask::continuous_options c;
  c.common.ratio = 0.1;
  c.common.threads = 2;
  const auto cl = datamask::continuous_learner(c).select(low, objective);
  const auto cw = datamask::continuous_learner(c).select(wide, objective);
  CHECK(cl.rows == cw.rows);
  CHECK(same_bits(cl.objective, cw.objective));
  REQUIRE(cl.history.size() == cw.history.size());
  for (std::size_t s = 0; s < cl.history.size(); ++s) CHECK(cl.history[s].reward_mean == cw.history[s].reward_mean);
}

template <class T, class D>
void check_learners_match_float(const D& objective) {
  const twin_problem<T> t(700, 24, 9);
  const auto low = t.problem(t.x.low);
  const auto wide = t.problem(t.x.wide);
  check_continuous(low, wide, objective);
  datamask::settings o;
  o.ratio = 0.1;
  o.steps = 20;
  o.threads = 2;
  check_pg_greedy_certify(low, wide, objective, o, {datamask::greedy_method::lazy, datamask::greedy_method::stochastic},
                          70);
}

}  // namespace

TEST_CASE("the learners and the greedies select on a 16-bit block what they select on its float32 twin", "[half][learner]") {
  // Every pass and every host evaluation reads a 16-bit value as the float it is, so the runs
  // are the float32 block's bit for bit: the same rows, the same f, the same history.
  check_learners_match_float<float16>(datamask::pairwise_similarity{});
  check_learners_match_float<bfloat16>(datamask::pairwise_similarity{});
  check_learners_match_float<float16>(datamask::disf{});
}

TEMPLATE_TEST_CASE("facility location and its kNN graphs on a 16-bit block: the float32 twin's values, rows and graphs",
                   "[half][facility]", float16, bfloat16) {
  // Facility location computes a 16-bit block in float (its unit rows, or the rows widened), and
  // the kNN builders' products too, so every value is the float32 block's.
  const twin_problem<TestType> t(400, 16, 21);
  const auto low = t.problem(t.x.low);
  const auto wide = t.problem(t.x.wide);
  for (auto kernel : {datamask::similarity_kernel::cosine, datamask::similarity_kernel::cosine2,
                      datamask::similarity_kernel::dot, datamask::similarity_kernel::rbf}) {
    CAPTURE(static_cast<int>(kernel));
    datamask::facility_location fl;
    fl.kernel = kernel;
    fl.gamma = 0.05;
    fl.cache_bytes = kernel == datamask::similarity_kernel::dot ? 0 : fl.cache_bytes;  // both greedy paths
    datamask::settings o;
    o.ratio = 0.1;
    o.steps = 10;
    o.threads = 2;
    o.credit = datamask::credit_mode::item;  // the batched values and marginals
    check_pg_greedy_certify(low, wide, fl, o, {datamask::greedy_method::naive, datamask::greedy_method::lazy}, 30);
  }
  for (auto build : {datamask::knn_build::exact, datamask::knn_build::clustered}) {
    datamask::knn_settings ks;
    ks.neighbors = 8;
    ks.build = build;
    ks.threads = 2;
    const datamask::knn_graph gl = datamask::build_knn_graph(low, ks);
    const datamask::knn_graph gw = datamask::build_knn_graph(wide, ks);
    CHECK(gl.ids == gw.ids);
    CHECK(gl.sims == gw.sims);
    if (build == datamask::knn_build::clustered) {
      CHECK(datamask::knn_recall(low, gl, ks, 50) == datamask::knn_recall(wide, gw, ks, 50));
      continue;
    }
    // The term reads the graph, not the rows: this checks the learner's own passes (quality, the
    // polish's ranking) over the 16-bit block.
    check_continuous(low, wide, datamask::sparse_facility_location{std::make_shared<const datamask::knn_graph>(gl)});
  }
}

TEST_CASE("a float16 or bfloat16 .npy file is read as the floats it holds, its NaNs are named", "[half][npy]") {
  // Values across both formats' ranges, subnormals included; a `<V2` file is bfloat16.
  std::vector<float> values;
  for (std::uint32_t h = 0; h < 65536; h += 7) {
    const float f = float16{static_cast<std::uint16_t>(h)};
    if (std::isfinite(f)) values.push_back(f);
  }
  const auto cols = static_cast<index_t>(values.size() / 8);
  values.resize(static_cast<std::size_t>(8 * cols));
  const std::vector<std::int64_t> shape{8, cols};
  const auto check = [&](auto low, datamask::io::npy_dtype dtype, datamask::element_kind kind) {
    using T = decltype(low);
    std::vector<T> stored;
    std::vector<float> want;
    for (float v : values) {
      stored.push_back(T::from(v));
      want.push_back(stored.back());
    }
    const std::string bytes = datamask::io::npy_bytes(std::span<const T>(stored), std::span<const std::int64_t>(shape));
    const auto file = datamask::io::npy_file::from_bytes(std::vector<unsigned char>(bytes.begin(), bytes.end()), "e.npy");
    CHECK(file.dtype() == dtype);
    std::vector<float> got(values.size());
    file.read_rows(0, 8, got.data());
    CHECK(std::equal(got.begin(), got.end(), want.begin(), [](float a, float b) {
      return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
    }));
    CHECK_NOTHROW(datamask::check_finite_values("e.npy", file.data_bytes(), kind, cols, 1));
    stored[static_cast<std::size_t>(3 * cols + 5)] = T::from(std::nanf(""));
    const std::string bad = datamask::io::npy_bytes(std::span<const T>(stored), std::span<const std::int64_t>(shape));
    const auto nan_file = datamask::io::npy_file::from_bytes(std::vector<unsigned char>(bad.begin(), bad.end()), "e.npy");
    CHECK_THROWS_WITH(datamask::check_finite_values("e.npy", nan_file.data_bytes(), kind, cols, 1),
                      Catch::Contains("row 3, column 5 is NaN"));
  };
  check(float16{}, datamask::io::npy_dtype::float16, datamask::element_kind::float16);
  check(bfloat16{}, datamask::io::npy_dtype::bfloat16, datamask::element_kind::bfloat16);
  // bfloat16's own exponent: 2^121 (float16's infinity pattern) and its largest finite value pass,
  // its infinity is named as such.
  const auto finite_check = [](const std::vector<std::uint16_t>& bits) {
    const std::span<const unsigned char> bytes(reinterpret_cast<const unsigned char*>(bits.data()), 2 * bits.size());
    datamask::check_finite_values("b.npy", bytes, datamask::element_kind::bfloat16, 2, 1);
  };
  CHECK_NOTHROW(finite_check({0x7C00u, 0x7F7Fu, 0xFC00u, 0x0001u}));
  CHECK_THROWS_WITH(finite_check({0x3F80u, 0x7F80u}), Catch::Contains("row 0, column 1 is infinite"));
  CHECK_THROWS_WITH(finite_check({0x3F80u, 0x3F80u, 0xFFC1u, 0u}), Catch::Contains("row 1, column 0 is NaN"));
}
