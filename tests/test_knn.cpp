// SPDX-License-Identifier: Apache-2.0
// The kNN graph (objectives/knn/graph.hpp): the exact builder against brute force in double for each
// kernel, ties to the smaller id, independence of tiles and threads; the loader's round trip and
// its refusals of bad files. The clustered builder (objectives/knn/clustered.hpp): the exact graph when
// every cluster is probed, the same graph on 1 and 2 threads, full and valid rows when the
// probed clusters hold fewer than K items, its settings checked; the recall estimate against a
// count by hand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <datamask/datamask.hpp>
#include <datamask/io/npy.hpp>
#include <datamask/objectives/knn/clustered.hpp>
#include <datamask/io/knn_graph.hpp>
#include <datamask/objectives/knn/build.hpp>

#include "helpers.hpp"

namespace dm = datamask;
using dm::index_t;

namespace {

constexpr dm::similarity_kernel all_kernels[] = {dm::similarity_kernel::cosine, dm::similarity_kernel::cosine2,
                                                 dm::similarity_kernel::dot, dm::similarity_kernel::rbf};

dm::problem<double> rows_of(const std::vector<double>& x, index_t n, index_t d) {
  dm::problem<double> p;
  p.embeddings = dm::make_matrix_view(x.data(), n, d);
  return p;
}

/// Row v's K best (similarity in double from the definition, row), ties to the smaller row.
std::vector<std::pair<double, index_t>> brute_row(const std::vector<double>& x, index_t n, index_t d, index_t v,
                                                  index_t k, dm::similarity_kernel kern, double gamma) {
  std::vector<std::pair<double, index_t>> all;
  for (index_t j = 0; j < n; ++j) all.emplace_back(dmtest::ref_sim(x, d, v, j, kern, gamma), j);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  all.resize(static_cast<std::size_t>(k));
  return all;
}

struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    path = std::filesystem::temp_directory_path() / ("datamask_knn_" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
  std::string prefix(const std::string& name) const { return (path / name).string(); }
};

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

template <class I, class S>
void write_graph(const std::string& prefix, const std::vector<I>& ids, std::vector<std::int64_t> ids_shape,
                 const std::vector<S>& sims, std::vector<std::int64_t> sims_shape) {
  const auto [fi, fs] = dm::knn_graph_files(prefix);
  write(fi, dm::io::npy_bytes(std::span<const I>(ids), std::span<const std::int64_t>(ids_shape)));
  write(fs, dm::io::npy_bytes(std::span<const S>(sims), std::span<const std::int64_t>(sims_shape)));
}

/// The loader's error for these files: the message, checked to name `file`.
template <class I, class S>
std::string refusal(const temp_dir& t, const std::vector<I>& ids, std::vector<std::int64_t> ids_shape,
                    const std::vector<S>& sims, std::vector<std::int64_t> sims_shape, index_t n, bool sims_file) {
  const std::string prefix = t.prefix("bad");
  write_graph(prefix, ids, ids_shape, sims, sims_shape);
  const auto files = dm::knn_graph_files(prefix);
  try {
    (void)dm::load_knn_graph(prefix, n);
  } catch (const dm::invalid_input& e) {
    CHECK(e.input() == (sims_file ? files.second : files.first));
    return e.what();
  }
  FAIL("the graph was accepted");
  return {};
}

}  // namespace

TEST_CASE("the exact kNN graph matches brute force for each kernel", "[knn]") {
  const index_t n = 61;
  const index_t d = 5;
  const index_t k = 7;
  const auto x = dmtest::random_embeddings<double>(n, d, 11);
  for (auto kern : all_kernels) {
    dm::knn_settings s;
    s.neighbors = k;
    s.kernel = kern;
    s.gamma = 0.2;
    s.tile = 16;  // several tiles, the last one partial
    const dm::knn_graph g = dm::build_knn_graph(rows_of(x, n, d), s);
    REQUIRE(g.n == n);
    REQUIRE(g.k == k);
    for (index_t v = 0; v < n; ++v) {
      const auto want = brute_row(x, n, d, v, k, kern, s.gamma);
      for (index_t r = 0; r < k; ++r) {
        const double scale = std::max(1.0, std::abs(want[r].first));
        // The r-th similarity is the r-th largest; the row listed has that similarity.
        CHECK(std::abs(g.similarity(v, r) - want[r].first) <= 1e-5 * scale);
        CHECK(std::abs(dmtest::ref_sim(x, d, v, g.neighbor(v, r), kern, s.gamma) - want[r].first) <= 1e-5 * scale);
        if (r + 1 < k) CHECK(g.similarity(v, r) >= g.similarity(v, r + 1));
      }
      if (kern != dm::similarity_kernel::dot) CHECK(g.neighbor(v, 0) == v);  // itself, sim 1
    }
  }
}

