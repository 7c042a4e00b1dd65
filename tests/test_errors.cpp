// SPDX-License-Identifier: Apache-2.0
// Bad input raises datamask::invalid_input, and its message names the input and the problem.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>
#include <string>
#include <vector>

#include "helpers.hpp"

using datamask::index_t;
using Catch::Matchers::Contains;

namespace {

/// Matches an invalid_input whose input() is `name` and whose message contains the name and
/// the problem.
class about : public Catch::MatcherBase<datamask::invalid_input> {
 public:
  about(std::string name, std::string problem) : name_(std::move(name)), problem_(std::move(problem)) {}
  bool match(const datamask::invalid_input& e) const override {
    const std::string what = e.what();
    return e.input() == name_ && Contains(name_).match(what) && Contains(problem_).match(what);
  }
  std::string describe() const override {
    return "is invalid_input about '" + name_ + "' whose message contains '" + problem_ + "'";
  }

 private:
  std::string name_, problem_;
};

struct inputs {
  index_t n = 20, d = 4;
  std::vector<double> x = dmtest::random_embeddings<double>(20, 4, 1);
  std::vector<double> q = dmtest::random_quality(20, 2);
  std::vector<datamask::id_t> ids = std::vector<datamask::id_t>(20);
  inputs() { std::iota(ids.begin(), ids.end(), datamask::id_t{100}); }
  datamask::problem<double> problem() const {
    return {datamask::make_matrix_view(x.data(), n, d), {{q, 1.0}}, ids};
  }
};

// quick() sets the policy gradient's steps and rollouts: these runs name it.
constexpr auto pg = datamask::block_optimizer::pg;

datamask::settings quick() {
  datamask::settings o;
  o.steps = 2;
  o.rollouts = 4;
  o.ratio = 0.25;
  return o;
}

}  // namespace

#define CHECK_INVALID(expr, name, problem) \
  CHECK_THROWS_MATCHES(expr, datamask::invalid_input, about(name, problem))

TEST_CASE("non-finite embeddings are rejected with their position", "[errors]") {
  // A large block, so the bad value sits in a later chunk of the parallel check.
  const index_t n = 2000, d = 3;
  auto x = dmtest::random_embeddings<float>(n, d, 3);
  const datamask::problem<float> p{datamask::make_matrix_view(x.data(), n, d), {}, {}};
  datamask::settings o = quick();
  o.lambda = 0.0;
  x[1500 * d + 2] = std::numeric_limits<float>::quiet_NaN();
  CHECK_INVALID(datamask::select(p, datamask::pairwise_similarity{}, o, pg), "embeddings", "row 1500, column 2 is NaN");
  x[1500 * d + 2] = 0.0f;
  x[7 * d] = -std::numeric_limits<float>::infinity();
  CHECK_INVALID(datamask::select(p, datamask::pairwise_similarity{}, o, pg), "embeddings", "row 7, column 0 is infinite");
  // objective_function runs the same checks.
  using of = datamask::objective_function<float, datamask::disf>;
  CHECK_INVALID(of(p, datamask::disf{}, 0.0), "embeddings", "infinite");
}

TEST_CASE("bad quality scores and ids are rejected", "[errors]") {
  inputs in;
  auto p = in.problem();
  const auto o = quick();
  SECTION("NaN score") {
    in.q[11] = std::numeric_limits<double>::quiet_NaN();
    CHECK_INVALID(datamask::select(p, datamask::pairwise_similarity{}, o, pg), "quality[0]", "row 11 is NaN");
  }
  SECTION("infinite score in the second column") {
    std::vector<double> q2(20, 1.0);
    q2[3] = std::numeric_limits<double>::infinity();
    p.quality.push_back({q2, 0.5});
    CHECK_INVALID(datamask::select(p, datamask::pairwise_similarity{}, o, pg), "quality[1]", "row 3 is infinite");
  }
  SECTION("quality column of the wrong length") {
    const std::vector<double> short_q(19, 0.0);
    p.quality[0].scores = short_q;
    CHECK_INVALID(datamask::select(p, datamask::pairwise_similarity{}, o, pg), "quality[0]", "has 19 scores, expected 20");
  }
  SECTION("ids of the wrong length") {
    p.ids = std::span<const datamask::id_t>(in.ids.data(), 21 - 2);
    CHECK_INVALID(datamask::select(p, datamask::pairwise_similarity{}, o, pg), "ids", "has 19 ids, expected 20");
  }
  SECTION("duplicate ids") {
    in.ids[15] = in.ids[4];
    CHECK_INVALID(datamask::select(p, datamask::pairwise_similarity{}, o, pg), "ids", "duplicate id 104");
  }
}

