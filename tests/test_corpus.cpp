// SPDX-License-Identifier: Apache-2.0
// The front end's corpus over 16-bit shards: its blocks hold the rows as stored (float16 or
// bfloat16, half the bytes of float32 ones) and every optimizer selects on them the ids and f it
// selects on the float32 corpus of the same values; a run with an objective given at run time,
// or shards of mixed kinds, gets float32 blocks.
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include <datamask/frontend/corpus.hpp>

namespace dm = datamask;
using dm::index_t;

namespace {

/// An n x d clustered corpus in T, the float32 corpus of the same values, and scores.
template <class T>
struct twin_corpus {
  index_t n;
  index_t d;
  std::vector<T> low;
  std::vector<float> wide;
  std::vector<double> q;

  twin_corpus(index_t rows, index_t cols) : n(rows), d(cols) {
    std::mt19937_64 g(5);
    std::normal_distribution<double> normal;
    std::vector<double> centres(static_cast<std::size_t>(5 * d));
    for (auto& c : centres) c = 2.0 * normal(g);
    for (index_t i = 0; i < n; ++i) {
      const auto c = static_cast<std::size_t>(g() % 5);
      for (index_t j = 0; j < d; ++j) {
        low.push_back(T::from(static_cast<float>(centres[c * static_cast<std::size_t>(d) + j] + normal(g))));
        wide.push_back(low.back());
      }
      q.push_back(std::uniform_real_distribution<double>()(g));
    }
  }

  /// The corpus of `values` in `shards` shards of `kind`.
  template <class U>
  dmfront::corpus make(const std::vector<U>& values, dm::element_kind kind, index_t shards) const {
    dmfront::corpus k;
    const index_t per = n / shards;
    for (index_t s = 0; s < shards; ++s) {
      const index_t rows = s + 1 == shards ? n - s * per : per;
      k.add_shard(values.data() + s * per * d, kind, rows, d, "shard");
    }
    k.close_shards();
    k.add_quality("quality", q, "the corpus");
    k.weigh_quality({}, "weights");
    return k;
  }
};

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

/// The totals of a run of `s` over `k` in blocks of `block_size` rows.
dmfront::run_totals run(const dmfront::corpus& k, dm::block_run_settings s, index_t block_size) {
  const dm::corpus_plan plan = k.plan(s.run, block_size);
  (void)dmfront::calibrate_corpus(k, plan, s, dmfront::planning{{0, k.n}, {}});
  std::vector<index_t> all(plan.blocks.size());
  std::iota(all.begin(), all.end(), index_t{0});
  const auto blocks = dmfront::run_blocks(k, plan, s, all, {});
  return dmfront::totals_of(blocks, plan.total, "auto", true);
}

/// Two runs' ids, f and certificates agree, bit for bit.
void check_same_run(const dmfront::run_totals& a, const dmfront::run_totals& b) {
  CHECK(a.ids == b.ids);
  CHECK(same_bits(a.objective, b.objective));
  REQUIRE(a.certificate.has_value() == b.certificate.has_value());
  if (a.certificate) {
    CHECK(a.certificate->method == b.certificate->method);
    CHECK(same_bits(a.certificate->bound, b.certificate->bound));
  }
}

template <class T>
void check_twin_runs(dm::element_kind kind) {
  const twin_corpus<T> t(1200, 12);
  const dmfront::corpus low = t.make(t.low, kind, 2);
  const dmfront::corpus wide = t.make(t.wide, dm::element_kind::float32, 2);
  CHECK(low.block_element(true) == kind);
  CHECK(low.block_element(false) == dm::element_kind::float32);
  // The block holds the stored bits (no float32 copy between the file and the learner).
  const std::vector<index_t> rows{3, 700, 11};
  const auto b = low.block<T>(rows, false, 1);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (index_t j = 0; j < t.d; ++j) {
      CHECK(b.embeddings(static_cast<index_t>(i), j).bits == t.low[static_cast<std::size_t>(rows[i] * t.d + j)].bits);
    }
  }
  for (const auto optimizer : {dm::block_optimizer::continuous, dm::block_optimizer::pg, dm::block_optimizer::lazy}) {
    for (const int objective : {0, 1, 2}) {  // pairwise + DiSF; dense facility location; on a kNN graph
      CAPTURE(static_cast<int>(optimizer), objective);
      if (optimizer == dm::block_optimizer::continuous && objective == 1) continue;  // no relaxation
      dm::block_run_settings s;
      s.run.ratio = 0.1;
      s.run.lambda = 0.4;
      s.run.steps = 10;
      s.run.threads = 2;
      s.ascent.iterations = 30;
      s.optimizer = optimizer;
      s.weights = objective == 0 ? dm::objective_weights{1.0, 0.0, 0.5} : dm::objective_weights{0.0, 1.0, 0.0};
      s.neighbors = objective == 2 ? 10 : 0;
      s.certify = optimizer == dm::block_optimizer::lazy;  // the certificate of each block's f
      check_same_run(run(low, s, 500), run(wide, s, 500));
      // f of any subset, the corpus as one block (`evaluate_subset`).
      const std::vector<index_t> some{5, 17, 400, 800, 1100, 1199};
      CHECK(same_bits(dmfront::evaluate_subset(low, some, s, "ids").objective,
                      dmfront::evaluate_subset(wide, some, s, "ids").objective));
    }
  }
}

}  // namespace

