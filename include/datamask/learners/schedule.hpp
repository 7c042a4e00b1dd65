// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Learning-rate schedules: linear (default), cosine, constant, or any user functor.

#include <array>
#include <cmath>
#include <numbers>
#include <string_view>

#include "datamask/core/concepts.hpp"
#include "datamask/core/enum_names.hpp"
#include "datamask/core/error.hpp"

namespace datamask {

/// @brief The first learning rate of the reference script (every schedule's default).
inline constexpr double default_max_lr = 10.0;
/// @brief The last learning rate of the reference script (every schedule's default).
inline constexpr double default_min_lr = 1.0;

namespace detail {
/// `shape(x)` at x = (step - 1) / (total - 1), the fraction of the run done (0 at step 1, 1 at
/// the last step); a run of one step gets `max_lr`.
template <class Shape>
[[nodiscard]] double over_the_run(index_t step, index_t total, double max_lr, Shape shape) {
  if (total <= 1) return max_lr;
  return shape(static_cast<double>(step - 1) / static_cast<double>(total - 1));
}
}  // namespace detail

/// @brief Linear from `max_lr` at step 1 to `min_lr` at the last step (reference defaults 10, 1).
struct linear_lr {
  double max_lr = default_max_lr;
  double min_lr = default_min_lr;
  [[nodiscard]] double operator()(index_t step, index_t total) const {
    return detail::over_the_run(step, total, max_lr,
                                [&](double x) { return max_lr + (min_lr - max_lr) * x; });
  }
};

/// @brief Half a cosine from `max_lr` at step 1 to `min_lr` at the last step.
struct cosine_lr {
  double max_lr = default_max_lr;
  double min_lr = default_min_lr;
  [[nodiscard]] double operator()(index_t step, index_t total) const {
    return detail::over_the_run(step, total, max_lr, [&](double x) {
      return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + std::cos(std::numbers::pi * x));
    });
  }
};

/// @brief The same rate at every step.
struct constant_lr {
  double lr = 1.0;
  [[nodiscard]] double operator()(index_t /*step*/, index_t /*total*/) const { return lr; }
};

/// @brief The shape of a schedule chosen at run time (the command-line program's `--schedule`).
enum class schedule_kind { linear, cosine, constant };

template <>
struct enum_traits<schedule_kind> {
  static constexpr std::array<enum_choice<schedule_kind>, 3> choices{
      {{"linear", schedule_kind::linear},
       {"cosine", schedule_kind::cosine},
       {"constant", schedule_kind::constant}}};
};

/// @brief Parses "linear", "cosine" or "constant". @throws invalid_input otherwise.
inline schedule_kind parse_schedule(std::string_view text, const char* input = "schedule") {
  return parse_enum<schedule_kind>(text, input);
}

/// @brief A schedule whose shape is chosen at run time; `constant` uses `max_lr`.
struct runtime_lr {
  schedule_kind kind = schedule_kind::linear;
  double max_lr = default_max_lr;
  double min_lr = default_min_lr;
  [[nodiscard]] double operator()(index_t step, index_t total) const {
    switch (kind) {
      case schedule_kind::linear: return linear_lr{max_lr, min_lr}(step, total);
      case schedule_kind::cosine: return cosine_lr{max_lr, min_lr}(step, total);
      case schedule_kind::constant: return max_lr;
    }
    return max_lr;
  }
};

static_assert(lr_scheduler<linear_lr>);
static_assert(lr_scheduler<cosine_lr>);
static_assert(lr_scheduler<constant_lr>);
static_assert(lr_scheduler<runtime_lr>);

}  // namespace datamask
