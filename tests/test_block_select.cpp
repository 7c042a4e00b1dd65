// SPDX-License-Identifier: Apache-2.0
// run/block_select.hpp: the run-level rules every front end shares (objective weights, auto
// optimizer, corpus plan), a block's selection through each optimizer against the evaluation of
// its rows, the stop hook, and a policy-gradient or continuous block resumed from a snapshot
// against the uninterrupted run; datamask::select (the library's one call) selects what the
// program's block selects.
#include <catch2/catch.hpp>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <map>
#include <memory>
#include <utility>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <datamask/learners/select.hpp>
#include <datamask/run/block_select.hpp>

#include "helpers.hpp"

namespace dm = datamask;
using dm::index_t;
using dmtest::random_embeddings;
using dmtest::random_quality;

namespace {

using block = dmtest::float_block;
using dmtest::random_block;

std::vector<index_t> rows_of(const dm::block_result& r) {
  return {r.ids.begin(), r.ids.end()};  // no ids given: the ids are the rows
}

}  // namespace

TEST_CASE("resolve_optimizer: auto is lazy for facility location alone, else continuous where it can",
          "[block_select]") {
  dm::block_run_settings s;
  CHECK(dm::resolve_optimizer(s) == dm::block_optimizer::continuous);
  s.weights.disf = 1.0;
  CHECK(dm::resolve_optimizer(s) == dm::block_optimizer::continuous);
  s.weights.facility = 1.0;  // dense facility location in a mix: no relaxation
  CHECK(dm::resolve_optimizer(s) == dm::block_optimizer::stochastic);
  s.neighbors = 16;  // on a kNN graph it has one
  CHECK(dm::resolve_optimizer(s) == dm::block_optimizer::continuous);
  s.weights.pairwise = 0.0;
  s.weights.disf = 0.0;  // facility location alone: submodular, lazy greedy, dense or on a graph
  CHECK(dm::resolve_optimizer(s) == dm::block_optimizer::lazy);
  s.neighbors = 0;
  CHECK(dm::resolve_optimizer(s) == dm::block_optimizer::lazy);
  s.run.lambda = 1.0;  // f is quality alone
  CHECK(dm::resolve_optimizer(s) == dm::block_optimizer::continuous);
  s.run.lambda = 0.5;
  s.optimizer = dm::block_optimizer::continuous;
  CHECK_THROWS_WITH(dm::resolve_optimizer(s), Catch::Contains("facility location has no relaxation"));
}

TEST_CASE("auto_block_optimizer: naive greedy on a block where it costs no more than the learner",
          "[block_select]") {
  dm::block_run_settings s;  // auto, pairwise, 100 iterations
  // Pairwise: greedy's d per candidate and pick against the ascent's 2 d per item and
  // iteration (plus 1 each for quality), the learner counted as two ascents (its polish):
  // greedy while S (d + 1) <= 2 x 100 (2 d + 1).
  static_assert(dm::learner_ascents == 2.0);
  const index_t d = 16;
  const index_t edge = 2 * 100 * (2 * d + 1) / (d + 1);  // 388
  CHECK(dm::resolve_optimizer(s, {10000, d, edge}) == dm::block_optimizer::greedy);
  CHECK(dm::resolve_optimizer(s, {10000, d, edge + 1}) == dm::block_optimizer::continuous);
  s.ascent.iterations = 300;  // a longer ascent moves the edge
  CHECK(dm::resolve_optimizer(s, {10000, d, edge + 1}) == dm::block_optimizer::greedy);
  s.ascent.iterations = 100;
  // DiSF: 2 d^2 on both sides: greedy while S <= about twice the iterations.
  s.weights = dm::objective_weights{0.0, 0.0, 1.0};
  CHECK(dm::resolve_optimizer(s, {5000, d, 200}) == dm::block_optimizer::greedy);
  CHECK(dm::resolve_optimizer(s, {5000, d, 201}) == dm::block_optimizer::continuous);
  // Only auto is resolved by cost; facility location alone stays lazy greedy at any size.
  s.optimizer = dm::block_optimizer::continuous;
  CHECK(dm::resolve_optimizer(s, {5000, d, 10}) == dm::block_optimizer::continuous);
  s.optimizer = dm::block_optimizer::automatic;
  s.weights = dm::objective_weights{0.0, 1.0, 0.0};
  CHECK(dm::resolve_optimizer(s, {5000, d, 10}) == dm::block_optimizer::lazy);
  // Facility location on a graph in a mix counts its K: K and 3 K.
  s.weights = dm::objective_weights{1.0, 1.0, 0.0};
  s.neighbors = 32;
  const index_t knn_edge = 2 * 100 * (2 * d + 3 * 32 + 1) / (d + 32 + 1);
  CHECK(dm::resolve_optimizer(s, {5000, d, knn_edge}) == dm::block_optimizer::greedy);
  CHECK(dm::resolve_optimizer(s, {5000, d, knn_edge + 1}) == dm::block_optimizer::continuous);
}

