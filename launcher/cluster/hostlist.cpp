#include "cluster/hostlist.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "basics/text.hpp"
#include "basics/usage_error.hpp"

namespace npu_run {

namespace {

// Slurm's limits: one range holds at most 64Ki hosts. The total cap is ours: no job has more
// nodes than --nnodes accepts, and an expression is counted before any name is made, so a
// hostile one like a[1-65536]b[1-65536] is refused without allocating (found by fuzzing: the
// names of a 4Mi-host cap filled 2 GB first).
constexpr unsigned long kMaxRange = 64UL * 1024;
constexpr size_t kMaxHosts = 1'000'000;

struct Range {
  unsigned long lo = 0;
  unsigned long hi = 0;
  int width = 0;  // zero padding: the length of the lower bound as written
};

class Expander {
 public:
  explicit Expander(std::string_view expression) : expression_(expression) {}

  // Checks the whole expression and says how many hosts it names, without making any name.
  size_t count() const {
    size_t total = 0;
    for (std::string_view token : tokens()) {
      total += count_token(token);
      if (total > kMaxHosts)
        fail(fmt::format("it names more than {} hosts, more than any job can have", kMaxHosts));
    }
    return total;
  }

  // The first `limit` hosts, in scontrol's order; the whole expression is checked first.
  std::vector<std::string> run(size_t limit) {
    limit_ = std::min(limit, count());
    hosts_.reserve(limit_);
    for (std::string_view token : tokens()) {
      if (full()) break;
      expand_token(token);
    }
    return std::move(hosts_);
  }

 private:
  // The expression comes from the environment and may hold anything: it is printed escaped.
  [[noreturn]] void fail(const std::string& why) const {
    throw UsageError(printable(fmt::format("invalid hostlist '{}': {}", expression_, why)));
  }

  // Items are separated by commas, spaces or tabs, except inside brackets.
  std::vector<std::string_view> tokens() const {
    std::vector<std::string_view> out;
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i <= expression_.size(); ++i) {
      const char c = i < expression_.size() ? expression_[i] : ',';
      if (c == '[') ++depth;
      if (c == ']' && depth > 0) --depth;
      // The end of the text ends the last item even when its brackets do not balance.
      const bool at_end = i == expression_.size();
      if (at_end || (depth == 0 && (c == ',' || c == ' ' || c == '\t'))) {
        if (i > start) out.push_back(expression_.substr(start, i - start));
        start = i + 1;
      }
    }
    return out;
  }

