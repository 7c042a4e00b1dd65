// SPDX-License-Identifier: Apache-2.0
// datamask::select (learners/select.hpp): the library's one call (that it selects what a block of
// the program selects: tests/test_block_select.cpp); each optimizer reports through the caller's hooks; what only the policy gradient reads is refused with
// another. The greedy baselines as optimizers of a block (learners/greedy/learner.hpp)
// against greedy_select on the f with the learner's scales; and the one protocol
// (learners/protocol.hpp) every optimizer selects through.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <datamask/datamask.hpp>

#include "helpers.hpp"

namespace dm = datamask;
using dm::index_t;

using dmtest::random_block;

namespace {
/// A black box: f's values only (no relaxation, no greedy state).
struct spread {
  static constexpr std::string_view name = "spread";
  template <class T>
  double operator()(const dm::subset_view<T>& s) const {
    double total = 0.0;
    for (index_t i : s.subset) total += std::abs(static_cast<double>(s.embeddings(i, 0)));
    return total / static_cast<double>(std::max<index_t>(1, s.subset.size));
  }
};
}  // namespace

TEST_CASE("select: auto runs the policy gradient on a black box and under group scaling", "[select]") {
  const dmtest::float_block blk = random_block(200, 6, 17);
  const dm::problem<float> p = blk.problem();
  dm::settings o;
  o.count = 20;
  o.steps = 40;  // the policy gradient's: accepted, as auto runs it
  const auto m = dm::mix(dm::weighted{dm::pairwise_similarity{}, 1.0}, dm::weighted{spread{}, 1.0});
  const dm::selection_result r = dm::select(p, m, o);
  CHECK(r.steps_run == 40);
  CHECK(r.ids == dm::select(p, m, o, dm::block_optimizer::pg).ids);
  o.scaling = dm::term_scaling::group;
  CHECK(dm::select(p, dm::pairwise_similarity{}, o).steps_run == 40);
  CHECK_THROWS_WITH(dm::select(p, dm::pairwise_similarity{}, dm::settings{o}, dm::block_optimizer::lazy),
                    Catch::StartsWith("steps:"));
  o.steps = dm::settings{}.steps;
  CHECK_THROWS_WITH(dm::select(p, dm::pairwise_similarity{}, o, dm::block_optimizer::continuous),
                    Catch::StartsWith("scaling:"));
}

TEST_CASE("select: every optimizer reports through the caller's hooks, and stops", "[select]") {
  const dmtest::float_block blk = random_block(300, 6, 4);
  const dm::problem<float> p = blk.problem();
  dm::settings o;
  o.count = 30;
  o.threads = 1;
  for (const auto which : {dm::block_optimizer::pg, dm::block_optimizer::continuous, dm::block_optimizer::lazy,
                           dm::block_optimizer::stochastic}) {
    INFO(dm::enum_name(which));
    std::vector<index_t> steps;
    dm::settings run = o;
    if (which == dm::block_optimizer::pg) run.steps = 20;
    const bool greedy = which == dm::block_optimizer::lazy || which == dm::block_optimizer::stochastic;
    dm::optimizer_hooks watched;  // on_step hears every optimizer: a greedy's picks as steps
    watched.on_step = [&](const dm::step_record& r) { steps.push_back(r.step); };
    const dm::selection_result r = dm::select(p, dm::pairwise_similarity{}, run, which, watched);
    const index_t expected = which == dm::block_optimizer::pg           ? 20
                             : which == dm::block_optimizer::continuous ? dm::continuous_settings{}.iterations
                                                                        : o.count;  // one per pick
    REQUIRE(static_cast<index_t>(steps.size()) == expected);
    for (std::size_t i = 0; i < steps.size(); ++i) CHECK(steps[i] == static_cast<index_t>(i + 1));
    CHECK(r.ids.size() == 30u);

    dm::optimizer_hooks stopped = watched;
    stopped.stop = [&] { return steps.size() >= 5u; };
    steps.clear();
    const dm::selection_result s = dm::select(p, dm::pairwise_similarity{}, run, which, stopped);
    CHECK(s.stopped_early);
    if (greedy) {
      CHECK(s.ids.size() == 5u);  // the picks so far, not evaluated
      CHECK_FALSE(s.evaluated);
      // on_pick beside on_step: each pick told to both; a snapshot hook is refused.
      std::vector<index_t> picks;
      dm::optimizer_hooks both = watched;
      both.on_pick = [&](index_t k) { picks.push_back(k); };
      steps.clear();
      (void)dm::select(p, dm::pairwise_similarity{}, run, which, both);
      CHECK(picks == steps);
      CHECK(static_cast<index_t>(picks.size()) == o.count);
      dm::optimizer_hooks snap;
      snap.on_snapshot = [](index_t, std::span<const double>, const dm::best_rollout&) {};
      CHECK_THROWS_WITH(dm::select(p, dm::pairwise_similarity{}, run, which, snap), Catch::StartsWith("on_snapshot:"));
    } else {
      CHECK(s.steps_run == 5);
    }
  }
}