TEST_CASE("select_block: auto runs the optimizer of its block's cost and names it in the result", "[block_select]") {
  const block blk = random_block(400, 8, 3);
  dm::block_run_settings s;  // auto on pairwise: greedy while S <= 2 x 100 (2 d + 1) / (d + 1) = 377
  s.run.threads = 1;
  dm::block_run_settings greedy = s;
  greedy.optimizer = dm::block_optimizer::greedy;
  const dm::block_result small = dm::select_block(blk.problem(), 0, 40, std::nullopt, s);
  CHECK(small.optimizer == "greedy");
  CHECK(small.ids == dm::select_block(blk.problem(), 0, 40, std::nullopt, greedy).ids);
  CHECK(small.history.empty());
  dm::block_run_settings cont = s;
  cont.optimizer = dm::block_optimizer::continuous;
  const dm::block_result large = dm::select_block(blk.problem(), 0, 390, std::nullopt, s);
  CHECK(large.optimizer == "continuous");
  CHECK(large.history.size() == 100);
  CHECK(large.ids == dm::select_block(blk.problem(), 0, 390, std::nullopt, cont).ids);
}

TEST_CASE("select_block: a whole block runs no optimizer, its ids by quality, and a prune that drops one is refused",
          "[block_select]") {
  const block blk = random_block(60, 4, 9);
  dm::block_run_settings s;
  s.run.threads = 1;
  for (const auto o : {dm::block_optimizer::automatic, dm::block_optimizer::greedy, dm::block_optimizer::pg}) {
    s.optimizer = o;
    const dm::block_result r = dm::select_block(blk.problem(), 0, 60, std::nullopt, s);
    CHECK(r.optimizer.empty());
    CHECK(r.steps_run == 0);
    std::vector<index_t> by_quality(60);
    std::iota(by_quality.begin(), by_quality.end(), index_t{0});
    std::stable_sort(by_quality.begin(), by_quality.end(), [&](index_t a, index_t b) { return blk.q[a] > blk.q[b]; });
    CHECK(rows_of(r) == by_quality);
    for (const auto& t : r.terms) CHECK(t.constant);  // calibrated, and every subset is the block
  }
  // The threshold keeps all but the lowest row: S = 60 cannot be selected from 59.
  const double lowest = *std::min_element(blk.q.begin(), blk.q.end());
  const double threshold = std::nextafter(lowest, 1.0);
  CHECK_THROWS_WITH(dm::select_block(blk.problem(), 0, 60, threshold, s),
                    Catch::Contains("prune") && Catch::Contains("keeps 59 items"));
}

TEST_CASE("resolve_credit: auto is per-item credit where only pairwise and dense facility location count",
          "[block_select][credit]") {
  using dm::credit_mode;
  const auto relaxed = dm::gradient_mode::relaxed;
  auto resolve = [&](double pairwise, double facility, double disf, double lambda = 0.5, bool knn = false,
                     dm::gradient_mode g = dm::gradient_mode::relaxed) {
    return dm::resolve_credit(credit_mode::automatic, dm::objective_weights{pairwise, facility, disf}, lambda, knn, g);
  };
  CHECK(resolve(1, 0, 0) == credit_mode::item);
  CHECK(resolve(0, 1, 0) == credit_mode::item);
  CHECK(resolve(1, 1, 0) == credit_mode::item);
  CHECK(resolve(0, 0, 1) == credit_mode::rollout);  // DiSF's marginals cost several evaluations
  CHECK(resolve(1, 0, 1) == credit_mode::rollout);
  CHECK(resolve(0, 1, 0, 0.5, true) == credit_mode::rollout);  // the kNN form has no marginals
  CHECK(resolve(1, 0, 1, 1.0) == credit_mode::item);           // lambda 1: no diversity term counts
  CHECK(resolve(1, 0, 0, 0.5, false, dm::gradient_mode::plackett_luce) == credit_mode::rollout);
  for (const credit_mode given : {credit_mode::rollout, credit_mode::item}) {  // given: as given
    CHECK(dm::resolve_credit(given, dm::objective_weights{0, 0, 1}, 0.5, false, relaxed) == given);
  }
}

