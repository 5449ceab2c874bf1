// Names of an enum's values, written once as a table: parsing a name (with a message listing the
// choices) and naming a value both read it, instead of a pair of hand-written switches that drift.
#pragma once

#include <fmt/format.h>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "basics/usage_error.hpp"

namespace npu_run {

template <typename Enum, size_t N>
class EnumTable {
 public:
  constexpr explicit EnumTable(std::array<std::pair<Enum, std::string_view>, N> entries)
      : entries_(entries) {}

  std::string_view name(Enum value) const {
    for (const auto& [v, n] : entries_) {
      if (v == value) return n;
    }
    return "?";
  }

  // The value named `text`; a UsageError "SOURCE 'TEXT': expected a, b or c" otherwise.
  Enum parse(std::string_view text, const std::string& source) const {
    for (const auto& [v, n] : entries_) {
      if (n == text) return v;
    }
    throw UsageError(fmt::format("{} '{}': expected {}", source, text, choices()));
  }

  // The value named `text`, if one is.
  std::optional<Enum> find(std::string_view text) const {
    for (const auto& [v, n] : entries_) {
      if (n == text) return v;
    }
    return std::nullopt;
  }

  // "a, b, c or d".
  std::string choices() const {
    std::string text;
    for (size_t i = 0; i < N; ++i) {
      if (i > 0) text += i + 1 == N ? " or " : ", ";
      text += entries_[i].second;
    }
    return text;
  }

 private:
  std::array<std::pair<Enum, std::string_view>, N> entries_;
};

}  // namespace npu_run