TEST_CASE("changed_pg_setting names each policy-gradient setting changed from its default", "[select]") {
  CHECK(dm::changed_pg_setting(dm::settings{}).empty());
  // Every member of pg_settings, with a value other than its default.
  const std::vector<std::pair<std::string_view, void (*)(dm::settings&)>> cases{
      {"rollouts", [](dm::settings& s) { s.rollouts = 7; }},
      {"steps", [](dm::settings& s) { s.steps = 3; }},
      {"reference_size", [](dm::settings& s) { s.reference_size = 30; }},
      {"init", [](dm::settings& s) { s.init = dm::init_mode::quality; }},
      {"advantage", [](dm::settings& s) { s.advantage = dm::advantage_mode::leave_one_out; }},
      {"credit", [](dm::settings& s) { s.credit = dm::credit_mode::item; }},
      {"readout", [](dm::settings& s) { s.readout = dm::readout_mode::sample; }},
      {"keep_best_rollout", [](dm::settings& s) { s.keep_best_rollout = false; }}};
  dm::settings all;
  for (const auto& [name, change] : cases) {
    dm::settings s;
    change(s);
    CHECK(dm::changed_pg_setting(s) == name);
    change(all);
  }
  CHECK(dm::changed_pg_setting(all) == "rollouts");  // the first, in the table's order
  // Settings of every optimizer are not the policy gradient's.
  dm::settings other;
  other.count = 5;
  other.lambda = 0.2;
  other.seed = 9;
  CHECK(dm::changed_pg_setting(other).empty());
}

TEST_CASE("select: what only the policy gradient reads is refused with another optimizer", "[select]") {
  const dmtest::float_block blk = random_block(200, 6, 8);
  const dm::problem<float> p = blk.problem();
  dm::settings o;
  o.count = 20;
  o.steps = 50;  // auto runs naive greedy here
  CHECK_THROWS_WITH(dm::select(p, dm::pairwise_similarity{}, o),
                    Catch::StartsWith("steps: is a setting of the policy-gradient learner, but select() runs greedy"));
  CHECK(dm::select(p, dm::pairwise_similarity{}, o, dm::block_optimizer::pg).steps_run == 50);
  o.steps = dm::settings{}.steps;
  o.readout = dm::readout_mode::sample;
  CHECK_THROWS_WITH(dm::select(p, dm::pairwise_similarity{}, o, dm::block_optimizer::continuous),
                    Catch::StartsWith("readout:"));
  o.readout = dm::settings{}.readout;
  // The continuous learner named on a term without a relaxation: refused, naming the term.
  CHECK_THROWS_WITH(dm::select(p, dm::facility_location{}, o, dm::block_optimizer::continuous),
                    Catch::Contains("'facility' has none"));
  // Weighed 0, such a term may sit in the continuous learner's f.
  const auto with_zero = dm::mix(dm::weighted{dm::pairwise_similarity{}, 1.0}, dm::weighted{dm::facility_location{}, 0.0});
  CHECK(dm::select(p, with_zero, o, dm::block_optimizer::continuous).ids ==
        dm::select(p, dm::pairwise_similarity{}, o, dm::block_optimizer::continuous).ids);
}

