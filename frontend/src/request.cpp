// SPDX-License-Identifier: Apache-2.0

#include "datamask/frontend/request.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

#include <datamask/core/error.hpp>

namespace dmfront {

namespace {

using datamask::block_optimizer;

constexpr optimizer_set bit(block_optimizer o) { return 1u << static_cast<unsigned>(o); }
constexpr optimizer_set every_optimizer = ~0u;
constexpr optimizer_set learners = bit(block_optimizer::continuous) | bit(block_optimizer::pg);

/// The front ends' outputs of a learner's steps (datamask-select's --log, --plot, --checkpoint-every).
bool step_output(std::string_view name) { return name == "log" || name == "plot" || name == "checkpoint-every"; }

/// What an option does, as a refusal says it: "sets the continuous learner".
std::string what_it_sets(std::string_view name) {
  const optimizer_set a = applies_to(name);
  if (name == "checkpoint-every") {
    return "snapshots a learner's steps (the greedy baselines checkpoint whole blocks: an interrupted block "
           "restarts on resume)";
  }
  if (step_output(name)) return "logs a learner's steps (a greedy baseline's picks are in the output, in the order picked)";
  if (a == bit(block_optimizer::continuous)) return "sets the continuous learner";
  if (a == bit(block_optimizer::pg)) return "sets the policy-gradient learner";
  return "sets stochastic greedy (the baseline, or the continuous learner's stochastic start)";
}

/// How to make an option apply, as a refusal says it: "add --optimizer continuous".
std::string remedy(std::string_view name, block_optimizer running, const spelling& sp) {
  const auto use = [&](const char* o) { return sp.assign("optimizer", o, true); };
  if (step_output(name)) return "drop it, or use " + use("continuous") + " or pg";
  const optimizer_set a = applies_to(name);
  if (a == bit(block_optimizer::continuous)) return "add " + use("continuous");
  if (a == bit(block_optimizer::pg)) {
    return "add " + use("pg") +
           (running == block_optimizer::continuous ? " (or use " + sp.option("iterations") + " for the continuous learner)"
                                                   : std::string());
  }
  return "add " + use("stochastic");
}

/// The number of f's terms that count: quality when lambda > 0, then each diversity objective
/// with a positive weight when lambda < 1 (`settings::scales` has one value for each).
std::size_t counted_terms(const datamask::block_run_settings& s) {
  std::size_t terms = s.run.lambda > 0.0 ? 1 : 0;
  if (s.run.lambda < 1.0) {
    for (const double w : {s.weights.pairwise, s.weights.facility, s.weights.disf}) terms += w > 0.0 ? 1 : 0;
    for (const auto& g : s.external) terms += g.weight > 0.0 ? 1 : 0;
  }
  return terms;
}

void check_quality(const run_request& r, const spelling& sp) {
  if (r.quality) return;
  const auto& run = r.settings.run;
  const std::string quality = sp.option("quality");
  DATAMASK_EXPECTS(run.lambda <= 0.0, quality, "required unless ", sp.assign("lambda", "0", false), " (",
                   sp.option("lambda"), " weighs the quality term)");
  DATAMASK_EXPECTS(run.init != datamask::init_mode::quality, sp.option("init"), "quality needs quality scores (",
                   quality, ")");
  DATAMASK_EXPECTS(run.prune <= 0.0, sp.option("prune"), "needs quality scores (", quality, ")");
}

/// Scales given set fixed scaling (one f for every block and seed); fixed scaling needs them.
void check_scales(run_request& r, const spelling& sp) {
  auto& run = r.settings.run;
  using datamask::term_scaling;
  if (run.scales.empty()) {
    DATAMASK_EXPECTS(run.scaling != term_scaling::fixed, sp.option("scaling"), "fixed needs ", sp.option("scales"));
    return;
  }
  DATAMASK_EXPECTS(!r.has("scaling") || run.scaling == term_scaling::fixed, sp.option("scales"), "given with ",
                   sp.assign("scaling", datamask::enum_name(run.scaling), true), "; fixed scales need ",
                   sp.assign("scaling", "fixed", true));
  run.scaling = term_scaling::fixed;
  const std::size_t terms = counted_terms(r.settings);
  DATAMASK_EXPECTS(run.scales.size() == terms, sp.option("scales"), run.scales.size(), " values for ", terms,
                   " terms of f (quality when ", sp.option("lambda"), " > 0, then each ", sp.option("objective"),
                   " with a positive weight when ", sp.option("lambda"), " < 1)");
}

/// The kNN graph: built (neighbors) or given (graph), not both, only for facility location; the
/// builder's options only where a graph is built.
void check_graph(const run_request& r, const spelling& sp) {
  const auto& s = r.settings;
  DATAMASK_EXPECTS(s.neighbors >= 0, sp.option("neighbors"), "must be >= 0 (0: dense facility location), found ",
                   s.neighbors);
  const bool given_graph = r.graph || s.graph != nullptr;
  for (const auto& name : r.given) {
    if (!graph_build_option(name)) continue;
    DATAMASK_EXPECTS(s.neighbors > 0, sp.option(name), "sets how ", sp.option("neighbors"),
                     " builds each block's kNN graph, but no ", sp.option("neighbors"), " is given",
                     given_graph ? " (" + sp.option("graph") + " gives a graph, none is built)" : std::string());
    DATAMASK_EXPECTS(name == "knn-build" || s.learn.knn_builder != datamask::knn_build::exact, sp.option(name),
                     "sets the clustered kNN builder, but ", sp.option("knn-build"), " is exact");
  }
  if (s.neighbors == 0 && !given_graph) return;
  const std::string which = s.neighbors > 0 ? sp.option("neighbors") : sp.option("graph");
  DATAMASK_EXPECTS(s.neighbors == 0 || !given_graph, sp.option("graph"), "give ", sp.option("neighbors"), " or ",
                   sp.option("graph"), ", not both");
  DATAMASK_EXPECTS(s.weights.facility > 0.0, which, "sets facility location's kNN graph, but no ",
                   sp.assign("objective", "facility", true), " with a positive weight is given");
}

/// What a run reads, as the rules of `unread` ask it: f's terms, how the graph is made, whether
/// it draws, and the optimizer.
struct run_reads {
  const run_request& r;
  block_optimizer o;
  const spelling& sp;
  std::optional<index_t> largest;  ///< the largest block's items, once the corpus is planned

