// SPDX-License-Identifier: Apache-2.0
#include <datamask/frontend/registry.hpp>

#include <algorithm>

namespace dmfront {

objective_registry::objective_registry() {
  using w = datamask::objective_weights;
  entries_ = {
      {"pairwise", "minus the mean cosine similarity of the selection's pairs", &w::pairwise, nullptr},
      {"facility", "facility location: how well the selection covers the block (dense, or on a kNN graph)",
       &w::facility, nullptr},
      {"disf", "DiSF: minus the squared off-diagonal correlation of the selection's dimensions", &w::disf, nullptr}};
}

void objective_registry::check_new(std::string_view name) const {
  const auto letter = [](char ch) { return ch >= 'a' && ch <= 'z'; };
  const bool spelled = !name.empty() && letter(name.front()) && std::all_of(name.begin(), name.end(), [&](char ch) {
    return letter(ch) || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
  });
  DATAMASK_EXPECTS(spelled, "objective", "a name is a lower case letter, then letters, digits, '-' and '_', found '",
                   name, "'");
  // The report names f's terms: the quality term, and facility location on a kNN graph.
  const auto names = this->names();
  DATAMASK_EXPECTS(name != "quality" && name != "facility_knn" &&
                       std::find(names.begin(), names.end(), name) == names.end(),
                   "objective", "'", name, "' is already a term's name");
}

objective_registry& objective_registry::add(std::string name, datamask::external_objective objective,
                                            std::string summary) {
  check_new(name);
  DATAMASK_EXPECTS(static_cast<bool>(objective.score), "objective", "'", name, "' has no score function");
  objective.label = name;
  entries_.push_back({std::move(name), std::move(summary), nullptr,
                      std::make_shared<const datamask::external_objective>(std::move(objective))});
  return *this;
}

std::vector<std::string> objective_registry::names() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e.name);
  return out;
}

void objective_registry::apply(std::span<const std::string> names, std::span<const double> weights,
                               datamask::block_run_settings& s) const {
  std::vector<objective_spec> entries;
  for (const auto& n : names) entries.push_back({n, nullptr});
  apply(entries, weights, s);
}

void objective_registry::apply(std::span<const objective_spec> entries, std::span<const double> weights,
                               datamask::block_run_settings& s) const {
  DATAMASK_EXPECTS(weights.empty() || weights.size() == entries.size(), "objective_weights", weights.size(),
                   " weights for ", entries.size(), " objectives");
  std::string known;
  for (const auto& e : entries_) known += (known.empty() ? "" : ", ") + e.name;
  datamask::objective_weights w{0.0, 0.0, 0.0};
  std::vector<datamask::given_objective> given;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const double wi = weights.empty() ? 1.0 : weights[i];
    DATAMASK_EXPECTS(wi >= 0.0, "objective_weights", "weights must be >= 0, found ", wi);
    if (entries[i].given != nullptr) {
      given.push_back({entries[i].given, wi});
      continue;
    }
    const std::string& name = entries[i].name;
    const auto e = std::find_if(entries_.begin(), entries_.end(), [&](const auto& x) { return x.name == name; });
    DATAMASK_EXPECTS(e != entries_.end(), "objective", "must be one of ", known, ", found '", name, "'");
    DATAMASK_EXPECTS(std::none_of(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(i),
                                  [&](const objective_spec& x) { return x.given == nullptr && x.name == name; }),
                     "objective", "'", name, "' given twice");
    if (e->builtin != nullptr) {
      w.*(e->builtin) = wi;
      continue;
    }
    given.push_back({e->user, wi});
  }
  s.weights = w;
  s.external = std::move(given);
}

}  // namespace dmfront