/// Runs `work(w, all)` for workers 0..W-1 on threads, `all` an allgather among them (a barrier
/// per exchange), as MPI ranks exchange: the library's spread rules, tested without MPI.
template <class Work>
void on_workers(int workers, Work&& work) {
  std::barrier sync(workers);
  std::vector<std::vector<std::uint64_t>> slots(static_cast<std::size_t>(workers));
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      const dm::allgather_fn all = [&](const std::vector<std::uint64_t>& mine) {
        slots[static_cast<std::size_t>(w)] = mine;
        sync.arrive_and_wait();
        std::vector<std::uint64_t> every;
        for (const auto& s : slots) every.insert(every.end(), s.begin(), s.end());
        sync.arrive_and_wait();  // every worker has read the slots before any writes again
        return every;
      };
      work(w, all);
    });
  }
  for (auto& t : threads) t.join();
}

TEST_CASE("layout_corpus: consecutive files grouped to a block's rows, blocks per group", "[block_select]") {
  const std::vector<index_t> files{3, 3, 3, 10, 1};
  const dm::corpus_layout l = dm::layout_corpus(files, 5);
  // {3, 3}: 6 rows, 2 blocks; {3, 10}: 13 rows, 3 blocks; {1}: the rest, 1 block.
  CHECK(l.group_file == std::vector<index_t>{0, 2, 4, 5});
  CHECK(l.group_block == std::vector<index_t>{0, 2, 5, 6});
  CHECK(l.rows() == 20);
  CHECK(l.group_rows(1) == 13);
  CHECK(l.group_of_block(4) == 1);
  CHECK(l.group_of_block(5) == 2);
  const dm::corpus_layout one = dm::layout_corpus(std::vector<index_t>{2500}, 1000);  // one file: one group
  CHECK(one.groups() == 1);
  CHECK(one.blocks() == 3);
  CHECK(dm::layout_corpus(std::vector<index_t>{7}, 10).blocks() == 1);
  CHECK_THROWS_AS(dm::layout_corpus(files, 1), dm::invalid_input);
}

TEST_CASE("worker_blocks: consecutive ranges that cover every block once", "[block_select]") {
  for (index_t blocks : {1, 5, 17}) {
    for (index_t workers : {1, 3, 5, 20}) {
      std::vector<index_t> all;
      for (index_t w = 0; w < workers; ++w) {
        const auto mine = dm::worker_blocks(blocks, w, workers);
        CHECK(static_cast<index_t>(mine.size()) <= blocks / workers + 1);
        all.insert(all.end(), mine.begin(), mine.end());
      }
      std::vector<index_t> want(static_cast<std::size_t>(blocks));
      std::iota(want.begin(), want.end(), index_t{0});
      CHECK(all == want);
    }
  }
  CHECK_THROWS_AS(dm::worker_blocks(4, 2, 2), dm::invalid_input);
}

TEST_CASE("plan_corpus: blocks partition each group's rows by id hash, quotas sum to S", "[block_select]") {
  const auto id_of = [](index_t r) { return static_cast<dm::id_t>(r * 7 + 1); };
  dm::settings s;
  s.ratio = 0.1;
  // One file: the blocks of the whole corpus by id hash, S split by block size.
  const auto one = dm::plan_corpus(dm::layout_corpus(std::vector<index_t>{2500}, 1000), {0, 1}, s, id_of);
  CHECK(one.total == 250);
  REQUIRE(one.blocks.size() == 3);
  std::vector<index_t> sizes;
  for (std::size_t b = 0; b < 3; ++b) {
    for (index_t r : one.blocks[b]) CHECK(dm::block_of(id_of(r), 3) == static_cast<index_t>(b));
    sizes.push_back(static_cast<index_t>(one.blocks[b].size()));
  }
  CHECK(one.counts == dm::split_selection(sizes, 2500, 250));
  // Several groups: each block's rows in its group; S_g by group rows, then by block size.
  const dm::corpus_layout l = dm::layout_corpus(std::vector<index_t>{700, 700, 900, 333}, 1000);
  const auto all = dm::plan_corpus(l, {0, l.groups()}, s, id_of);
  CHECK(all.total == 263);
  std::set<index_t> seen;
  index_t sum = 0;
  for (index_t b = 0; b < l.blocks(); ++b) {
    const index_t g = l.group_of_block(b);
    for (index_t r : all.blocks[static_cast<std::size_t>(b)]) {
      CHECK(seen.insert(r).second);
      CHECK((r >= l.group_row(g) && r < l.group_row(g + 1)));
    }
    sum += all.counts[static_cast<std::size_t>(b)];
  }
  CHECK(static_cast<index_t>(seen.size()) == l.rows());
  CHECK(sum == all.total);
  const auto per_group = dm::group_selection(l, all.total);
  for (index_t g = 0; g < l.groups(); ++g) {
    index_t in_group = 0;
    for (index_t b = l.group_block[static_cast<std::size_t>(g)]; b < l.group_block[static_cast<std::size_t>(g) + 1]; ++b) {
      in_group += all.counts[static_cast<std::size_t>(b)];
    }
    CHECK(in_group == per_group[static_cast<std::size_t>(g)]);
  }
  // A worker plans its groups only, and plans them as the whole plan does.
  const auto part = dm::plan_corpus(l, {1, 2}, s, id_of);
  for (index_t b = 0; b < l.blocks(); ++b) {
    const bool held = l.group_of_block(b) == 1;
    CHECK(part.blocks[static_cast<std::size_t>(b)] == (held ? all.blocks[static_cast<std::size_t>(b)] : std::vector<index_t>{}));
    CHECK(part.counts[static_cast<std::size_t>(b)] == (held ? all.counts[static_cast<std::size_t>(b)] : 0));
  }
}