  [[nodiscard]] const datamask::block_run_settings& s() const { return r.settings; }
  [[nodiscard]] bool diversity() const { return s().run.lambda < 1.0; }
  [[nodiscard]] bool pairwise() const { return diversity() && s().weights.pairwise > 0.0; }
  [[nodiscard]] bool facility() const { return diversity() && s().weights.facility > 0.0; }
  [[nodiscard]] bool external() const { return diversity() && s().weighs_external(); }
  [[nodiscard]] bool dense() const { return facility() && !r.knn(); }
  [[nodiscard]] bool built() const {
    return facility() && s().neighbors > 0;
  }  // under the kernel, not given
  /// knn-build auto builds the graphs of blocks up to `knn_exact_up_to` items exactly, unseeded;
  /// before the corpus is planned, any block may be larger.
  [[nodiscard]] bool clustered() const {
    const auto b = s().learn.knn_builder;
    return built() && (b == datamask::knn_build::clustered ||
                       (b == datamask::knn_build::automatic &&
                        (!largest || *largest > datamask::knn_exact_up_to)));
  }
  [[nodiscard]] bool greedy() const {
    return o == block_optimizer::greedy || o == block_optimizer::lazy ||
           o == block_optimizer::stochastic;
  }
  [[nodiscard]] bool stochastic_start() const {
    return o == block_optimizer::continuous && s().polish.enabled && s().polish.stochastic_start;
  }
  [[nodiscard]] std::string is(std::string_view option, std::string_view value) const {
    return sp.assign(option, value, true);
  }
  [[nodiscard]] std::string no_facility() const {
    return "f has no facility location term (" +
           (diversity() ? "add " + is("objective", "facility")
                        : is("lambda", "1") + " weighs no diversity") +
           ")";
  }
};

/// `unread`'s rules of f's terms: the similarity, the norms, facility location's cache, graph,
/// reference set and bound, the quality term and the diversity objectives.
std::string unread_by_terms(std::string_view name, const run_reads& f) {
  const auto& s = f.s();
  if (name == "kernel" || name == "gamma") {
    const std::string what = name == "kernel" ? "sets facility location's similarity"
                                              : "sets the rbf kernel's bandwidth";
    if (!f.facility()) return what + ", but " + f.no_facility();
    if (!f.dense() && !f.built()) {
      return what + ", but the kNN graph is given (" + f.sp.option("graph") +
             "), with its own similarities";
    }
    if (name == "gamma" && s.learn.kernel != datamask::similarity_kernel::rbf) {
      return what + ", but the kernel is " + std::string(datamask::enum_name(s.learn.kernel)) +
             "; add " + f.is("kernel", "rbf");
    }
  }
  const bool norms = (f.dense() || f.built()) && s.learn.kernel != datamask::similarity_kernel::dot;
  if (name == "normalized" && !(f.pairwise() || f.external() || norms)) {
    return "says the embeddings are unit-normalised, but no term of f reads their norms "
           "(pairwise similarity does, and facility location under the cosine, cosine2 and rbf "
           "kernels)";
  }
  if (name == "facility-cache" && !(f.dense() && f.greedy())) {
    return "sets the greedy baselines' cache of dense facility location's similarities, but " +
           (f.dense() ? "the optimizer is " + std::string(datamask::enum_name(f.o))
                      : "f has no dense facility location term");
  }
  if (name == "certify-memory" && !f.dense()) {
    return "sets the memory of dense facility location's bound, but f has no dense facility "
           "location term";
  }
  constexpr bool external_bounds =
      datamask::boundable_objective<datamask::external_objective, float>;
  if (name == "certify-steps" &&
      !(f.pairwise() || f.facility() || (f.external() && external_bounds))) {
    return "sets the steps of pairwise similarity's and facility location's bounds, but f has "
           "neither (" +
           std::string(f.diversity() ? "DiSF and objectives given at run time have no bound"
                                     : "quality alone is bounded exactly") +
           ")";
  }
  if ((name == "knn-clusters" || name == "knn-probes") && f.built() && !f.clustered()) {
    return "sets the clustered kNN builder, but " + f.is("knn-build", "auto") +
           " builds every block's graph exactly " + "(blocks of up to " +
           std::to_string(datamask::knn_exact_up_to) + " items; the largest here has " +
           std::to_string(f.largest.value_or(0)) + "); add " + f.is("knn-build", "clustered");
  }
  if (name == "reference-size" && !(f.facility() || f.external())) {
    return "sets facility location's reference set while learning, but " + f.no_facility();
  }
  if (name == "quality-aggregate" && s.run.lambda <= 0.0) {
    return "sets the quality term, but " + f.is("lambda", "0") + " weighs none";
  }
  if (name == "quality-weights" && s.run.lambda <= 0.0 && s.run.prune <= 0.0 &&
      !(f.o == block_optimizer::pg && s.run.init == datamask::init_mode::quality)) {
    return "weighs the quality columns, but nothing reads quality (" + f.is("lambda", "0") +
           ", no " + f.sp.option("prune") + ", no " + f.is("init", "quality") + ")";
  }
  if ((name == "objective" || name == "objective-weights" || name == "neighbors" ||
       name == "graph") &&
      !f.diversity()) {
    return "sets f's diversity, but " + f.is("lambda", "1") + " weighs none";
  }
  return {};
}

/// `unread`'s rules of what draws: the calibration, the active batch, the seed.
std::string unread_by_draws(std::string_view name, const run_reads& f) {
  const auto& run = f.s().run;
  const bool calibrated = datamask::calibrates(run.scaling);
  const std::string scaling = f.is("scaling", datamask::enum_name(run.scaling));
  const std::string optimizer(datamask::enum_name(f.o));
  if (name == "calibration-subsets" && !calibrated) {
    return "sets the calibration of f's scales, but " + scaling + " calibrates none";
  }
  if ((name == "active-fraction" || name == "min-active") &&
      !(f.o == block_optimizer::pg || calibrated)) {
    return "sets the active batch of the policy gradient's steps and of the calibration, but the "
           "optimizer is " +
           optimizer + " and " + scaling;
  }
  if (name == "seed" && !(f.o == block_optimizer::pg || f.o == block_optimizer::stochastic ||
                          f.stochastic_start() || calibrated || f.clustered())) {
    return "seeds the random draws, but this run draws nothing (the optimizer is " + optimizer +
           ", " + scaling + " calibrates nothing)";
  }
  return {};
}

/// `unread`'s rules of the learners and the outputs: schedules, the step rule, the polish, the
/// stochastic start, the checkpoint.
std::string unread_by_learner(std::string_view name, const run_reads& f) {
  const auto& s = f.s();
  if (name == "lr-min" && s.learn.schedule == datamask::schedule_kind::constant) {
    return "sets the last learning rate, but " + f.is("schedule", "constant") + " uses " +
           f.sp.option("lr-max") + " only";
  }
  if (name == "step-final-fraction" && s.ascent.decay == datamask::step_decay::constant) {
    return "sets where the step size decays to, but " + f.is("step-decay", "constant") +
           " keeps it";
  }
  if (name.starts_with("adam-") && s.ascent.rule != datamask::step_rule::adam) {
    return "sets Adam's step rule, but the step rule is " +
           std::string(datamask::enum_name(s.ascent.rule)) + "; add " + f.is("step-rule", "adam");
  }
  if (name.starts_with("polish-") && !s.polish.enabled) {
    return "sets the polish, but " + f.sp.option("polish") + " is off";
  }
  if (name == "epsilon" && f.o == block_optimizer::continuous && !f.stochastic_start()) {
    return "sets stochastic greedy, which the continuous learner runs only as the polish's "
           "stochastic start, but " +
           f.sp.option(s.polish.enabled ? "polish-stochastic-start" : "polish") + " is off";
  }
  if (name == "checkpoint-every" && !f.r.has("checkpoint")) {
    return "sets how often the checkpoint is written, but no " + f.sp.option("checkpoint") +
           " is given";
  }
  return {};
}

/// Why run `r`, with optimizer `o`, reads nothing option `name` sets, as a refusal says it
/// ("sets the rbf kernel's bandwidth, but the kernel is cosine; add --kernel rbf"); empty where
/// it reads it. `applies_to` holds which optimizers read a setting; these are the rules of f's
/// terms, the draws and the learners. An option a run does not read is refused, never ignored:
/// a user who gives it expects it to change something. `largest`: the largest block's items,
/// once the corpus is planned.
std::string unread(std::string_view name, const run_request& r, block_optimizer o,
                   const spelling& sp, std::optional<index_t> largest = std::nullopt) {
  const run_reads f{r, o, sp, largest};
  for (const auto rule : {&unread_by_terms, &unread_by_draws, &unread_by_learner}) {
    std::string why = rule(name, f);
    if (!why.empty()) return why;
  }
  return {};
}

/// The library's validation of every setting (ranges, rules between settings), its messages
/// naming the option as `sp` spells it.
void validate(const datamask::block_run_settings& s, const spelling& sp) {
  try {
    datamask::validate(s.run);
    datamask::validate(s.learn);
    datamask::validate(s.ascent);
    datamask::validate(s.polish);
  } catch (const datamask::invalid_input& e) {
    std::string name;
    visit_options([&](const auto& entry) {
      if (entry.field == e.input()) name = entry.name;
    });
    if (name.empty()) throw;
    throw datamask::invalid_input(sp.option(name), std::string(e.what()).substr(e.input().size() + 2));
  }
}

}  // namespace

/// The optimizers that read the settings of struct `Owner` (the struct that declares a table
/// entry): the policy-gradient learner its own; stochastic greedy's epsilon, also read by the
/// continuous learner's stochastic start; the continuous learner its ascent and polish; every
/// optimizer the rest.
template <class Owner>
constexpr optimizer_set readers() {
  if constexpr (std::is_same_v<Owner, datamask::pg_settings> || std::is_same_v<Owner, datamask::pg_step_settings>) {
    return bit(block_optimizer::pg);
  } else if constexpr (std::is_same_v<Owner, datamask::stochastic_settings>) {
    return bit(block_optimizer::stochastic) | bit(block_optimizer::continuous);
  } else if constexpr (std::is_same_v<Owner, datamask::continuous_settings> ||
                       std::is_same_v<Owner, datamask::polish_settings>) {
    return bit(block_optimizer::continuous);
  } else {
    return every_optimizer;
  }
}

optimizer_set applies_to(std::string_view name) {
  if (step_output(name)) return learners;
  optimizer_set found = every_optimizer;
  visit_options([&](const auto& s) {
    if (s.name == name) found = readers<typename std::remove_cvref_t<decltype(s)>::owner_type>();
  });
  return found;
}

resolution resolve(run_request& r, const spelling& sp) {
  auto& s = r.settings;
  DATAMASK_EXPECTS(!r.has("ratio") || !r.has("count"), sp.option("count"), "give ", sp.option("ratio"), " or ",
                   sp.option("count"), ", not both");
  check_quality(r, sp);
  check_scales(r, sp);
  check_graph(r, sp);
  for (const auto& name : r.given) {
    DATAMASK_EXPECTS(!certify_option(name) || s.certify, sp.option(name), "sets the certificate's budget, but no ",
                     sp.option("certify"), " is asked for");
  }

  const bool knn = r.knn();
  const bool asked_auto = s.optimizer == block_optimizer::automatic;
  const datamask::unrelaxed term = datamask::unrelaxed_term(s, knn);
  DATAMASK_EXPECTS(s.optimizer != block_optimizer::continuous || term.name.empty(),
                   sp.assign("optimizer", "continuous", true), term.has_none(), "; ",
                   term.remedy("a kNN graph (" + sp.option("neighbors") + " or " + sp.option("graph") + ")"),
                   ", or use pg, greedy, lazy or stochastic");
  const block_optimizer o =
      asked_auto ? datamask::auto_optimizer(s, knn) : s.optimizer;
  const std::string why = asked_auto ? " (chosen by " + sp.assign("optimizer", "auto", true) + ")" : "";
  for (const auto& name : r.given) {
    DATAMASK_EXPECTS(applies(name, o), sp.option(name), what_it_sets(name), ", but the optimizer is ",
                     datamask::enum_name(o), why, "; ", remedy(name, o, sp));
    const std::string why_unread = unread(name, r, o, sp);
    DATAMASK_EXPECTS(why_unread.empty(), sp.option(name), why_unread);
  }
  if (o == block_optimizer::pg) {  // the credit that runs, as the reports name it
    s.run.credit = datamask::resolve_credit(s.run.credit, s.weights, s.run.lambda, knn, s.learn.logprob, s.external);
  }
  // Only the policy gradient's rewards can be z-scored per step; every other optimizer needs a fixed f.
  DATAMASK_EXPECTS(o == block_optimizer::pg || s.run.scaling != datamask::term_scaling::group,
                   sp.option("scaling"), "group makes f a different function at every step; ",
                   sp.assign("optimizer", datamask::enum_name(o), true), why,
                   " needs calibrated, fixed or raw scales");
  validate(s, sp);
  return {o, datamask::use_threads(s.run)};
}

std::vector<std::optional<block_optimizer>> block_optimizers(const datamask::block_run_settings& s,
                                                             const datamask::corpus_plan& plan, index_t dims) {
  std::vector<std::optional<block_optimizer>> out(plan.blocks.size());
  for (std::size_t b = 0; b < plan.blocks.size(); ++b) {
    // Nothing to select, or nothing to choose (every item): no optimizer runs.
    if (plan.counts[b] == 0 || plan.counts[b] == static_cast<index_t>(plan.blocks[b].size())) continue;
    out[b] = datamask::resolve_optimizer(s, {static_cast<index_t>(plan.blocks[b].size()), dims, plan.counts[b]});
  }
  return out;
}

void refuse_unread_on_blocks(const run_request& r, const datamask::corpus_plan& plan,
                             std::span<const std::optional<block_optimizer>> optimizers, const spelling& sp) {
  std::size_t largest = 0;
  for (const auto& b : plan.blocks) largest = std::max(largest, b.size());
  std::set<block_optimizer> ran;
  for (const auto& o : optimizers) {
    if (o) ran.insert(*o);
  }
  for (const auto& name : r.given) {  // read where some block's optimizer reads it
    bool read = ran.empty();
    std::string why;
    for (const block_optimizer o : ran) {
      const std::string w = unread(name, r, o, sp, static_cast<index_t>(largest));
      read = read || w.empty();
      if (why.empty()) why = w;
    }
    DATAMASK_EXPECTS(read, sp.option(name), why);
  }
  std::size_t running = 0, greedy = 0;
  for (const auto& o : optimizers) {
    running += o ? 1 : 0;
    greedy += o == block_optimizer::greedy ? 1 : 0;
  }
  if (greedy == 0 || r.settings.optimizer != block_optimizer::automatic) return;
  const std::string why = "the optimizer is greedy on " + std::to_string(greedy) + " of " + std::to_string(running) +
                          " block" + (running == 1 ? "" : "s") + " (chosen by " +
                          sp.assign("optimizer", "auto", true) + ": naive greedy costs no more operations there)";
  for (const auto& name : r.given) {
    if (applies(name, block_optimizer::greedy)) continue;
    // A step output is refused where no block has steps; a learner's setting wherever a block ignores it.
    if (step_output(name) && greedy < running) continue;
    DATAMASK_EXPECTS(false, sp.option(name), what_it_sets(name), ", but ", why, "; add ",
                     sp.assign("optimizer", "continuous", true));
  }
}

datamask::invalid_input as_option(const datamask::invalid_input& e, const spelling& sp) {
  std::string input = e.input();
  std::string text = std::string(e.what()).substr(input.size() + 2);
  // A field as a whole word of the text (not inside "step_final_fraction" or a user's label).
  const auto word_char = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_' || ch == '-'; };
  bool named = false;
  visit_options([&](const auto& s) {
    const std::string option = sp.option(s.name);
    if (s.field == e.input() && !named) {  // the first entry of a field two share ("epsilon")
      input = option;
      named = true;
    }
    if (s.field.find('_') == std::string_view::npos) return;
    for (auto at = text.find(s.field); at != std::string::npos; at = text.find(s.field, at + 1)) {
      const std::size_t end = at + s.field.size();
      if ((at > 0 && word_char(text[at - 1])) || (end < text.size() && word_char(text[end]))) continue;
      text.replace(at, s.field.size(), option);
      at += option.size() - 1;
    }
  });
  return {input, text};
}

void check_given_graph(index_t n, std::size_t blocks, const spelling& sp) {
  DATAMASK_EXPECTS(blocks == 1, sp.option("graph"), "its rows are the corpus rows, so it needs the corpus in one "
                   "block; the ", n, " items form ", blocks, " blocks (set ", sp.option("block-size"), " to at least ",
                   n, ")");
}

progress_plan plan_progress(const datamask::block_run_settings& s, const datamask::corpus_plan& plan,
                            std::span<const std::optional<block_optimizer>> optimizers, std::span<const index_t> run) {
  progress_plan p;
  for (const index_t block : run) {
    const auto b = static_cast<std::size_t>(block);
    if (!optimizers[b]) continue;
    ++p.blocks;
    switch (*optimizers[b]) {
      case block_optimizer::continuous: p.iterations += s.ascent.iterations; break;
      case block_optimizer::pg: p.steps += s.run.steps; break;
      default:
        p.picks += plan.counts[b];
        p.greedy_by_cost += s.optimizer == block_optimizer::automatic && *optimizers[b] == block_optimizer::greedy;
    }
  }
  return p;
}

}  // namespace dmfront
