// SPDX-License-Identifier: Apache-2.0
// The run report round trip: a report written by report_json (as datamask-select writes it) and
// read back by read_report / read_report_file gives the same fields (datamask/run/report.hpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <datamask/run/report.hpp>

namespace {

datamask::block_result make_block(datamask::index_t b, double raw) {
  datamask::block_result r;
  r.block = b;
  r.items = 1000 + b;
  r.kept = 900 + b;
  r.selected = 100 + b;
  r.optimizer = b == 0 ? "greedy" : "continuous";  // auto resolves each block by its cost
  r.steps_run = 250;
  r.zero_variance_steps = b;
  r.nonfinite_steps = 2 * b;
  r.from_checkpoint = b == 1;
  r.optimize_seconds = 1.25 + b;
  r.evaluate_seconds = 0.125;
  r.terms = {{"quality", 0.5, 0.0457, 0.185499 + b}, {"pairwise", 0.5, 0.0199, raw}};
  r.objective = 0.5 * r.terms[0].raw / 0.0457 + 0.5 * raw / 0.0199;
  r.ids = {1, 2, 3};  // not part of a report
  return r;
}

datamask::io::run_report make_report() {
  datamask::io::run_report r;
  r.configuration = {{"ratio", 0.1}, {"objective", {"pairwise"}}, {"seed", 18446744073709551615ull}};
  r.rows = 2001;
  r.dims = 32;
  r.input_hash = 0xF123456789ABCDEFull;  // high bit set: read back as unsigned 64-bit
  r.resumed = true;
  r.prune_threshold = -0.375;
  r.selected = 201;
  r.blocks = {make_block(0, -0.0727066), make_block(1, std::numeric_limits<double>::quiet_NaN())};
  r.seconds = {{"load", 0.5}, {"prune", 0.0}, {"optimize", 3.5}};
  return r;
}

void check_same(const datamask::io::run_report& a, const datamask::io::run_report& b) {
  CHECK(b.program == a.program);
  CHECK(b.version == a.version);
  CHECK(b.configuration == a.configuration);
  CHECK(b.rows == a.rows);
  CHECK(b.dims == a.dims);
  CHECK(b.input_hash == a.input_hash);
  CHECK(b.resumed == a.resumed);
  CHECK(b.prune_threshold == a.prune_threshold);
  CHECK(b.selected == a.selected);
  REQUIRE(b.blocks.size() == a.blocks.size());
  for (std::size_t i = 0; i < a.blocks.size(); ++i) {
    const auto &x = a.blocks[i], &y = b.blocks[i];
    CHECK(y.block == x.block);
    CHECK(y.items == x.items);
    CHECK(y.kept == x.kept);
    CHECK(y.selected == x.selected);
    CHECK(y.optimizer == x.optimizer);
    CHECK(y.steps_run == x.steps_run);
    CHECK(y.zero_variance_steps == x.zero_variance_steps);
    CHECK(y.nonfinite_steps == x.nonfinite_steps);
    CHECK(y.from_checkpoint == x.from_checkpoint);
    CHECK(y.optimize_seconds == x.optimize_seconds);
    CHECK(y.evaluate_seconds == x.evaluate_seconds);
    CHECK(y.ids.empty());  // a report holds no ids
    CHECK((y.objective == x.objective || (std::isnan(y.objective) && std::isnan(x.objective))));
    REQUIRE(y.terms.size() == x.terms.size());
    for (std::size_t t = 0; t < x.terms.size(); ++t) {
      CHECK(y.terms[t].name == x.terms[t].name);
      CHECK(y.terms[t].weight == x.terms[t].weight);
      CHECK(y.terms[t].scale == x.terms[t].scale);
      // A non-finite value is written as null and read back as NaN.
      CHECK((y.terms[t].raw == x.terms[t].raw || (std::isnan(y.terms[t].raw) && std::isnan(x.terms[t].raw))));
    }
  }
  CHECK(b.seconds == a.seconds);
}

}  // namespace

TEST_CASE("written by report_json, read back by read_report, field by field", "[report]") {
  const auto rep = make_report();
  const std::string text = datamask::io::report_json(rep).dump(2);
  const auto back = datamask::io::read_report(nlohmann::ordered_json::parse(text));
  check_same(rep, back);
  REQUIRE(back.blocks[0].terms.size() == 2);
  CHECK(back.blocks[0].terms[0].name == "quality");  // f's order, not sorted by name

  CHECK(datamask::io::report_json(rep)["blocks"][0]["optimizer"] == "greedy");
  // A block that selects nothing runs no optimizer: null, read back empty.
  datamask::block_result empty;
  CHECK(datamask::io::detail::block_json(empty)["optimizer"].is_null());
  CHECK(datamask::io::detail::block_from_json(datamask::io::detail::block_json(empty)).optimizer.empty());

  // No prune threshold: written as null, read back as -inf.
  auto none = rep;
  none.prune_threshold = -std::numeric_limits<double>::infinity();
  CHECK(datamask::io::report_json(none)["prune_threshold"].is_null());
  check_same(none, datamask::io::read_report(nlohmann::ordered_json::parse(datamask::io::report_json(none).dump())));
}

TEST_CASE("read_report_file reads a written file and names a bad one", "[report]") {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string path = (dir / "datamask_test_report.json").string();
  {
    std::ofstream out(path, std::ios::binary);
    out << datamask::io::report_json(make_report()).dump(2) << "\n";
  }
  check_same(make_report(), datamask::io::read_report_file(path));

  auto j = nlohmann::ordered_json::parse(datamask::io::report_json(make_report()).dump());
  j["blocks"][0].erase("kept");
  CHECK_THROWS_AS(datamask::io::read_report(j, "r.json"), datamask::invalid_input);
  {
    std::ofstream out(path, std::ios::binary);
    out << "{ not json";
  }
  CHECK_THROWS_AS(datamask::io::read_report_file(path), datamask::invalid_input);
  std::filesystem::remove(path);
}