TEST_CASE("impossible selection sizes and settings are rejected", "[errors]") {
  const inputs in;
  const auto p = in.problem();
  auto o = quick();
  auto run = [&] { return datamask::select(p, datamask::pairwise_similarity{}, o, pg); };
  SECTION("ratio 0") {
    o.ratio = 0.0;
    CHECK_INVALID(run(), "ratio", "must be in (0, 1], found 0");
  }
  SECTION("ratio above 1") {
    o.ratio = 1.5;
    CHECK_INVALID(run(), "ratio", "must be in (0, 1], found 1.5");
  }
  SECTION("ratio negative") {
    o.ratio = -0.1;
    CHECK_INVALID(run(), "ratio", "must be in (0, 1]");
  }
  SECTION("ratio NaN") {
    o.ratio = std::numeric_limits<double>::quiet_NaN();
    CHECK_INVALID(run(), "ratio", "must be in (0, 1]");
  }
  SECTION("count above n") {
    o.count = 21;
    CHECK_INVALID(run(), "count", "asks for 21 items but the input has only 20");
  }
  SECTION("S < 1") {
    o.ratio = 0.02;  // round(0.4) = 0
    CHECK_INVALID(run(), "ratio", "S must be at least 1");
  }
  SECTION("G < 2") {
    o.rollouts = 1;
    CHECK_INVALID(run(), "rollouts", "G must be at least 2, found 1");
  }
  SECTION("lambda below 0") {
    o.lambda = -0.1;
    CHECK_INVALID(run(), "lambda", "must be in [0, 1], found -0.1");
  }
  SECTION("lambda above 1") {
    o.lambda = 1.01;
    CHECK_INVALID(run(), "lambda", "must be in [0, 1], found 1.01");
  }
  SECTION("lambda NaN") {
    o.lambda = std::numeric_limits<double>::quiet_NaN();
    CHECK_INVALID(run(), "lambda", "must be in [0, 1]");
  }
  SECTION("fixed scaling without one scale per term") {
    o.scaling = datamask::term_scaling::fixed;
    o.scales = {1.0};
    CHECK_INVALID(run(), "scales", "has 1 values, expected one per term of f (2");
  }
  SECTION("fixed scaling with a scale that is not positive") {
    o.scaling = datamask::term_scaling::fixed;
    o.scales = {1.0, 0.0};
    CHECK_INVALID(run(), "scales", "value 1 (term 'pairwise') must be finite and > 0, found 0");
  }
  SECTION("fixed scaling with a NaN scale") {
    o.scaling = datamask::term_scaling::fixed;
    o.scales = {std::numeric_limits<double>::quiet_NaN(), 1.0};
    CHECK_INVALID(run(), "scales", "value 0 (term 'quality') must be finite and > 0");
  }
  SECTION("scales given without fixed scaling") {
    o.scales = {1.0, 2.0};
    CHECK_INVALID(run(), "scales", "were given, but scaling is not term_scaling::fixed");
  }
  SECTION("pruning keeps fewer than S") {
    o.prune_threshold = 1e9;
    CHECK_INVALID(run(), "prune", "fewer than the S = 5");
  }
}

TEST_CASE("lambda > 0 without quality scores is rejected", "[errors]") {
  const inputs in;
  const datamask::problem<double> p{datamask::make_matrix_view(in.x.data(), in.n, in.d), {}, {}};
  auto o = quick();
  o.lambda = 0.5;
  CHECK_INVALID(datamask::select(p, datamask::pairwise_similarity{}, o, pg), "quality", "no quality column given");
  using of = datamask::objective_function<double, datamask::pairwise_similarity>;
  CHECK_INVALID(of(p, datamask::pairwise_similarity{}, 0.5), "quality", "no quality column given");
  // lambda = 0 needs none.
  o.lambda = 0.0;
  CHECK_NOTHROW(datamask::select(p, datamask::pairwise_similarity{}, o, pg));
}

