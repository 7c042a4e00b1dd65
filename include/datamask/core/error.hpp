// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief The library's exception types and the input-checking macro.

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace datamask {

/// @brief Base of every exception the library throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief Bad input: the message names the input, what was expected and what was found.
class invalid_input : public error {
 public:
  /// @param input the name of the offending input (an argument, an option, a file)
  /// @param problem what is wrong with it
  invalid_input(std::string input, const std::string& problem)
      : error(join(input, problem)), input_(std::move(input)) {}
  /// @brief The name of the offending input.
  [[nodiscard]] const std::string& input() const noexcept { return input_; }

 private:
  static std::string join(const std::string& input, const std::string& problem) {
    std::string out;
    out.reserve(input.size() + 2 + problem.size());
    out.append(input).append(": ").append(problem);
    return out;
  }
  std::string input_;
};

/// @brief Thrown when a caller's stop hook asked a run to stop (`select_block`, a kNN graph's
/// build): the partial result is dropped (a front end writes no output for it).
class run_stopped : public error {
 public:
  run_stopped() : error("datamask: the run was stopped") {}
};

namespace detail {
template <class... Parts>
[[nodiscard]] std::string concat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}
}  // namespace detail

}  // namespace datamask

/// @brief Throws `datamask::invalid_input(input, message...)` unless `cond` holds.
/// The message parts are streamed together only when the check fails.
#define DATAMASK_EXPECTS(cond, input, ...)                                         \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      throw ::datamask::invalid_input((input), ::datamask::detail::concat(__VA_ARGS__)); \
    }                                                                              \
  } while (false)
