// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Certified selections (docs/method.md section 7): for the f a run optimised
/// (`objective_function`, with its scales) and a selection U of S items of the block, an upper
/// bound B >= max_{|U'| = S} f(U') computed from certificates the library re-checks, and how far
/// U can be from the optimum: gap = B - f(U) and the certified share
/// (f(U) - mean f of random subsets) / (B - that mean).
///
///   datamask::objective_function<float, decltype(mix)> f(block, mix, lambda);
///   f.set_scales(scales_of_the_run);
///   const datamask::certificate_report r = datamask::certify(f, result.rows);
///   if (r.certified) std::printf("f = %.6f <= optimum <= %.6f\n", r.value, r.bound);
///
/// How each term is bounded (the diversity objective's `boundable_objective` capability):
/// - quality only (lambda = 1): exact, the S best quality scores;
/// - pairwise similarity + quality: jointly, the concave relaxation of docs/method.md 7.1;
/// - facility location (dense, or on a kNN graph) + quality: jointly, the Lagrangian dual of the
///   LP relaxation (docs/method.md 7.2); on the graph the bound is for the sparse objective;
/// - a mix of several diversity terms: the sum of the terms' bounds (the maximum of a sum is at
///   most the sum of the maxima), the quality term's modular part joined to the first of them;
/// - a term without the capability (DiSF, a user's objective): no certificate. The report then
///   says so and gives no bound, rather than a loose or unproven one.
/// The bounds use weak duality or concavity only, so a smaller budget gives a looser bound, never
/// a wrong one. They are bounds on f in exact arithmetic; f computed in float (dense facility
/// location's products in the embeddings' type) can differ from it by float rounding, and the
/// reported bound is max(B, f(U)).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "datamask/core/concepts.hpp"
#include "datamask/core/error.hpp"
#include "datamask/objectives/function.hpp"
#include "datamask/objectives/detail/pairwise_bound.hpp"
#include "datamask/core/philox.hpp"