TEST_CASE("corpus: 16-bit shards give 16-bit blocks that select the float32 corpus's ids and f", "[corpus][half]") {
  check_twin_runs<dm::float16>(dm::element_kind::float16);
  check_twin_runs<dm::bfloat16>(dm::element_kind::bfloat16);
}

TEST_CASE("corpus: mixed shard kinds and objectives given at run time get float32 blocks", "[corpus][half]") {
  const twin_corpus<dm::float16> t(600, 8);
  dmfront::corpus mixed;
  mixed.add_shard(t.low.data(), dm::element_kind::float16, 300, t.d, "half");
  mixed.add_shard(t.wide.data() + 300 * t.d, dm::element_kind::float32, 300, t.d, "float");
  mixed.close_shards();
  CHECK(mixed.block_element(true) == dm::element_kind::float32);
  // Another worker's shard (no data, never read) does not count: the held float16 shard decides.
  dmfront::corpus held;
  held.add_shard(t.low.data(), dm::element_kind::float16, 300, t.d, "mine");
  held.add_shard(nullptr, dm::element_kind::float32, 300, t.d, "theirs");
  held.close_shards();
  CHECK(held.block_element(true) == dm::element_kind::float16);
  // A user's term reads float32 rows: the corpus's float16 rows reach it widened, and the run
  // is the float32 corpus's.
  const dmfront::corpus low = t.make(t.low, dm::element_kind::float16, 1);
  const dmfront::corpus wide = t.make(t.wide, dm::element_kind::float32, 1);
  dm::block_run_settings s;
  s.run.ratio = 0.1;
  s.run.threads = 1;
  s.optimizer = dm::block_optimizer::lazy;
  s.weights = dm::objective_weights{0.0, 0.0, 0.0};
  auto user = std::make_shared<dm::external_objective>();
  user->label = "spread";
  user->score = [](const dm::batch_view<float>& b, std::span<double> out) {
    for (index_t g = 0; g < b.subsets.rows; ++g) {
      double sum = 0.0;
      for (index_t j = 0; j < b.subsets.cols; ++j) sum += b.embeddings(b.subsets(g, j), 0);
      out[static_cast<std::size_t>(g)] = -sum * sum;
    }
  };
  s.external = {dm::given_objective{user, 1.0}};
  check_same_run(run(low, s, 1000), run(wide, s, 1000));
  s.weights = dm::objective_weights{1.0, 0.0, 0.0};
  s.external[0].weight = 0.0;  // given, but not in f: 16-bit blocks
  check_same_run(run(low, s, 1000), run(wide, s, 1000));
}