  // strtoul(): leading blanks, an optional '+', then digits; returns the value and how many
  // characters were used (0 when there were no digits).
  static std::pair<unsigned long, size_t> to_number(std::string_view text) {
    size_t i = 0;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i < text.size() && text[i] == '+') ++i;
    const size_t digits_start = i;
    unsigned long value = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      value = value * 10 + static_cast<unsigned long>(text[i] - '0');
      if (value > 0xffffffffUL) value = 0xffffffffUL;  // saturate; the range check rejects it
      ++i;
    }
    return {value, i == digits_start ? 0 : i};
  }

  Range single_range(std::string_view text) const {
    if (text.find('x') != std::string_view::npos)
      fail(fmt::format("'{}' is not a number or a range", text));
    const auto dash = text.find('-');
    const std::string_view lo_text = text.substr(0, dash);
    const std::optional<std::string_view> hi_text =
        dash == std::string_view::npos ? std::nullopt
                                       : std::optional<std::string_view>(text.substr(dash + 1));
    if (hi_text && !hi_text->empty() && hi_text->front() == '-')
      fail(fmt::format("negative number in '{}'", text));
    Range r;
    r.width = static_cast<int>(lo_text.size());
    const auto [lo, lo_used] = to_number(lo_text);
    if (lo_used == 0) fail(fmt::format("'{}' is not a number or a range", text));
    r.lo = r.hi = lo;
    if (hi_text && !hi_text->empty()) {
      const auto [hi, hi_used] = to_number(*hi_text);
      if (hi_used == 0 || hi_used != hi_text->size())
        fail(fmt::format("'{}' is not a number or a range", text));
      r.hi = hi;
    } else if (!hi_text && lo_used != lo_text.size()) {
      fail(fmt::format("'{}' is not a number or a range", text));
    }
    if (r.lo > r.hi) fail(fmt::format("range '{}' runs backwards", text));
    if (r.hi - r.lo + 1 > kMaxRange)
      fail(fmt::format("range '{}' holds more than {} hosts", text, kMaxRange));
    return r;
  }

  std::vector<Range> range_list(std::string_view text) const {
    std::vector<Range> ranges;
    size_t start = 0;
    while (true) {
      const auto comma = text.find(',', start);
      ranges.push_back(single_range(
          text.substr(start, comma == std::string_view::npos ? text.npos : comma - start)));
      if (comma == std::string_view::npos) return ranges;
      start = comma + 1;
    }
  }

  // Past kMaxHosts the exact number does not matter: counts stop growing there, so that no
  // product of them can overflow.
  static size_t count_ranges(const std::vector<Range>& ranges) {
    size_t n = 0;
    for (const Range& r : ranges) n = std::min(n + (r.hi - r.lo + 1), kMaxHosts + 1);
    return n;
  }

  // Mirrors push_with_prefix: each bracket group it would expand multiplies the count.
  size_t count_with_prefix(const std::string_view prefix, size_t so_far) const {
    const auto open = prefix.rfind('[');
    const auto close = open == std::string::npos ? std::string::npos : prefix.rfind(']');
    if (open == std::string::npos || close == std::string::npos || close < open) return so_far;
    const size_t values = count_ranges(range_list(prefix.substr(open + 1, close - open - 1)));
    return count_with_prefix(prefix.substr(0, open), std::min(so_far * values, kMaxHosts + 1));
  }

  size_t count_token(std::string_view token) const {
    const auto open = token.rfind('[');
    if (open == std::string_view::npos) return 1;
    check_token_end(token, open);
    const size_t own = count_ranges(range_list(token.substr(open + 1, token.size() - open - 2)));
    return count_with_prefix(token.substr(0, open), own);
  }

  void check_token_end(std::string_view token, size_t open) const {
    const auto close = token.find(']', open);
    if (close == std::string_view::npos)
      fail(fmt::format("'{}' opens a '[' it never closes", token));
    if (close + 1 != token.size()) {
      fail(
          fmt::format("'{}' has '{}' after its last ']'; text may only come between bracket groups",
                      token, token.substr(close + 1)));
    }
  }

  bool full() const { return hosts_.size() >= limit_; }

  void push_numbers(const std::string& prefix, const std::vector<Range>& ranges) {
    for (const Range& r : ranges) {
      for (unsigned long n = r.lo; n <= r.hi && !full(); ++n)
        hosts_.push_back(fmt::format("{}{:0{}}", prefix, n, r.width));
    }
  }

  // The prefix may hold bracket groups of its own: expand them from the right, each value
  // becoming part of a longer prefix, then the token's own ranges.
  void push_with_prefix(const std::string& prefix, const std::vector<Range>& ranges) {
    const auto open = prefix.rfind('[');
    const auto close = open == std::string::npos ? std::string::npos : prefix.rfind(']');
    if (open == std::string::npos || close == std::string::npos || close < open) {
      push_numbers(prefix, ranges);
      return;
    }
    const std::string before = prefix.substr(0, open);
    const std::string between = prefix.substr(close + 1);
    const bool more = before.find('[') != std::string::npos;
    for (const Range& r : range_list(std::string_view(prefix).substr(open + 1, close - open - 1))) {
      for (unsigned long n = r.lo; n <= r.hi && !full(); ++n) {
        const std::string longer = fmt::format("{}{:0{}}{}", before, n, r.width, between);
        if (more)
          push_with_prefix(longer, ranges);
        else
          push_numbers(longer, ranges);
      }
    }
  }

  // count() has checked the token.
  void expand_token(std::string_view token) {
    const auto open = token.rfind('[');
    if (open == std::string_view::npos) {
      hosts_.emplace_back(token);
      return;
    }
    push_with_prefix(std::string(token.substr(0, open)),
                     range_list(token.substr(open + 1, token.size() - open - 2)));
  }

  std::string_view expression_;
  std::vector<std::string> hosts_;
  size_t limit_ = 0;
};

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view expression) {
  return Expander(expression).run(kMaxHosts);
}

size_t count_hosts(std::string_view expression) {
  return Expander(expression).count();
}

std::string first_host(std::string_view expression) {
  const auto hosts = Expander(expression).run(1);
  if (hosts.empty())
    throw UsageError(printable(fmt::format("hostlist '{}' names no host", expression)));
  return hosts.front();
}

}  // namespace npu_run