TEST_CASE("the kNN graph breaks ties to the smaller id, whatever the tiles and threads", "[knn]") {
  // Integer rows with duplicates: every dot product is exact, so ties are exact.
  const index_t n = 40;
  const index_t d = 3;
  std::vector<double> x(static_cast<std::size_t>(n * d));
  for (index_t i = 0; i < n; ++i)
    for (index_t j = 0; j < d; ++j) x[i * d + j] = static_cast<double>(((i % 7) * (j + 2)) % 5) - 1.0;
  for (auto kern : {dm::similarity_kernel::dot, dm::similarity_kernel::rbf}) {
    dm::knn_settings s;
    s.neighbors = 9;
    s.kernel = kern;
    s.gamma = 0.5;
    s.tile = 6;
    s.threads = 1;
    const dm::knn_graph a = dm::build_knn_graph(rows_of(x, n, d), s);
    s.tile = 512;
    s.threads = 2;
    const dm::knn_graph b = dm::build_knn_graph(rows_of(x, n, d), s);
    CHECK(a.ids == b.ids);
    CHECK(a.sims == b.sims);
    for (index_t v = 0; v < n; ++v) {
      const auto want = brute_row(x, n, d, v, s.neighbors, kern, s.gamma);
      for (index_t r = 0; r < s.neighbors; ++r) CHECK(a.neighbor(v, r) == want[r].second);
    }
  }
}

TEST_CASE("the kNN graph skips no candidate that can enter: wide tiles, ties, each kernel", "[knn]") {
  // Integer rows, 8 distinct ones repeated: exact ties, and tiles wide enough that whole
  // chunks of candidates are skipped at once (detail::knn::chunk_below).
  const index_t n = 200;
  const index_t d = 3;
  std::vector<double> x(static_cast<std::size_t>(n * d));
  for (index_t i = 0; i < n; ++i)
    for (index_t j = 0; j < d; ++j) x[i * d + j] = static_cast<double>(((i % 8) * (j + 3)) % 7) - 3.0;
  for (auto kern : all_kernels) {
    dm::knn_settings s;
    s.neighbors = 30;
    s.kernel = kern;
    s.gamma = 0.5;
    s.tile = 5;  // narrower than a chunk
    s.threads = 1;
    const dm::knn_graph a = dm::build_knn_graph(rows_of(x, n, d), s);
    s.tile = 512;
    s.threads = 2;
    const dm::knn_graph b = dm::build_knn_graph(rows_of(x, n, d), s);
    CHECK(a.ids == b.ids);
    CHECK(a.sims == b.sims);
    if (kern != dm::similarity_kernel::dot && kern != dm::similarity_kernel::rbf) continue;  // products exact
    for (index_t v = 0; v < n; ++v) {
      const auto want = brute_row(x, n, d, v, s.neighbors, kern, s.gamma);
      for (index_t r = 0; r < s.neighbors; ++r) CHECK(b.neighbor(v, r) == want[r].second);
    }
  }
}

TEST_CASE("kNN graph settings are checked", "[knn]") {
  const auto x = dmtest::random_embeddings<double>(10, 3, 1);
  dm::knn_settings s;
  s.neighbors = 11;
  CHECK_THROWS_AS(dm::build_knn_graph(rows_of(x, 10, 3), s), dm::invalid_input);
  s.neighbors = 0;
  CHECK_THROWS_AS(dm::build_knn_graph(rows_of(x, 10, 3), s), dm::invalid_input);
  s.neighbors = 10;  // every item
  CHECK(dm::build_knn_graph(rows_of(x, 10, 3), s).ids.size() == 100);
}

TEST_CASE("a kNN graph loaded from .npy files: round trip, rows sorted", "[knn]") {
  const temp_dir t;
  const index_t n = 30;
  const auto x = dmtest::random_embeddings<double>(n, 4, 5);
  dm::knn_settings s;
  s.neighbors = 5;
  const dm::knn_graph g = dm::build_knn_graph(rows_of(x, n, 4), s);
  // Written with each row reversed: the loader sorts it back.
  std::vector<std::int64_t> ids;
  std::vector<float> sims;
  for (index_t v = 0; v < n; ++v) {
    for (index_t r = s.neighbors - 1; r >= 0; --r) {
      ids.push_back(g.neighbor(v, r));
      sims.push_back(g.similarity(v, r));
    }
  }
  write_graph(t.prefix("g"), ids, {n, s.neighbors}, sims, {n, s.neighbors});
  const dm::knn_graph l = dm::load_knn_graph(t.prefix("g"), n);
  CHECK(l.k == s.neighbors);
  CHECK(l.ids == g.ids);
  CHECK(l.sims == g.sims);
  CHECK(l.source.find("loaded from") != std::string::npos);
}

