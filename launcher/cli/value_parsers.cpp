#include "cli/value_parsers.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <spdlog/common.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <csignal>
#include <cstdlib>

#include "basics/text.hpp"
#include "basics/usage_error.hpp"

namespace npu_run {

int parse_positive(const std::string& text, int max, const std::string& source, const char* what) {
  const auto value = parse_integer(text, 1, max);
  if (!value)
    throw UsageError(fmt::format("{} '{}': expected {} between 1 and {}", source, text, what, max));
  return static_cast<int>(*value);
}

std::pair<int, int> parse_nnodes(const std::string& text, const std::string& source) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) {
    const int n = parse_positive(text, kMaxNodes, source, "a node count");
    return {n, n};
  }
  if (text.find(':', colon + 1) != std::string::npos) {
    throw UsageError(fmt::format(
        "{} '{}': expected a node count like 4, or a range MIN:MAX like 2:4 (one colon)", source,
        text));
  }
  const int min = parse_positive(text.substr(0, colon), kMaxNodes, source, "a minimum node count");
  const int max = parse_positive(text.substr(colon + 1), kMaxNodes, source, "a maximum node count");
  if (min > max) {
    throw UsageError(fmt::format("{} '{}': the minimum is above the maximum; write {}:{}", source,
                                 text, max, min));
  }
  return {min, max};
}

std::chrono::milliseconds seconds_option(double value, double min, double max,
                                         const std::string& source) {
  if (!(value >= min) || value > max) {
    throw UsageError(
        fmt::format("{} {}: expected seconds between {} and {}", source, value, min, max));
  }
  return std::chrono::milliseconds(std::llround(value * 1000));
}

HealthRunSettings parse_health_timeout(const std::string& value, const std::string& source) {
  HealthRunSettings settings;
  const auto parts = split(value, ',');
  const auto seconds = [&](std::string_view text) {
    const std::string whole(text);
    char* end = nullptr;
    const double number = std::strtod(whole.c_str(), &end);
    if (whole.empty() || end != whole.c_str() + whole.size()) {
      throw UsageError(
          fmt::format("{} '{}': expected seconds, as 60 or 60,15 (all checks, each "
                      "call)",
                      source, value));
    }
    return seconds_option(number, 0.1, 3600, source);
  };
  if (parts.size() > 2) {
    throw UsageError(fmt::format(
        "{} '{}': expected seconds, as 60 or 60,15 (all checks, each call)", source, value));
  }
  settings.budget = seconds(parts[0]);
  settings.call_timeout =
      parts.size() == 2 ? seconds(parts[1]) : std::min(settings.budget, settings.call_timeout);
  return settings;
}

HangPolicy parse_hang_timeout(const std::string& value, const std::string& source) {
  constexpr double kMax = 7 * 24 * 3600.0;
  constexpr double kLearnedFloor = 300.0;
  HangPolicy policy;
  if (value.empty() || value == "0" || value == "off") return policy;  // none, the default
  std::string seconds = value;
  if (value == "auto" || value.rfind("auto:", 0) == 0) {
    policy.learned = true;
    seconds = value == "auto" ? "" : value.substr(5);
  }
  double parsed = kLearnedFloor;
  if (!seconds.empty()) {
    size_t used = 0;
    try {
      parsed = std::stod(seconds, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != seconds.size() || !(parsed > 0) || parsed > kMax) {
      throw UsageError(fmt::format(
          "{} '{}': expected seconds (more than 0, at most 7 days), 'auto' or 'auto:<seconds>' "
          "(the floor of the learned timeout), e.g. 600 or auto:120; 0 or 'off' for none",
          source, value));
    }
  }
  policy.timeout = std::chrono::milliseconds(std::llround(parsed * 1000));
  return policy;
}

void check_name(const std::string& value, const std::string& source, const char* what) {
  if (value.empty()) {  // "--role=" reaches here as the empty value (cli/option_names.hpp)
    throw UsageError(
        fmt::format("{} '': {} may not be empty; give letters, digits, '-', '_' "
                    "and '.', or drop {} for its default",
                    source, what, source));
  }
  const bool ok = !value.empty() && value != "." && value != ".." &&
                  std::all_of(value.begin(), value.end(), [](unsigned char c) {
                    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
                  });
  if (!ok) {
    throw UsageError(fmt::format("{} '{}': {} may use only letters, digits, '-', '_' and '.'",
                                 source, value, what));
  }
}

std::vector<int> parse_signals(const std::string& text, const std::string& source) {
  static const std::map<std::string, int> kHandled = {{"TERM", SIGTERM}, {"INT", SIGINT},
                                                      {"HUP", SIGHUP},   {"QUIT", SIGQUIT},
                                                      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}};
  std::vector<int> signals;
  for (std::string_view item : split(text, ',')) {
    if (item.substr(0, 3) == "SIG") item.remove_prefix(3);
    const std::string name(item);
    const auto it = kHandled.find(name);
    if (it == kHandled.end()) {
      throw UsageError(
          fmt::format("{} '{}': cannot handle '{}'; choose from SIGTERM, SIGINT, "
                      "SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2",
                      source, text, name));
    }
    if (std::find(signals.begin(), signals.end(), it->second) == signals.end())
      signals.push_back(it->second);
  }
  return signals;
}