TEST_CASE("prune_threshold: workers holding parts find the value sorting all of them finds", "[block_select]") {
  std::mt19937_64 gen(5);
  std::vector<double> v(3001);
  for (auto& x : v) x = std::round(std::normal_distribution<double>(0.0, 3.0)(gen)) / 2;  // many ties
  v[7] = -0.0;
  v[8] = 0.0;
  v[9] = -1e300;
  v[10] = 5e-324;
  const auto n = static_cast<index_t>(v.size());
  for (const double prune : {0.001, 0.2, 0.5, 0.9999}) {
    dm::settings s;
    s.prune = prune;
    const double want = dm::detail::prune_threshold(s, v);
    CHECK(dm::prune_threshold(v, n, prune) == want);  // one process
    const std::vector<std::size_t> cut{0, 1000, 1000, 2500, v.size()};  // worker 1 holds no rows
    std::vector<double> got(4);
    on_workers(4, [&](int w, const dm::allgather_fn& all) {
      const std::span<const double> mine = std::span<const double>(v).subspan(cut[static_cast<std::size_t>(w)],
                                                                              cut[static_cast<std::size_t>(w) + 1] - cut[static_cast<std::size_t>(w)]);
      got[static_cast<std::size_t>(w)] = dm::prune_threshold(mine, n, prune, all);
    });
    for (const double g : got) CHECK(g == want);
  }
}

TEST_CASE("calibration_rows: workers holding parts draw the sample one process draws", "[block_select]") {
  const dm::corpus_layout l = dm::layout_corpus(std::vector<index_t>{3000, 2000, 4000}, 2000);
  std::vector<double> q(static_cast<std::size_t>(l.rows()));
  std::mt19937_64 gen(9);
  for (auto& x : q) x = std::uniform_real_distribution<double>(0.0, 1.0)(gen);
  const auto id_of = [](index_t r) { return static_cast<dm::id_t>(r * 13 + 5); };
  const auto combined = [&](index_t r) { return q[static_cast<std::size_t>(r)]; };
  for (const double prune : {0.0, 0.3}) {
    dm::block_run_settings s;
    s.run.ratio = 0.1;
    s.run.active_fraction = 0.02;
    auto plan = dm::plan_corpus(l, {0, l.groups()}, s.run, id_of);
    plan.prune_threshold = dm::corpus_prune_threshold(prune, l.rows(), std::vector<std::span<const double>>{q},
                                                      std::vector<double>{1.0});
    const auto one = dm::calibration_rows(plan, s, {0, l.rows()}, id_of, combined);
    REQUIRE(!one.rows.empty());
    // The sample is the m kept rows of smallest draw: checked against a sort of every kept row.
    std::vector<std::pair<double, index_t>> drawn;
    const auto key = dm::rng::block_key(s.run.seed, 0);
    for (index_t r = 0; r < l.rows(); ++r) {
      if (plan.prune_threshold && !(q[static_cast<std::size_t>(r)] >= *plan.prune_threshold)) continue;
      drawn.emplace_back(dm::rng::uniform01(key, id_of(r), 1u, dm::rng::stream_active_batch), r);
    }
    std::sort(drawn.begin(), drawn.end());
    std::vector<index_t> want;
    for (std::size_t i = 0; i < one.rows.size(); ++i) want.push_back(drawn[i].second);
    std::sort(want.begin(), want.end());
    CHECK(one.rows == want);
    // Three workers, each the rows of one group.
    std::vector<dm::calibration_sample> got(3);
    on_workers(3, [&](int w, const dm::allgather_fn& all) {
      got[static_cast<std::size_t>(w)] =
          dm::calibration_rows(plan, s, {l.group_row(w), l.group_row(w + 1)}, id_of, combined, all);
    });
    for (const auto& g : got) {
      CHECK(g.rows == one.rows);
      CHECK(g.subset == one.subset);
    }
  }
}