TEST_CASE("bad kNN graph files are refused, naming the file and the problem", "[knn]") {
  const temp_dir t;
  const index_t n = 4;
  const std::vector<std::int64_t> ids{0, 1, 1, 2, 2, 3, 3, 0};
  const std::vector<float> sims{1.f, .5f, 1.f, .5f, 1.f, .5f, 1.f, .5f};
  write_graph(t.prefix("ok"), ids, {n, 2}, sims, {n, 2});
  CHECK_NOTHROW(dm::load_knn_graph(t.prefix("ok"), n));
  auto with_id = [&](std::int64_t v) {
    auto b = ids;
    b[5] = v;
    return b;
  };
  CHECK_THAT(refusal(t, with_id(4), {n, 2}, sims, {n, 2}, n, false), Catch::Contains("outside [0, 4)"));
  CHECK_THAT(refusal(t, with_id(-1), {n, 2}, sims, {n, 2}, n, false), Catch::Contains("holds id -1"));
  CHECK_THAT(refusal(t, with_id(2), {n, 2}, sims, {n, 2}, n, false), Catch::Contains("twice"));
  CHECK_THAT(refusal(t, ids, {n, 2}, sims, {n, 2}, 5, false), Catch::Contains("expected 5"));
  CHECK_THAT(refusal(t, ids, {2 * n}, sims, {n, 2}, n, false), Catch::Contains("2-D"));
  CHECK_THAT(refusal(t, ids, {n, 2}, std::vector<float>(sims.begin(), sims.begin() + 4), {n, 1}, n, true),
             Catch::Contains("must match"));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    auto b = sims;
    b[3] = bad;
    CHECK_THAT(refusal(t, ids, {n, 2}, b, {n, 2}, n, true), Catch::Contains("finite"));
  }
  std::vector<double> huge(sims.begin(), sims.end());
  huge[2] = 1e300;
  CHECK_THAT(refusal(t, ids, {n, 2}, huge, {n, 2}, n, true), Catch::Contains("float range"));
  const std::vector<double> float_ids(ids.begin(), ids.end());
  CHECK_THAT(refusal(t, float_ids, {n, 2}, sims, {n, 2}, n, false), Catch::Contains("dtype"));
  CHECK_THAT(refusal(t, ids, {n, 2}, ids, {n, 2}, n, true), Catch::Contains("dtype"));
  CHECK_THROWS_WITH(dm::load_knn_graph(t.prefix("missing"), n), Catch::Contains("missing.ids.npy"));
  write(dm::knn_graph_files(t.prefix("junk")).first, "not numpy");
  write(dm::knn_graph_files(t.prefix("junk")).second, "not numpy");
  CHECK_THROWS_WITH(dm::load_knn_graph(t.prefix("junk"), n), Catch::Contains("junk.ids.npy"));
}

namespace {

/// Rows of d = 8 with four entries +-1 and four 0: every norm is 2, so unit rows (+-0.5) and
/// every product and similarity under every kernel are exact, and ties are many.
std::vector<double> exact_rows(index_t n) {
  const index_t d = 8;
  std::vector<double> x(static_cast<std::size_t>(n * d), 0.0);
  for (index_t i = 0; i < n; ++i) {
    for (index_t t = 0; t < 4; ++t) {
      const index_t j = (i * 3 + t * (1 + i % 5)) % d;
      double& v = x[static_cast<std::size_t>(i * d + j)];
      if (v == 0.0) v = ((i / 7 + t) % 3 == 0) ? -1.0 : 1.0;
    }
    double sq = 0.0;  // a repeated column leaves fewer than four entries: fill the first zeros
    for (index_t j = 0; j < d; ++j) sq += x[static_cast<std::size_t>(i * d + j)] != 0.0 ? 1.0 : 0.0;
    for (index_t j = 0; j < d && sq < 4.0; ++j) {
      double& v = x[static_cast<std::size_t>(i * d + j)];
      if (v == 0.0) {
        v = 1.0;
        sq += 1.0;
      }
    }
  }
  return x;
}

dm::knn_settings clustered(index_t k, dm::similarity_kernel kern, index_t clusters, index_t probes) {
  dm::knn_settings s;
  s.neighbors = k;
  s.kernel = kern;
  s.gamma = 0.3;
  s.build = dm::knn_build::clustered;
  s.clusters = clusters;
  s.probes = probes;
  return s;
}

}  // namespace