std::set<int> parse_rank_filter(const std::string& text, const std::string& source, int nproc) {
  std::set<int> ranks;
  for (const std::string_view item : split(text, ',')) {
    const auto parsed = parse_integer(item, 0, kMaxWorkersPerNode);
    if (!parsed) {
      throw UsageError(fmt::format("{} '{}': '{}' is not a local rank; write ranks like 0 or 0,1",
                                   source, text, item));
    }
    const int rank = static_cast<int>(*parsed);
    if (rank >= nproc) {
      throw UsageError(
          fmt::format("{} '{}': local rank {} does not exist with {} worker{} per node", source,
                      text, rank, nproc, nproc == 1 ? "" : "s"));
    }
    ranks.insert(rank);
  }
  return ranks;
}

std::vector<std::string> parse_line_filters(const std::string& text) {
  std::vector<std::string> filters;
  std::string current;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ',') {
      current += text[i];
    } else if (i + 1 < text.size() && text[i + 1] == ',') {
      current += ',';
      ++i;
    } else {
      if (!current.empty()) filters.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) filters.push_back(std::move(current));
  return filters;
}

std::map<std::string, std::string> parse_rdzv_conf(const std::string& text,
                                                   const std::string& source) {
  static const std::set<std::string> kKnown = {
      "timeout", "join_timeout", "last_call_timeout", "close_timeout", "read_timeout",
      "keep_alive_interval", "keep_alive_max_attempt", "is_host", "use_libuv",
      // etcd (both of torchrun's spellings), and npu_run's own
      "etcd_prefix", "protocol", "cacert", "ca_cert", "cert", "ssl_cert", "key", "ssl_cert_key",
      "user", "password", "password_file", "lease_ttl"};
  std::map<std::string, std::string> conf;
  if (text.empty()) return conf;
  for (const std::string_view item : split(text, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      throw UsageError(fmt::format("{} '{}': item '{}' is not key=value", source, text, item));
    }
    // As torchrun: blanks around keys and values do not count; a value may also be quoted.
    const std::string key(trim(item.substr(0, eq)));
    if (!kKnown.count(key)) {
      throw UsageError(fmt::format("{} '{}': unknown key '{}'; known keys: {}", source, text, key,
                                   fmt::join(kKnown, ", ")));
    }
    std::string_view value = trim(item.substr(eq + 1));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front())
      value = value.substr(1, value.size() - 2);
    if (value.empty()) {
      throw UsageError(
          fmt::format("{} '{}': '{}' has no value; write {}=VALUE", source, text, key, key));
    }
    conf[key] = std::string(value);
  }
  return conf;
}

std::optional<bool> conf_bool(const std::map<std::string, std::string>& conf,
                              const std::string& key, const std::string& source) {
  const auto it = conf.find(key);
  if (it == conf.end()) return std::nullopt;
  std::string value = it->second;
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // torch's RendezvousParameters.get_as_bool spellings.
  for (const char* yes : {"1", "true", "t", "yes", "y"})
    if (value == yes) return true;
  for (const char* no : {"0", "false", "f", "no", "n"})
    if (value == no) return false;
  throw UsageError(
      fmt::format("{} {}={}: expected true or false (or 1/0, yes/no)", source, key, it->second));
}

double conf_number(const std::map<std::string, std::string>& conf, const std::string& key,
                   const std::string& source) {
  const std::string& text = conf.at(key);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') {
    throw UsageError(fmt::format("{} {}={}: expected a number", source, key, text));
  }
  return value;
}

int parse_port(const std::string& text, const std::string& source) {
  // 0 asks for a free port, as torchrun's "localhost:0"; resolve_rendezvous allows it only
  // where nobody else has to find the port.
  return text == "0" ? 0 : parse_positive(text, 65535, source, "a port");
}