TEST_CASE("json_text keeps UTF-8 and writes every other byte as a hex escape", "[report]") {
  using datamask::io::json_text;
  CHECK(json_text("plain/path.npy") == "plain/path.npy");
  CHECK(json_text("caf\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x98\x80") == "caf\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x98\x80");
  CHECK(json_text("sel-\xe9.npy") == "sel-\\xe9.npy");   // Latin-1
  CHECK(json_text("\xc0\xaf") == "\\xc0\\xaf");          // an overlong '/'
  CHECK(json_text("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(json_text("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // beyond U+10FFFF
  CHECK(json_text("a\xe2\x82") == "a\\xe2\\x82");        // cut short at the end
  CHECK(json_text(std::string("a\0b", 3)) == std::string("a\0b", 3));
  // Every result is a JSON string: nlohmann's dump, which refuses invalid UTF-8, takes it.
  for (int b = 0; b < 256; ++b) {
    std::string s = "x";
    s += static_cast<char>(b);
    s += "\x80y";
    CHECK_NOTHROW(nlohmann::json(json_text(s)).dump());
  }
}

TEST_CASE("certificates: written per block and in total, read back, the total weighs the blocks", "[report]") {
  auto rep = make_report();
  rep.blocks[1] = make_block(1, -0.05);
  const auto cert = [](double bound, double f, double random, double seconds) {
    datamask::block_certificate c;
    c.method = "frank-wolfe";
    c.bound = bound;
    c.gap = bound - f;
    c.random_mean = random;
    c.certified_share = (f - random) / (bound - random);
    c.seconds = seconds;
    c.random_seconds = seconds / 4;
    return c;
  };
  const auto& b0 = rep.blocks[0];
  const auto& b1 = rep.blocks[1];
  rep.blocks[0].certificate = cert(b0.objective + 0.25, b0.objective, b0.objective - 2.0, 0.5);
  rep.blocks[1].certificate = cert(b1.objective + 0.5, b1.objective, b1.objective - 3.0, 0.25);
  const auto j = datamask::io::report_json(rep);
  const auto back = datamask::io::read_report(nlohmann::ordered_json::parse(j.dump()));
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& a = *rep.blocks[i].certificate;
    REQUIRE(back.blocks[i].certificate);
    const auto& c = *back.blocks[i].certificate;
    CHECK(c.method == a.method);
    CHECK(c.bound == a.bound);
    CHECK(c.gap == a.gap);
    CHECK(c.certified_share == a.certified_share);
    CHECK(c.random_mean == a.random_mean);
    CHECK(c.seconds == a.seconds);
    CHECK(c.random_seconds == a.random_seconds);
    CHECK(c.reason.empty());
  }
  // The total: the blocks weighted by their share of the selection (100 and 101 of 201), as f is.
  const double w0 = 100.0 / 201.0, w1 = 101.0 / 201.0;
  const auto& t = j["total"]["certificate"];
  const double f = j["total"]["objective"]["total"].get<double>();
  CHECK(f == Approx(w0 * b0.objective + w1 * b1.objective).epsilon(1e-12));
  CHECK(t["bound"].get<double>() == Approx(w0 * (b0.objective + 0.25) + w1 * (b1.objective + 0.5)).epsilon(1e-12));
  CHECK(t["random_mean"].get<double>() == Approx(w0 * (b0.objective - 2.0) + w1 * (b1.objective - 3.0)).epsilon(1e-12));
  CHECK(t["gap"].get<double>() == Approx(t["bound"].get<double>() - f).epsilon(1e-12));
  CHECK(t["certified_share"].get<double>() ==
        Approx((f - t["random_mean"].get<double>()) / (t["bound"].get<double>() - t["random_mean"].get<double>())));
  CHECK(t["seconds"].get<double>() == 0.75);
  CHECK(t["random_seconds"].get<double>() == 0.1875);
  CHECK(t["method"] == "frank-wolfe");

  // One block without a certificate leaves the total without one: method none, no numbers.
  rep.blocks[1].certificate->method = "none";
  rep.blocks[1].certificate->reason = "'disf' has no certificate";
  rep.blocks[1].certificate->bound = rep.blocks[1].certificate->gap = std::numeric_limits<double>::quiet_NaN();
  const auto none = datamask::io::report_json(rep);
  CHECK(none["blocks"][1]["certificate"]["bound"].is_null());
  CHECK(none["blocks"][1]["certificate"]["reason"] == "'disf' has no certificate");
  CHECK(none["total"]["certificate"]["method"] == "none");
  CHECK(none["total"]["certificate"]["bound"].is_null());
  CHECK(none["total"]["certificate"]["certified_share"].is_null());
  CHECK(none["total"]["certificate"]["reason"] == "block 1: 'disf' has no certificate");
  const auto back_none = datamask::io::read_report(nlohmann::ordered_json::parse(none.dump()));
  REQUIRE(back_none.blocks[1].certificate);
  CHECK(!back_none.blocks[1].certificate->certified());
  CHECK(std::isnan(back_none.blocks[1].certificate->bound));

  // A run without certificates writes none.
  for (auto& b : rep.blocks) b.certificate.reset();
  const auto plain = datamask::io::report_json(rep);
  CHECK(!plain["total"].contains("certificate"));
  CHECK(!plain["blocks"][0].contains("certificate"));
}
