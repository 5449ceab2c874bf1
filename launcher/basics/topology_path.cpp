#include "basics/topology_path.hpp"

#include <fmt/format.h>

#include <cctype>

namespace npu_run {

namespace {

bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// The digit run starting at `i`, leading zeros dropped (not the last digit).
std::string_view digit_run(const std::string& s, size_t& i) {
  const size_t start = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  size_t first = start;
  while (first + 1 < i && s[first] == '0') ++first;
  return std::string_view(s).substr(first, i - first);
}

// -1, 0 or 1 as a is before, level with or after b, digit runs as numbers.
int natural_compare(const std::string& a, const std::string& b) {
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    if (is_digit(a[i]) && is_digit(b[j])) {
      const std::string_view x = digit_run(a, i);
      const std::string_view y = digit_run(b, j);
      if (x.size() != y.size()) return x.size() < y.size() ? -1 : 1;
      if (const int c = x.compare(y); c != 0) return c < 0 ? -1 : 1;
      continue;
    }
    if (a[i] != b[j])
      return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]) ? -1 : 1;
    ++i;
    ++j;
  }
  if (i < a.size()) return 1;
  if (j < b.size()) return -1;
  return 0;
}

}  // namespace

bool natural_less(const std::string& a, const std::string& b) {
  const int c = natural_compare(a, b);
  return c != 0 ? c < 0 : a < b;
}

std::vector<std::string> TopologyPath::levels() const {
  std::vector<std::string> out{superpod, block};
  out.insert(out.end(), switches.begin(), switches.end());
  out.push_back(server);
  // Trailing unknown levels say nothing: a path that stops there is shorter, not different.
  while (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

std::string TopologyPath::describe() const {
  if (empty()) return "unknown";
  std::vector<std::string> parts;
  if (!superpod.empty()) parts.push_back("superpod " + superpod);
  if (!block.empty() && block != superpod) parts.push_back("block " + block);
  if (!switches.empty()) parts.push_back(fmt::format("switch {}", fmt::join(switches, " > ")));
  if (!server.empty()) parts.push_back("server " + server);
  std::string text = fmt::format("{}", fmt::join(parts, " / "));
  if (!sources.empty()) text += fmt::format(" ({})", fmt::join(sources, ", "));
  return text;
}

bool topology_less(const TopologyPath& a, const TopologyPath& b) {
  const std::vector<std::string> x = a.levels();
  const std::vector<std::string> y = b.levels();
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (x[i].empty() != y[i].empty()) return y[i].empty();  // an unknown level after known ones
    if (natural_less(x[i], y[i])) return true;
    if (natural_less(y[i], x[i])) return false;
  }
  return x.size() > y.size();
}

}  // namespace npu_run