namespace datamask {

/// @brief The settings of `certify`.
struct certify_settings {
  /// Each bound's budget: Frank-Wolfe steps for pairwise similarity, dual steps for facility
  /// location, each an evaluation of the dual but a restart (0: each method's default, 30 and
  /// 100: benchmarks/certificates/STUDY.md).
  index_t iterations = 0;
  /// Uniformly random S-subsets of the block whose mean f is the "random" of the certified share
  /// (0: none, and no share unless `random_mean` is given). Drawn only for a certified selection
  /// (without a bound there is no share to give), and only where f has no exact mean over every
  /// S-subset (`objective_function::subset_mean`: quality, pairwise similarity and facility
  /// location have one; a user's objective may, `subset_mean_objective`).
  index_t random_subsets = 256;
  std::uint64_t seed = 0;  ///< the subsets' draw (Philox, keyed by the seed)
  /// The mean f of random subsets when the caller has it: no subsets are drawn.
  std::optional<double> random_mean;
  int threads = 0;  ///< 0: all
  /// What a bound may hold beyond O(n): dense facility location keeps the pairs its dual can
  /// read (those above a quarter of what the selection gives each item, 12 bytes each) when they
  /// fit, else recomputes the similarities in every evaluation. 1 GiB holds the pairs of the
  /// program's 20,000-item demo block, whose certificate is then an order of magnitude faster
  /// (benchmarks/RESULTS.md, "Certificates").
  std::size_t memory_bytes = std::size_t{1} << 30;
};

/// @brief How one term was bounded.
struct term_certificate {
  std::string name;           ///< the diversity term's name, or "quality" for quality only
  std::string method;         ///< "frank-wolfe", "lagrangian-dual", "top-S", or "none"
  bool with_quality = false;  ///< the quality term was bounded jointly with this term
  double bound = std::numeric_limits<double>::quiet_NaN();    ///< re-checked from the certificate
  double claimed = std::numeric_limits<double>::quiet_NaN();  ///< what the method reported
  index_t evaluations = 0;          ///< evaluations of the bound the method made
  double seconds = 0.0;             ///< the method and the re-check
  std::vector<double> certificate;  ///< p (pairwise) or lambda (facility location)
};

/// @brief A selection's certificate: f(U), the bound, the gap and the certified share.
struct certificate_report {
  bool certified = false;  ///< false: "no certificate" (a term has no bound; `reason` says which)
  std::string reason;
  index_t size = 0;    ///< S
  double value = 0.0;  ///< f(U)
  /// max(sum of the terms' re-checked bounds, f(U)) >= max f over sets of S items; NaN when not
  /// certified.
  double bound = std::numeric_limits<double>::quiet_NaN();
  double gap = std::numeric_limits<double>::quiet_NaN();          ///< bound - value >= 0
  /// mean f of random S-subsets (NaN when not certified: none are drawn): exact (over every
  /// S-subset) where f has a closed form, else over `certify_settings::random_subsets` draws
  double random_mean = std::numeric_limits<double>::quiet_NaN();
  index_t random_draws = 0;  ///< the subsets drawn for `random_mean` (0: exact, given, or none)
  /// (value - random_mean) / (bound - random_mean): the share of the best possible gain over
  /// random that U is proven to reach. NaN without a bound or a random mean.
  double certified_share = std::numeric_limits<double>::quiet_NaN();
  double seconds = 0.0;         ///< the bounds and their re-checks
  double random_seconds = 0.0;  ///< the random subsets' evaluations
  std::vector<term_certificate> terms;
};

namespace detail::certify_impl {

/// The reserved stream of the random subsets' draws.
inline constexpr std::uint32_t stream_random_subsets = 0xFFFFFFFCu;

/// Subset g by Floyd's algorithm: for j = n - S, ..., n - 1 draw t uniform in [0, j] and take t,
/// or j when t is taken already; every S-subset is equally likely, in O(S) work and draws (a
/// draw that ranks all n rows cost more than evaluating f on the subset). `taken` (n flags, all
/// clear) is cleared again on return.
inline std::vector<index_t> random_subset(rng::philox_key key, index_t n, index_t size, std::uint32_t g,
                                          std::vector<char>& taken) {
  std::vector<index_t> rows;
  rows.reserve(static_cast<std::size_t>(size));
  for (index_t j = n - size; j < n; ++j) {
    const double u = rng::uniform01(key, static_cast<std::uint64_t>(j), g, stream_random_subsets);
    const index_t t = std::min(j, static_cast<index_t>(u * static_cast<double>(j + 1)));
    const index_t pick = taken[static_cast<std::size_t>(t)] ? j : t;
    taken[static_cast<std::size_t>(pick)] = 1;
    rows.push_back(pick);
  }
  for (index_t r : rows) taken[static_cast<std::size_t>(r)] = 0;
  return rows;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace detail::certify_impl

/// @brief The certified share of a value f(U) under a bound B and the mean f of random subsets
/// R: (f(U) - R) / (B - R), the share of the best possible gain over random that U is proven to
/// reach; NaN when B or R is not finite or B <= R (no gain over random to share). The one formula
/// of `certify` and of the totals over blocks (`total_certificate`).
[[nodiscard]] inline double certified_share(double value, double bound, double random_mean) {
  if (!std::isfinite(bound) || !std::isfinite(random_mean) || !(bound > random_mean)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return (value - random_mean) / (bound - random_mean);
}

/// @brief The mean f over `count` uniformly random subsets of `size` rows of the block, drawn
/// from `seed` (Philox): the "random" of the certified share.
template <class T, class D>
[[nodiscard]] double random_subsets_mean(const objective_function<T, D>& f, index_t size,
                                         index_t count, std::uint64_t seed) {
  DATAMASK_EXPECTS(size >= 1 && size <= f.size(), "size", "must be in [1, ", f.size(), "], found ",
                   size);
  DATAMASK_EXPECTS(count >= 1, "random subsets", "must be at least 1, found ", count);
  const rng::philox_key key = rng::block_key(seed, 0);
  std::vector<char> taken(static_cast<std::size_t>(f.size()), 0);
  double sum = 0.0;
  for (index_t g = 0; g < count; ++g) {
    sum += f(detail::certify_impl::random_subset(key, f.size(), size, static_cast<std::uint32_t>(g), taken));
  }
  return sum / static_cast<double>(count);
}

namespace detail::certify_impl {

/// The quality term's modular part of f on sets of `size` rows: f_q(U) = sum_{i in U} linear_i
/// (empty when f has no quality term).
template <class T, class D>
std::vector<double> modular_part(const objective_function<T, D>& f, index_t size) {
  if (!f.has_quality_term()) return {};
  const term_value& q = f.terms()[0];
  const double per = f.aggregate() == quality_aggregate::mean ? 1.0 / static_cast<double>(size) : 1.0;
  const double c = q.weight / q.scale * per;
  DATAMASK_EXPECTS(std::isfinite(c), "scales", "the quality term's weight over its scale is not finite");
  std::vector<double> linear(static_cast<std::size_t>(f.size()));
  for (std::size_t i = 0; i < linear.size(); ++i) linear[i] = c * f.quality()[i];
  return linear;
}

/// Each term's certificate into `out.terms`, in f's order: the modular part `linear` joins the
/// first term with a bound (a joint bound is tighter than a sum), or is bounded alone by its S
/// best values when f is quality only. `out.certified` says whether every term has one, and
/// `out.reason` why the first without one has none.
template <class T, class D>
void bound_terms(const objective_function<T, D>& f, std::span<const index_t> sorted,
                 std::span<const double> linear, const certify_settings& s, certificate_report& out) {
  const auto& terms = f.terms();
  const auto size = static_cast<index_t>(sorted.size());
  bool quality_placed = !f.has_quality_term();
  bool missing = false;
  f.mix().for_each([&](auto i, const auto& objective, double /*weight*/) {
    const int slot = f.term_slots()[i];
    if (slot < 0) return;  // switched off
    using objective_t = std::decay_t<decltype(objective)>;
    const term_value& term = terms[static_cast<std::size_t>(slot)];
    term_certificate tc;
    tc.name = term.name;
    tc.method = "none";
    const double w = term.weight / term.scale;
    if constexpr (boundable_objective<objective_t, T>) {
      if (std::isfinite(w) && w >= 0.0) {
        const auto t1 = std::chrono::steady_clock::now();
        const bound_view<T> v{f.embeddings(), f.inv_norms().data(), f.sq_norms().data(),
                              quality_placed ? std::span<const double>{} : linear, w, size, sorted,
                              s.iterations, s.threads, s.memory_bytes};
        tc.with_quality = !quality_placed;
        quality_placed = true;
        const bound_certificate b = objective.bound(v);
        tc.method = std::string(b.method);
        tc.claimed = b.bound;
        tc.evaluations = b.evaluations;
        tc.bound = objective.check_bound(v, b.certificate);
        tc.certificate = b.certificate;
        tc.seconds = seconds_since(t1);
      } else if (!missing) {
        out.reason = detail::concat("'", tc.name, "' has weight over scale ", w,
                                    ": its bound needs a finite value >= 0");
      }
    } else if (!missing) {
      out.reason = detail::concat("'", tc.name, "' has no certificate (no bound is known for it)");
    }
    missing = missing || tc.method == "none";
    out.terms.push_back(std::move(tc));
  });
  if (!quality_placed) {  // quality only: the S best scores, exactly
    term_certificate tc;
    tc.name = "quality";
    tc.method = "top-S";
    tc.with_quality = true;
    tc.bound = tc.claimed =
        detail::pairwise_bound::host_top_sum(std::vector<double>(linear.begin(), linear.end()), size);
    tc.evaluations = 1;
    out.terms.push_back(std::move(tc));
  }
  out.certified = !missing;
}

}  // namespace detail::certify_impl

/// @brief Certifies the selection `rows` (S distinct rows of the block) for f: an upper bound on
/// max f over every set of S rows, re-checked from its certificate, and the report's fields
/// (see `certificate_report`). The bound is over the whole block (rows a run pruned included).
/// @throws invalid_input for rows outside the block, repeated, or none.
template <class T, class D>
[[nodiscard]] certificate_report certify(const objective_function<T, D>& f,
                                         std::span<const index_t> rows,
                                         const certify_settings& s = {}) {
  using clock = std::chrono::steady_clock;
  namespace ci = detail::certify_impl;
  const std::vector<index_t> sorted =
      detail::sorted_distinct_rows(std::vector<index_t>(rows.begin(), rows.end()), f.size(), "rows");
  const auto size = static_cast<index_t>(sorted.size());
  DATAMASK_EXPECTS(size >= 1, "rows", "a certificate needs a selection of at least one item");
  certificate_report out;
  out.size = size;
  out.value = f(sorted);
  const std::vector<double> linear = ci::modular_part(f, size);

  const auto t0 = clock::now();
  ci::bound_terms(f, std::span<const index_t>(sorted), std::span<const double>(linear), s, out);
  if (out.certified) {
    double total = 0.0;
    for (const auto& tc : out.terms) total += tc.bound;
    out.bound = std::max(total, out.value);
    out.gap = out.bound - out.value;
  }
  out.seconds = ci::seconds_since(t0);

  const auto t2 = clock::now();
  if (s.random_mean) {
    out.random_mean = *s.random_mean;
  } else if (s.random_subsets > 0 && out.certified) {
    if (const std::optional<double> exact = f.subset_mean(size)) {
      out.random_mean = *exact;
    } else {
      out.random_mean = random_subsets_mean(f, size, s.random_subsets, s.seed);
      out.random_draws = s.random_subsets;
    }
  }
  out.random_seconds = ci::seconds_since(t2);
  if (out.certified) out.certified_share = certified_share(out.value, out.bound, out.random_mean);
  return out;
}

}  // namespace datamask