TEST_CASE("select_block: each optimizer selects S rows whose evaluation is the result's", "[block_select]") {
  const block blk = random_block(300, 8, 11);
  const auto p = blk.problem();
  for (auto opt : {dm::block_optimizer::continuous, dm::block_optimizer::pg, dm::block_optimizer::greedy,
                   dm::block_optimizer::lazy, dm::block_optimizer::stochastic}) {
    dm::block_run_settings s;
    s.optimizer = opt;
    s.weights = dm::objective_weights{1.0, 0.0, 0.5};
    s.run.steps = 10;
    s.run.rollouts = 8;
    s.ascent.iterations = 10;
    s.run.threads = 1;
    index_t steps = 0;
    dm::block_hooks h;
    h.on_step = [&](const dm::step_record&) { ++steps; };
    const dm::block_result r = dm::select_block(p, 2, 30, std::nullopt, s, h);
    INFO(dm::enum_name(opt));
    CHECK(r.selected == 30);
    CHECK(std::set<dm::id_t>(r.ids.begin(), r.ids.end()).size() == 30);
    CHECK(r.history.size() == static_cast<std::size_t>(steps));
    const bool learns = opt == dm::block_optimizer::continuous || opt == dm::block_optimizer::pg;
    CHECK(steps == (learns ? 10 : 0));
    const dm::block_result e = dm::evaluate_rows(p, 2, rows_of(r), std::nullopt, s);
    CHECK(e.objective == r.objective);
    REQUIRE(e.terms.size() == r.terms.size());
    for (std::size_t t = 0; t < e.terms.size(); ++t) CHECK(e.terms[t].raw == r.terms[t].raw);
  }
}

TEST_CASE("select_block: the stop hook ends every optimizer with run_stopped", "[block_select]") {
  const block blk = random_block(200, 6, 5);
  for (auto opt : {dm::block_optimizer::continuous, dm::block_optimizer::pg, dm::block_optimizer::greedy,
                   dm::block_optimizer::lazy, dm::block_optimizer::stochastic}) {
    dm::block_run_settings s;
    s.optimizer = opt;
    INFO(dm::enum_name(opt));
    dm::block_hooks h;
    h.stop = [] { return true; };
    CHECK_THROWS_AS(dm::select_block(blk.problem(), 0, 20, std::nullopt, s, h), dm::run_stopped);
    // A hook that says stop only once still ends the block (the stop is latched).
    bool asked = false;
    h.stop = [&asked] { return !std::exchange(asked, true); };
    CHECK_THROWS_AS(dm::select_block(blk.problem(), 0, 20, std::nullopt, s, h), dm::run_stopped);
  }
}

TEST_CASE("select_block: a pg block resumed from a snapshot selects what the whole run selects",
          "[block_select]") {
  const block blk = random_block(400, 8, 3);
  dm::block_run_settings s;
  s.optimizer = dm::block_optimizer::pg;
  s.run.steps = 24;
  s.run.rollouts = 8;
  const dm::block_result whole = dm::select_block(blk.problem(), 1, 40, std::nullopt, s);

  index_t snap_step = 0;
  std::vector<double> snap_logits;
  std::vector<dm::step_record> snap_history;
  dm::best_rollout snap_best;
  dm::block_hooks first;
  first.snapshot_every = 10;
  first.on_snapshot = [&](const dm::block_result& r, index_t step, std::span<const double> logits,
                          const dm::best_rollout& best) {
    if (step != 10) return;
    snap_step = step;
    snap_logits.assign(logits.begin(), logits.end());
    snap_history = r.history;
    snap_best = best;
  };
  (void)dm::select_block(blk.problem(), 1, 40, std::nullopt, s, first);
  REQUIRE(snap_step == 10);

  dm::block_hooks again;
  again.resume = [&](dm::block_result& r, index_t& step, std::vector<double>& logits, dm::best_rollout& best) {
    step = snap_step;
    logits = snap_logits;
    r.history = snap_history;
    best = snap_best;
    return true;
  };
  index_t steps_after = 0;
  again.on_step = [&](const dm::step_record&) { ++steps_after; };
  const dm::block_result resumed = dm::select_block(blk.problem(), 1, 40, std::nullopt, s, again);
  CHECK(steps_after == 14);  // steps 11 to 24 only: the run continued from the snapshot
  CHECK(resumed.ids == whole.ids);
  CHECK(resumed.objective == whole.objective);
  CHECK(resumed.history.size() == whole.history.size());
}