TEST_CASE("empty input is rejected", "[errors]") {
  const std::vector<double> x(8, 1.0);
  const std::vector<double> q;
  auto o = quick();
  o.lambda = 0.0;
  const datamask::problem<double> no_rows{datamask::make_matrix_view(x.data(), 0, 4), {}, {}};
  CHECK_INVALID(datamask::select(no_rows, datamask::pairwise_similarity{}, o, pg), "embeddings", "0 rows");
  const datamask::problem<double> no_cols{datamask::make_matrix_view(x.data(), 4, 0), {}, {}};
  CHECK_INVALID(datamask::select(no_cols, datamask::pairwise_similarity{}, o, pg), "embeddings", "0 columns");
  o.lambda = 0.5;
  const datamask::problem<double> no_rows_q{datamask::make_matrix_view(x.data(), 0, 4), {{q, 1.0}}, {}};
  CHECK_INVALID(datamask::select(no_rows_q, datamask::pairwise_similarity{}, o, pg), "embeddings", "0 rows");
}

TEST_CASE("the settings table refuses every value outside its range", "[errors][settings]") {
  // Every numeric entry: the defaults pass; a value just past each bound is refused by name.
  CHECK_NOTHROW(datamask::validate(datamask::settings{}));
  CHECK_NOTHROW(datamask::validate(datamask::learner_settings{}));
  int refused = 0;
  datamask::visit_settings([&](const auto& s) {
    using entry = std::remove_cvref_t<decltype(s)>;
    if constexpr (entry::kind == datamask::setting_kind::number) {
      using V = typename entry::value_type;
      using field_t = std::remove_cvref_t<decltype(std::declval<typename entry::owner_type&>().*s.member)>;
      if constexpr (std::is_same_v<field_t, V>) {
        auto past = [&](bool low) -> std::optional<V> {
          const V bound = low ? s.min : s.max;
          if (low ? !s.bounded_below() : !s.bounded_above()) return std::nullopt;
          const bool open = low ? s.min_open : s.max_open;
          if constexpr (std::floating_point<V>) {
            return open ? bound : std::nextafter(bound, low ? -1e300 : 1e300);
          } else {
            return static_cast<V>(low ? bound - 1 : bound + 1);
          }
        };
        for (bool low : {true, false}) {
          const auto v = past(low);
          if (!v) continue;
          datamask::settings o;
          datamask::learner_settings ls;
          ls.kernel = datamask::similarity_kernel::rbf;  // gamma is checked with rbf only
          datamask::setting_owner(s, o, ls).*s.member = *v;
          INFO(s.name << " = " << *v);
          const std::string field(s.field);
          if constexpr (std::is_base_of_v<typename entry::owner_type, datamask::settings>) {
            CHECK_THROWS_MATCHES(datamask::validate(o), datamask::invalid_input,
                                 about(field, "must be"));
          } else {
            CHECK_THROWS_MATCHES(datamask::validate(ls), datamask::invalid_input,
                                 about(field, "must be"));
          }
          ++refused;
        }
      }
    }
  });
  CHECK(refused >= 18);
}

TEST_CASE("cross-field rules and enum spellings come from one place", "[errors][settings]") {
  datamask::learner_settings ls;
  ls.lr_max = 0.5;  // below the default lr_min = 1
  CHECK_INVALID(datamask::validate(ls), "lr_min", "must not exceed lr_max");
  ls.schedule = datamask::schedule_kind::constant;  // uses lr_max only
  CHECK_NOTHROW(datamask::validate(ls));
  ls.gamma = -1.0;  // unused by the cosine kernel
  CHECK_NOTHROW(datamask::validate(ls));
  ls.kernel = datamask::similarity_kernel::rbf;
  CHECK_INVALID(datamask::validate(ls), "gamma", "must be > 0, found -1");

  datamask::settings o;
  o.ratio = 0.0;  // unused when a count is given
  o.count = 3;
  CHECK_NOTHROW(datamask::validate(o));
  o.scales = {1.0};
  CHECK_INVALID(datamask::validate(o), "scales", "scaling is not term_scaling::fixed");

  CHECK(datamask::parse_enum<datamask::term_scaling>("group", "--scaling") ==
        datamask::term_scaling::group);
  CHECK(datamask::parse_gradient("plackett_luce") == datamask::gradient_mode::plackett_luce);
  CHECK(datamask::enum_name(datamask::readout_mode::top_logits) == "top-logits");
  CHECK_INVALID(datamask::parse_enum<datamask::init_mode>("best", "--init"), "--init",
                "expected uniform or quality, found 'best'");
}