TEST_CASE("greedy_learner: greedy_select on the f a learner with the same settings optimises", "[select][greedy]") {
  const dmtest::float_block blk = random_block(250, 6, 12);
  const dm::problem<float> p = blk.problem();
  dm::settings o;
  o.count = 25;
  o.prune = 0.2;  // the candidates are the kept rows
  o.seed = 9;
  const auto m = dm::mix(dm::weighted{dm::pairwise_similarity{}, 1.0}, dm::weighted{dm::facility_location{}, 0.5});
  for (const auto method : {dm::greedy_method::naive, dm::greedy_method::lazy, dm::greedy_method::stochastic}) {
    INFO(static_cast<int>(method));
    dm::greedy_options g;
    g.method = method;
    const dm::selection_result r = dm::greedy_learner(o, g).select(p, m);
    // The reference: the learner's terms and scales, f on them, greedy over the kept rows.
    const std::vector<dm::term_value> terms = dm::learner<>(o).calibrate(p, m);
    dm::objective_function<float, std::remove_const_t<decltype(m)>> f(p, m, o.lambda);
    std::vector<double> scales;
    for (const auto& t : terms) scales.push_back(t.scale);
    f.set_scales(scales);
    dm::greedy_options ref = g;
    ref.seed = dm::greedy_seed(o);
    ref.epsilon = o.epsilon;
    for (index_t i = 0; i < p.embeddings.rows; ++i) {
      if (blk.q[static_cast<std::size_t>(i)] >= r.prune_threshold) ref.candidates.push_back(i);
    }
    REQUIRE(static_cast<index_t>(ref.candidates.size()) == r.kept);
    REQUIRE(r.kept < p.embeddings.rows);
    CHECK(r.rows == dm::greedy_select(f, o.count, ref).rows);
    CHECK(r.objective == Approx(f(std::span<const index_t>(r.rows))).epsilon(1e-12));
    CHECK(r.logits.empty());
  }
  dm::settings group = o;
  group.scaling = dm::term_scaling::group;
  CHECK_THROWS_WITH(dm::greedy_learner(group).select(p, m), Catch::StartsWith("scaling:"));
}

TEST_CASE("the optimizers' protocol: one shape of hooks, snapshots and resume for every optimizer", "[select][protocol]") {
  const dmtest::float_block blk = random_block(240, 6, 31);
  const dm::problem<float> p = blk.problem();
  dm::settings o;
  o.count = 24;
  o.steps = 12;
  o.rollouts = 8;
  o.threads = 1;
  dm::continuous_options co;
  co.common = o;
  co.ascent.iterations = 12;
  co.polish.stochastic_start = false;
  const dm::learner<> pg(o);
  const dm::continuous_learner cont(co);
  const dm::greedy_learner lazy(o);
  // A learner's run, a snapshot at step 5, and the run continued from it.
  auto check_resume = [&](const auto& opt, const char* name) {
    INFO(name);
    std::vector<dm::step_record> history;
    std::optional<dm::resume_point> at5;
    dm::optimizer_hooks h;
    h.on_step = [&](const dm::step_record& r) { history.push_back(r); };
    h.snapshot_every = 5;
    h.on_snapshot = [&](index_t step, std::span<const double> state, const dm::best_rollout& best) {
      if (step == 5) at5 = dm::resume_point{step, {state.begin(), state.end()}, best, history};
    };
    const dm::selection_result whole = opt.select(p, dm::pairwise_similarity{}, h);
    REQUIRE(history.size() == 12u);
    CHECK(whole.ids == opt.select(p, dm::pairwise_similarity{}).ids);  // hooks change nothing
    REQUIRE(at5);
    REQUIRE(at5->history.size() == 5u);
    std::vector<dm::step_record> rest;
    dm::optimizer_hooks again;
    again.on_step = [&](const dm::step_record& r) { rest.push_back(r); };
    const dm::selection_result resumed = opt.select(p, dm::pairwise_similarity{}, again, &*at5);
    CHECK(resumed.ids == whole.ids);
    REQUIRE(resumed.history.size() == whole.history.size());  // the uninterrupted run's records
    for (std::size_t i = 0; i < whole.history.size(); ++i) {
      CHECK(resumed.history[i].reward_mean == whole.history[i].reward_mean);
    }
    REQUIRE(rest.size() == 7u);
    for (std::size_t i = 0; i < rest.size(); ++i) {
      CHECK(rest[i].step == history[i + 5].step);
      CHECK(rest[i].reward_mean == history[i + 5].reward_mean);
    }
    // Stopped through the protocol: at the step the hook says so.
    dm::optimizer_hooks stopping;
    index_t steps = 0;
    stopping.on_step = [&](const dm::step_record&) { ++steps; };
    stopping.stop = [&] { return steps >= 3; };
    CHECK(opt.select(p, dm::pairwise_similarity{}, stopping).stopped_early);
    CHECK(steps == 3);
  };
  check_resume(pg, "pg");
  check_resume(cont, "continuous");
  // A resume point that does not fit the block is refused, also where nothing is learned.
  const dm::resume_point short_state{5, std::vector<double>(10, 0.5), {}, std::vector<dm::step_record>(5)};
  CHECK_THROWS_WITH(cont.select(p, dm::pairwise_similarity{}, {}, &short_state), Catch::StartsWith("resume_point.state:"));
  dm::continuous_options quality_only = co;
  quality_only.common.lambda = 1.0;  // no diversity: the read-out is the top S by quality
  CHECK_THROWS_WITH(dm::continuous_learner(quality_only).select(p, dm::pairwise_similarity{}, {}, &short_state),
                    Catch::StartsWith("resume_point.state:"));
  // The greedy: picks reported, a stop heard, no state to continue.
  dm::optimizer_hooks h;
  index_t picks = 0;
  h.on_pick = [&](index_t n) { picks = n; };
  CHECK(lazy.select(p, dm::pairwise_similarity{}, h).ids == lazy.select(p, dm::pairwise_similarity{}).ids);
  CHECK(picks == 24);
  h.stop = [&] { return picks >= 4; };
  picks = 0;
  CHECK(lazy.select(p, dm::pairwise_similarity{}, h).ids.size() == 4u);
  const dm::resume_point some;
  CHECK_THROWS_WITH(lazy.select(p, dm::pairwise_similarity{}, dm::optimizer_hooks{}, &some), Catch::StartsWith("resume:"));
}