namespace {

/// A snapshot as a front end stores it: what `block_hooks::on_snapshot` received.
struct stored_snapshot {
  index_t step = 0;
  std::vector<double> state;
  std::vector<dm::step_record> history;
  dm::best_rollout best;
};

dm::block_hooks resume_from(const stored_snapshot& snap, index_t& steps_after) {
  dm::block_hooks h;
  h.resume = [&snap](dm::block_result& r, index_t& step, std::vector<double>& state, dm::best_rollout& best) {
    step = snap.step;
    state = snap.state;
    r.history = snap.history;
    best = snap.best;
    return true;
  };
  h.on_step = [&steps_after](const dm::step_record&) { ++steps_after; };
  return h;
}

void check_same_run(const dm::block_result& a, const dm::block_result& b) {
  CHECK(a.ids == b.ids);
  CHECK(a.objective == b.objective);
  CHECK(a.steps_run == b.steps_run);
  REQUIRE(a.history.size() == b.history.size());
  for (std::size_t t = 0; t < a.history.size(); ++t) {
    INFO("history record " << t);
    CHECK(a.history[t].step == b.history[t].step);
    CHECK(a.history[t].lr == b.history[t].lr);
    CHECK(a.history[t].reward_mean == b.history[t].reward_mean);
    CHECK(a.history[t].reward_max == b.history[t].reward_max);
  }
}

}  // namespace

TEST_CASE("select_block: a continuous block stopped at iteration k and resumed is the whole run, history included",
          "[block_select]") {
  const block blk = random_block(300, 8, 7);
  struct variant {
    const char* name;
    dm::objective_weights w;
    dm::step_rule rule;
    dm::continuous_parameterization par;
  };
  const dm::objective_weights pairwise{1.0, 0.0, 0.0};
  const dm::objective_weights disf{0.0, 0.0, 1.0};
  const dm::continuous_settings defaults;
  for (const variant& v : {variant{"pairwise, default", pairwise, defaults.rule, defaults.parameterization},
                           variant{"pairwise, adam", pairwise, dm::step_rule::adam, defaults.parameterization},
                           variant{"disf, default", disf, defaults.rule, defaults.parameterization},
                           variant{"disf, adam", disf, dm::step_rule::adam, defaults.parameterization},
                           variant{"disf, adam on logits", disf, dm::step_rule::adam,
                                   dm::continuous_parameterization::logits}}) {
    INFO(v.name);
    dm::block_run_settings s;
    s.optimizer = dm::block_optimizer::continuous;
    s.weights = v.w;
    s.ascent.iterations = 40;
    s.ascent.rule = v.rule;
    s.ascent.parameterization = v.par;
    // The uninterrupted run; its snapshot at the last iteration (hooks change nothing).
    std::map<index_t, stored_snapshot> snaps;
    dm::block_hooks watch;
    watch.snapshot_every = 20;
    auto keep = [&snaps](const dm::block_result& r, index_t it, std::span<const double> state,
                         const dm::best_rollout& best) {
      snaps[it] = stored_snapshot{it, {state.begin(), state.end()}, r.history, best};
    };
    watch.on_snapshot = keep;
    const dm::block_result whole = dm::select_block(blk.problem(), 1, 30, std::nullopt, s, watch);
    check_same_run(whole, dm::select_block(blk.problem(), 1, 30, std::nullopt, s));
    REQUIRE(whole.history.size() == 40);
    const stored_snapshot last = snaps.at(40);
    // Stopped after iteration 17 (a signal): snapshots at 10 and at 17.
    snaps.clear();
    dm::block_hooks first;
    first.snapshot_every = 10;
    first.on_snapshot = keep;
    index_t done = 0;
    first.on_step = [&](const dm::step_record&) { ++done; };
    first.stop = [&] { return done >= 17; };
    CHECK_THROWS_AS(dm::select_block(blk.problem(), 1, 30, std::nullopt, s, first), dm::run_stopped);
    REQUIRE(snaps.size() == 2);
    REQUIRE(snaps.count(10) == 1);
    REQUIRE(snaps.count(17) == 1);
    CHECK(snaps.at(17).history.size() == 17);
    CHECK_FALSE(snaps.at(17).best.rows.empty());  // the tracked read-out travels with the state
    for (const auto& [k, snap] : std::map<index_t, stored_snapshot>{{10, snaps.at(10)}, {17, snaps.at(17)}, {40, last}}) {
      INFO("resumed after iteration " << k);
      index_t after = 0;
      const dm::block_result resumed =
          dm::select_block(blk.problem(), 1, 30, std::nullopt, s, resume_from(snap, after));
      CHECK(after == 40 - k);
      check_same_run(resumed, whole);
    }
    // A state that does not fit the block and the settings is refused, not half-used.
    stored_snapshot bad = snaps.at(17);
    bad.state.pop_back();
    index_t after = 0;
    CHECK_THROWS_WITH(dm::select_block(blk.problem(), 1, 30, std::nullopt, s, resume_from(bad, after)),
                      Catch::Contains("resume_point.state"));
  }
}