TEST_CASE("the clustered kNN graph probing every cluster is the exact graph, bit for bit", "[knn]") {
  const index_t n = 90;
  const auto x = exact_rows(n);
  for (auto kern : all_kernels) {
    dm::knn_settings s = clustered(11, kern, 7, 7);
    s.tile = 5;  // several tiles per cluster
    const dm::knn_graph a = dm::build_knn_graph(rows_of(x, n, 8), s);
    s.build = dm::knn_build::exact;
    s.tile = 512;
    const dm::knn_graph b = dm::build_knn_graph(rows_of(x, n, 8), s);
    CHECK(a.ids == b.ids);
    CHECK(a.sims == b.sims);
    CHECK(a.source.rfind("clustered, kernel ", 0) == 0);
    CHECK(a.source.find("C = 7, P = 7") != std::string::npos);
    CHECK(b.source.rfind("exact", 0) == 0);
  }
}

TEST_CASE("the clustered kNN graph is the same on 1 and 2 threads, its rows are valid", "[knn]") {
  const index_t n = 300;
  const index_t d = 6;
  const index_t k = 9;
  const auto x = dmtest::random_embeddings<double>(n, d, 5);
  for (auto kern : all_kernels) {
    dm::knn_settings s = clustered(k, kern, 20, 3);
    s.threads = 1;
    const dm::knn_graph a = dm::build_knn_graph(rows_of(x, n, d), s);
    s.threads = 2;
    const dm::knn_graph b = dm::build_knn_graph(rows_of(x, n, d), s);
    CHECK(a.ids == b.ids);
    CHECK(a.sims == b.sims);
    for (index_t v = 0; v < n; ++v) {
      for (index_t r = 0; r < k; ++r) {
        const index_t j = a.neighbor(v, r);
        REQUIRE(j >= 0);
        REQUIRE(j < n);
        const double want = dmtest::ref_sim(x, d, v, j, kern, s.gamma);
        CHECK(std::abs(a.similarity(v, r) - want) <= 1e-5 * std::max(1.0, std::abs(want)));
        if (r + 1 < k) CHECK(a.similarity(v, r) >= a.similarity(v, r + 1));
        for (index_t q = 0; q < r; ++q) CHECK(a.neighbor(v, q) != j);
      }
      if (kern != dm::similarity_kernel::dot) CHECK(a.neighbor(v, 0) == v);  // its own cluster is probed
    }
  }
}

TEST_CASE("the clustered kNN graph probes more clusters when P of them hold fewer than K items", "[knn]") {
  const index_t n = 40;
  const auto x = dmtest::random_embeddings<double>(n, 4, 3);
  // 20 clusters of about 2 items, one probed: K = 12 needs several more. 40 clusters of about
  // one item: K = 30 needs more clusters than the head of each ranking sorted first (P + 16).
  for (auto [clusters, k] : {std::pair<index_t, index_t>{20, 12}, {40, 30}}) {
    const dm::knn_graph g =
        dm::build_knn_graph(rows_of(x, n, 4), clustered(k, dm::similarity_kernel::cosine, clusters, 1));
    for (index_t v = 0; v < n; ++v) {
      CHECK(g.neighbor(v, 0) == v);
      for (index_t r = 0; r < g.k; ++r) {
        CHECK(g.neighbor(v, r) >= 0);
        CHECK(g.neighbor(v, r) < n);
        CHECK(std::isfinite(g.similarity(v, r)));
        for (index_t q = 0; q < r; ++q) CHECK(g.neighbor(v, q) != g.neighbor(v, r));
      }
    }
  }
}