TEST_CASE("a term list: terms whose number is known at run time select as if the mix listed them", "[select][mix]") {
  const dmtest::float_block blk = random_block(300, 8, 33);
  const dm::problem<float> p = blk.problem();
  dm::settings o;
  o.seed = 9;
  o.threads = 1;
  o.count = 30;
  o.lambda = 0.4;
  using pws = dm::pairwise_similarity;
  using fl = dm::facility_location;
  // Two pairwise terms beside DiSF, listed or held in a list (whose weight multiplies its terms').
  const auto listed = dm::mix(dm::weighted{dm::disf{}, 0.5}, dm::weighted{pws{}, 1.0}, dm::weighted{pws{}, 0.25});
  const auto held = dm::mix(dm::weighted{dm::disf{}, 0.5},
                            dm::weighted{dm::term_list<pws>{{{pws{}, 0.5}, {pws{}, 0.125}}}, 2.0});
  REQUIRE(held.term_count() == 3);
  CHECK(held.names() == std::vector<std::string>{"disf", "pairwise", "pairwise#2"});
  for (const auto which : {dm::block_optimizer::continuous, dm::block_optimizer::pg, dm::block_optimizer::greedy,
                           dm::block_optimizer::lazy, dm::block_optimizer::stochastic}) {
    INFO(dm::enum_name(which));
    dm::settings run = o;
    if (which == dm::block_optimizer::pg) run.steps = 15;
    const dm::selection_result a = dm::select(p, listed, run, which);
    const dm::selection_result b = dm::select(p, held, run, which);
    CHECK(b.ids == a.ids);
    CHECK(b.objective == a.objective);  // the same terms in the same order: the same bits
    REQUIRE(b.terms.size() == a.terms.size());
    for (std::size_t t = 0; t < a.terms.size(); ++t) {
      CHECK(b.terms[t].name == a.terms[t].name);
      CHECK(b.terms[t].raw == a.terms[t].raw);
      CHECK(b.terms[t].weight == a.terms[t].weight);
    }
  }
  // Facility location's greedy and swap states, one per listed term (lazy greedy, the polish).
  const auto two = dm::mix(dm::weighted{fl{}, 1.0}, dm::weighted{fl{}, 0.5});
  const auto list = dm::mix(dm::weighted{dm::term_list<fl>{{{fl{}, 1.0}, {fl{}, 0.5}}}, 1.0});
  for (const auto which : {dm::block_optimizer::lazy, dm::block_optimizer::stochastic}) {
    INFO(dm::enum_name(which));
    const dm::selection_result a = dm::select(p, two, o, which);
    const dm::selection_result b = dm::select(p, list, o, which);
    CHECK(b.ids == a.ids);
    CHECK(b.objective == a.objective);
  }
  // Names stay unique when a name given at run time already ends in "#2".
  dm::external_objective m;
  m.label = "m";
  dm::external_objective m2 = m;
  m2.label = "m#2";
  const auto named = dm::mix(dm::weighted{dm::term_list<dm::external_objective>{{{m, 1.0}, {m, 1.0}, {m2, 1.0}}}, 1.0});
  CHECK(named.names() == std::vector<std::string>{"m", "m#2", "m#2#2"});
  // An empty list adds no term.
  const auto none = dm::mix(dm::weighted{pws{}, 1.0}, dm::weighted{dm::term_list<dm::disf>{}, 1.0});
  CHECK(none.term_count() == 1);
  CHECK(dm::select(p, none, o).ids == dm::select(p, pws{}, o).ids);
}