TEST_CASE("select_block with certify: the selection unchanged, the certificate that of certify on its f",
          "[block_select][certify]") {
  const block blk = random_block(400, 8, 23);
  const auto p = blk.problem();
  struct run {
    dm::objective_weights w;
    dm::block_optimizer opt;
    index_t neighbors;
    const char* method;
  };
  for (const run& c : {run{{1.0, 0.0, 0.0}, dm::block_optimizer::continuous, 0, "frank-wolfe"},
                       run{{0.0, 1.0, 0.0}, dm::block_optimizer::lazy, 0, "lagrangian-dual"},
                       run{{0.0, 1.0, 0.0}, dm::block_optimizer::lazy, 12, "lagrangian-dual"},
                       run{{1.0, 0.0, 1.0}, dm::block_optimizer::stochastic, 0, "none"}}) {
    dm::block_run_settings s;
    s.optimizer = c.opt;
    s.weights = c.w;
    s.neighbors = c.neighbors;
    s.ascent.iterations = 10;
    s.run.seed = 5;
    s.run.threads = 1;
    const dm::block_result plain = dm::select_block(p, 3, 40, std::nullopt, s);
    s.certify = true;
    const dm::block_result r = dm::select_block(p, 3, 40, std::nullopt, s);
    INFO(c.method);
    CHECK(!plain.certificate);
    CHECK(r.ids == plain.ids);
    CHECK(r.objective == plain.objective);
    REQUIRE(r.certificate);
    const dm::block_certificate& got = *r.certificate;
    CHECK(got.method == c.method);
    // The library's certify on the f the block optimised (its mix, lambda and scales).
    const dm::settings o = dm::block_settings(s, 3, 40, std::nullopt);
    const auto m = dm::detail::blocks::block_mix(p, s, {});
    dm::objective_function<float, dm::standard_mix> f(p, m, o.lambda, o.quality, o.normalized, o.threads);
    f.set_scales(dm::scales_of(r.terms));
    dm::certify_settings cs;
    cs.seed = 5 ^ (3 * 0x9E3779B97F4A7C15ull);
    cs.threads = 1;
    const dm::certificate_report want = dm::certify(f, rows_of(r), cs);
    if (!want.certified) {  // DiSF's f, in float, differs from the block's by the rows' order
      CHECK(want.value == Approx(r.objective).epsilon(1e-5));
      CHECK(std::isnan(got.random_mean));  // no share: no random subsets drawn
      CHECK(std::isnan(got.bound));
      CHECK(std::isnan(got.certified_share));
      CHECK(got.reason == want.reason);
      continue;
    }
    CHECK(want.value == Approx(r.objective).epsilon(1e-12));
    CHECK(got.random_mean == want.random_mean);
    CHECK(got.bound == Approx(want.bound).epsilon(1e-12));
    CHECK(got.bound >= r.objective);
    CHECK(got.gap == got.bound - r.objective);
    CHECK(got.certified_share == Approx(want.certified_share).epsilon(1e-9));
    CHECK(got.certified_share > 0.0);
    CHECK(got.certified_share <= 1.0);
  }
}