bool is_ipv6_literal(const std::string& text) {
  in6_addr address{};
  return ::inet_pton(AF_INET6, text.c_str(), &address) == 1;
}

Endpoint parse_endpoint(const std::string& text, const std::string& source) {
  Endpoint ep{text, std::nullopt};
  const auto colon = text.rfind(':');
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos)
      throw UsageError(fmt::format("{} '{}': missing ']'", source, text));
    ep.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':')
        throw UsageError(fmt::format("{} '{}': expected [ADDR]:PORT", source, text));
      ep.port = parse_port(text.substr(close + 2), source);
    }
  } else if (colon != std::string::npos && text.find(':') == colon) {
    ep.host = text.substr(0, colon);
    ep.port = parse_port(text.substr(colon + 1), source);
  } else if (colon != std::string::npos && !is_ipv6_literal(text)) {
    // Several colons: an IPv6 address, whose port must be set off by brackets.
    const std::string address = text.substr(0, colon);
    if (is_ipv6_literal(address)) {
      throw UsageError(fmt::format("{} '{}': an IPv6 address with a port is written [{}]:{}",
                                   source, text, address, text.substr(colon + 1)));
    }
    throw UsageError(
        fmt::format("{} '{}': expected HOST:PORT, or [IPv6 address]:PORT", source, text));
  }
  if (ep.host.empty())
    throw UsageError(fmt::format("{} '{}': the host is empty; write HOST:PORT", source, text));
  // A name or an IPv4 address outside brackets: refused here, not after the resolver's retries
  // (a space, a comma-separated list, a URL).
  const bool name_like = std::all_of(ep.host.begin(), ep.host.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '.' || c == '_';
  });
  if (text.front() != '[' && !name_like) {
    throw UsageError(fmt::format(
        "{} '{}': '{}' is no host name or address (a name has only letters, digits, '-', '.' "
        "and '_'); write HOST:PORT, or [IPv6 address]:PORT",
        source, text, ep.host));
  }
  return ep;
}

void check_choice(const std::string& value, std::initializer_list<const char*> choices,
                  const std::string& source) {
  const std::vector<const char*> list(choices);
  for (const char* choice : list) {
    if (value == choice) return;
  }
  std::string listed;
  for (size_t i = 0; i < list.size(); ++i) {
    if (i > 0) listed += i + 1 == list.size() ? " or " : ", ";
    listed += list[i];
  }
  throw UsageError(fmt::format("{} '{}': expected {}", source, value, listed));
}

std::string parse_log_level(const std::string& text, const std::string& source) {
  // spdlog's from_str answers "off" for anything it does not know.
  const auto level = spdlog::level::from_str(text);
  if (level == spdlog::level::off && text != "off") {
    throw UsageError(fmt::format(
        "{} '{}': expected trace, debug, info, warn, error, critical or off", source, text));
  }
  // The short names --help shows: "warning" is spdlog's name for warn.
  if (level == spdlog::level::warn) return "warn";
  const auto name = spdlog::level::to_string_view(level);
  return std::string(name.data(), name.size());
}

}  // namespace npu_run

namespace npu_run {

std::pair<uint64_t, double> parse_memory_budget(const std::string& text,
                                                const std::string& source) {
  const auto bad = [&](const char* why) {
    return UsageError(
        fmt::format("{} '{}': {}; give a size (4G, 512M, 0 for none) or a share "
                    "of MemAvailable (30%)",
                    source, text, why));
  };
  if (text.empty()) throw bad("empty");
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  const std::string unit = end == nullptr ? "" : std::string(end);
  if (end == text.c_str() || !std::isfinite(value) || value < 0) throw bad("not a size");
  if (unit == "%") {
    if (value <= 0 || value > 90) throw bad("a share must be above 0% and at most 90%");
    return {0, value / 100};
  }
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"K", 1024.0},
                                                          {"KB", 1e3},
                                                          {"KIB", 1024.0},
                                                          {"M", 1048576.0},
                                                          {"MB", 1e6},
                                                          {"MIB", 1048576.0},
                                                          {"G", 1073741824.0},
                                                          {"GB", 1e9},
                                                          {"GIB", 1073741824.0},
                                                          {"T", 1099511627776.0},
                                                          {"TB", 1e12},
                                                          {"TIB", 1099511627776.0}};
  std::string upper = unit;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& [name, scale] : kUnits) {
    if (upper != name) continue;
    const double bytes = value * scale;
    if (bytes >= 1.8e19) throw bad("too large");
    return {static_cast<uint64_t>(bytes), 0};
  }
  throw bad("unknown unit");
}

}  // namespace npu_run