TEST_CASE("clustered kNN graph settings are checked, naming the setting", "[knn]") {
  const auto x = dmtest::random_embeddings<double>(10, 3, 1);
  auto refused = [&](dm::knn_settings s, const std::string& input) {
    try {
      (void)dm::build_knn_graph(rows_of(x, 10, 3), s);
    } catch (const dm::invalid_input& e) {
      CHECK(e.input() == input);
      return;
    }
    FAIL("accepted");
  };
  refused(clustered(3, dm::similarity_kernel::cosine, 11, 2), "knn-clusters");
  refused(clustered(3, dm::similarity_kernel::cosine, -1, 2), "knn-clusters");
  refused(clustered(3, dm::similarity_kernel::cosine, 3, -1), "knn-probes");
  refused(clustered(11, dm::similarity_kernel::cosine, 3, 2), "neighbors");
  dm::knn_settings s = clustered(3, dm::similarity_kernel::cosine, 3, 2);
  s.kmeans_iterations = -1;
  refused(s, "kmeans-iterations");
  // 0: the defaults; P above C probes every cluster.
  CHECK(dm::build_knn_graph(rows_of(x, 10, 3), clustered(3, dm::similarity_kernel::cosine, 0, 0)).ids.size() == 30);
  CHECK(dm::build_knn_graph(rows_of(x, 10, 3), clustered(3, dm::similarity_kernel::cosine, 2, 5)).source.find("P = 2") !=
        std::string::npos);
  CHECK(dm::default_clusters(10000) == 100);
  CHECK(dm::default_probes(5) == 5);
  CHECK(dm::default_probes(100) == 16);
}

TEST_CASE("automatic kNN building: exact up to knn_exact_up_to items", "[knn]") {
  dm::knn_settings s;
  s.build = dm::knn_build::automatic;
  CHECK(dm::builds_exact(s, dm::knn_exact_up_to));
  CHECK_FALSE(dm::builds_exact(s, dm::knn_exact_up_to + 1));
  s.build = dm::knn_build::clustered;
  CHECK_FALSE(dm::builds_exact(s, 10));
  CHECK(dm::parse_enum<dm::knn_build>("auto", "knn-build") == dm::knn_build::automatic);
  CHECK_THROWS_AS(dm::parse_enum<dm::knn_build>("fast", "knn-build"), dm::invalid_input);
}

TEST_CASE("the recall estimate counts the exact neighbours a graph lists", "[knn]") {
  const index_t n = 50;
  const index_t d = 4;
  const index_t k = 5;
  const auto x = dmtest::random_embeddings<double>(n, d, 9);
  const auto p = rows_of(x, n, d);
  dm::knn_settings s;
  s.neighbors = k;
  dm::knn_graph g = dm::build_knn_graph(p, s);
  CHECK(dm::knn_recall(p, g, s, n) == 1.0);
  CHECK(dm::knn_recall(p, g, s, 7) == 1.0);
  // Replace the last neighbour of every third row by the row's least similar item (brute force):
  // by hand, those rows keep K - 1 of their K exact neighbours.
  index_t changed = 0;
  for (index_t v = 0; v < n; v += 3) {
    const auto all = brute_row(x, n, d, v, n, s.kernel, s.gamma);
    g.ids[static_cast<std::size_t>(v * k + k - 1)] = all.back().second;
    ++changed;
  }
  const double want = 1.0 - static_cast<double>(changed) / static_cast<double>(n * k);
  CHECK(std::abs(dm::knn_recall(p, g, s, n) - want) < 1e-12);
  s.threads = 1;
  const double one = dm::knn_recall(p, g, s, 20, false, 4);
  s.threads = 2;
  CHECK(dm::knn_recall(p, g, s, 20, false, 4) == one);
  CHECK_THROWS_AS(dm::knn_recall(p, g, s, 0), dm::invalid_input);
  CHECK_THROWS_AS(dm::knn_recall(p, g, s, n + 1), dm::invalid_input);
}


TEST_CASE("a kNN graph's build reports its rows and stops when its stop hook says so, both builders", "[knn]") {
  // 100,000 x 32 rows: each build takes seconds, far longer than the hooks' 0.1 s, and the first call ends it.
  const index_t n = 100000;
  const index_t d = 32;
  std::vector<double> x(static_cast<std::size_t>(n * d));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * static_cast<double>(i)) + 0.01 * static_cast<double>(i % 97);
  for (const dm::knn_build build : {dm::knn_build::exact, dm::knn_build::clustered}) {
    dm::knn_settings s;
    s.neighbors = 8;
    s.build = build;
    s.threads = 2;
    std::vector<std::pair<index_t, index_t>> reports;
    dm::knn_build_hooks hooks;
    hooks.on_rows = [&](index_t done, index_t total) { reports.emplace_back(done, total); };
    hooks.stop = [&] { return !reports.empty(); };
    CHECK_THROWS_AS(dm::build_knn_graph(rows_of(x, n, d), s, false, hooks), dm::run_stopped);
    REQUIRE(reports.size() == 1);
    CHECK(reports[0].first < n);
    CHECK(reports[0].second == n);
  }
}