TEST_CASE("a caller's preparation: learners on it select as on their own, another block's is refused",
          "[block_select]") {
  const block blk = random_block(300, 8, 11);
  const dm::problem<float> p = blk.problem();
  dm::settings o;
  o.count = 30;
  o.steps = 5;
  o.threads = 1;
  const dm::detail::prepared given = dm::detail::prepare(p, false, 1);

  const auto pg = dm::learner<>(o).select(p, dm::pairwise_similarity{});
  const auto pg_given = dm::learner<>(o).select(p, dm::pairwise_similarity{}, {}, nullptr, &given);
  CHECK(pg_given.ids == pg.ids);
  CHECK(pg_given.objective == pg.objective);

  dm::continuous_options co;
  co.common = o;
  co.ascent.iterations = 10;
  const auto cont = dm::continuous_learner(co).select(p, dm::pairwise_similarity{});
  const auto cont_given = dm::continuous_learner(co).select(p, dm::pairwise_similarity{}, {}, nullptr, &given);
  CHECK(cont_given.ids == cont.ids);
  CHECK(cont_given.objective == cont.objective);

  const block other = random_block(200, 8, 12);
  const dm::detail::prepared wrong = dm::detail::prepare(other.problem(), false, 1);
  CHECK_THROWS_WITH(dm::learner<>(o).select(p, dm::pairwise_similarity{}, {}, nullptr, &wrong),
                    Catch::Contains("prepared") && Catch::Contains("200 x 8"));
  CHECK_THROWS_WITH(dm::continuous_learner(co).select(p, dm::pairwise_similarity{}, {}, nullptr, &wrong),
                    Catch::Contains("prepared"));
}

namespace {

/// The program's block with the same f: one block, its weights, S = count.
dm::block_result program_block(const dm::problem<float>& p, index_t count, const dm::objective_weights& w,
                               const dm::settings& o) {
  dm::block_run_settings s;
  s.run = o;
  s.weights = w;
  return dm::select_block(p, 0, count, std::nullopt, s);
}

}  // namespace

TEST_CASE("select: auto runs the program's optimizer and selects the program's ids", "[select]") {
  const dmtest::float_block blk = random_block(400, 8, 21);
  const dm::problem<float> p = blk.problem();
  dm::settings o;
  o.seed = 5;
  o.threads = 1;
  const auto ids = [](const dm::selection_result& r) { return r.ids; };
  struct run_case {
    const char* name;
    index_t count;
    dm::objective_weights w;
    dm::block_optimizer expected;
  };
  // Pairwise: naive greedy while S <= 377 on 8 columns (the cost model), continuous above it;
  // facility location alone: lazy; beside pairwise (no relaxation for dense facility): stochastic.
  for (const run_case& c : {run_case{"pairwise, small S", 40, {1.0, 0.0, 0.0}, dm::block_optimizer::greedy},
                            run_case{"pairwise, large S", 390, {1.0, 0.0, 0.0}, dm::block_optimizer::continuous},
                            run_case{"facility", 40, {0.0, 1.0, 0.0}, dm::block_optimizer::lazy},
                            run_case{"pairwise + facility", 40, {1.0, 1.0, 0.0}, dm::block_optimizer::stochastic},
                            run_case{"disf", 300, {0.0, 0.0, 1.0}, dm::block_optimizer::continuous}}) {
    INFO(c.name);
    o.count = c.count;
    const dm::block_result program = program_block(p, c.count, c.w, o);
    REQUIRE(program.optimizer == dm::enum_name(c.expected));
    const auto m = dm::mix(dm::weighted{dm::pairwise_similarity{}, c.w.pairwise},
                           dm::weighted{dm::facility_location{}, c.w.facility}, dm::weighted{dm::disf{}, c.w.disf});
    const dm::selection_result chosen = dm::select(p, m, o);
    CHECK(ids(chosen) == program.ids);
    CHECK(ids(chosen) == ids(dm::select(p, m, o, c.expected)));
    // f as the program reports it: the same terms, scales and value.
    REQUIRE(chosen.evaluated);
    REQUIRE(chosen.terms.size() == program.terms.size());
    for (std::size_t t = 0; t < chosen.terms.size(); ++t) CHECK(chosen.terms[t].scale == program.terms[t].scale);
    CHECK(chosen.objective == Approx(program.objective).epsilon(1e-12));
  }
  // A single objective is the mix of it alone.
  o.count = 40;
  CHECK(ids(dm::select(p, dm::facility_location{}, o)) ==
        ids(dm::select(p, dm::facility_location{}, o, dm::block_optimizer::lazy)));
}
