#include "health/hccn_output.hpp"

#include <fmt/format.h>

#include <ctime>
#include <regex>
#include <sstream>

#include "basics/text.hpp"

namespace npu_run {

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// "[devid 0]link up count   " -> "link up count".
std::string_view without_device_prefix(std::string_view key) {
  key = trim(key);
  if (!key.empty() && key.front() == '[') {
    const size_t close = key.find(']');
    if (close != std::string_view::npos) key = trim(key.substr(close + 1));
  }
  return key;
}

std::optional<double> milliwatts(const std::string& value) {
  // "1.0189 mW"; "NA" and friends are not numbers.
  try {
    size_t used = 0;
    const double number = std::stod(value, &used);
    return number;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// "Sun Oct  5 10:13:51 2025" -> seconds, read as UTC.
std::optional<int64_t> device_time(const std::string& text) {
  std::tm tm{};
  const char* end = ::strptime(text.c_str(), "%a %b %d %H:%M:%S %Y", &tm);
  if (end == nullptr) return std::nullopt;
  return static_cast<int64_t>(::timegm(&tm));
}

}  // namespace

std::optional<std::string> hccn_value(const std::string& text, const std::string& key) {
  for (const std::string& line : lines_of(text)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (without_device_prefix(std::string_view(line).substr(0, colon)) != key) continue;
    return std::string(trim(std::string_view(line).substr(colon + 1)));
  }
  return std::nullopt;
}

std::optional<std::string> parse_link_status(const std::string& text) {
  return hccn_value(text, "link status");
}

std::optional<std::string> parse_net_health(const std::string& text) {
  return hccn_value(text, "net health status");
}

std::optional<DeviceAddress> parse_device_ip(const std::string& text) {
  auto address = hccn_value(text, "ipaddr");
  if (!address) address = hccn_value(text, "ipv6addr");
  if (!address || address->empty()) return std::nullopt;
  DeviceAddress found{*address, hccn_value(text, "netmask").value_or(""), false};
  found.ipv6 = found.address.find(':') != std::string::npos;
  return found;
}

std::optional<int> parse_tls_switch(const std::string& text) {
  static const std::regex kSwitch(R"(tls switch\s*\[\s*(\d+)\s*\])");
  std::smatch match;
  if (!std::regex_search(text, match, kSwitch)) return std::nullopt;
  return std::stoi(match[1].str());
}

std::optional<OpticalModule> parse_optical(const std::string& text) {
  const auto present = hccn_value(text, "present");
  if (!present) return std::nullopt;
  OpticalModule module;
  module.present = *present == "present";
  for (int lane = 0; lane < 8; ++lane) {
    if (auto tx = hccn_value(text, fmt::format("Tx Power{}", lane)); tx && milliwatts(*tx))
      module.tx_power_mw.push_back(*milliwatts(*tx));
    if (auto rx = hccn_value(text, fmt::format("Rx Power{}", lane)); rx && milliwatts(*rx))
      module.rx_power_mw.push_back(*milliwatts(*rx));
  }
  const auto threshold = [&](const char* key) -> std::optional<double> {
    const auto value = hccn_value(text, key);
    return value ? milliwatts(*value) : std::nullopt;
  };
  module.tx_high = threshold("TxPower High Thres");
  module.tx_low = threshold("TxPower Low Thres");
  module.rx_high = threshold("RxPower High Thres");
  module.rx_low = threshold("RxPower Low Thres");
  for (const char* flag : {"Tx Los Flag", "Rx Los Flag", "Tx LoL Flag", "Rx LoL Flag"}) {
    if (auto value = hccn_value(text, flag)) module.flags.emplace_back(flag, *value);
  }
  return module;
}

std::vector<std::string> optical_problems(const OpticalModule& module) {
  std::vector<std::string> problems;
  const auto lanes = [&](const char* name, const std::vector<double>& power,
                         const std::optional<double>& low, const std::optional<double>& high) {
    for (size_t lane = 0; lane < power.size(); ++lane) {
      if ((low && power[lane] < *low) || (high && power[lane] > *high)) {
        problems.push_back(fmt::format("{} power of lane {} is {:.4f} mW, outside {:.4f}-{:.4f} mW",
                                       name, lane, power[lane], low.value_or(0.0),
                                       high.value_or(0.0)));
      }
    }
  };
  lanes("Tx", module.tx_power_mw, module.tx_low, module.tx_high);
  lanes("Rx", module.rx_power_mw, module.rx_low, module.rx_high);
  for (const auto& [flag, value] : module.flags) {
    if (value != "0x0" && value != "NA") problems.push_back(fmt::format("{} is {}", flag, value));
  }
  return problems;
}

std::optional<LinkStatistics> parse_link_stat(const std::string& text) {
  const auto now = hccn_value(text, "current time");
  if (!now) return std::nullopt;
  LinkStatistics stats;
  stats.now = device_time(*now);
  const auto count = [&](const char* key) -> std::optional<int> {
    const auto value = hccn_value(text, key);
    if (!value) return std::nullopt;
    const auto number = parse_integer(*value, 0, 1 << 30);
    return number ? std::optional<int>(static_cast<int>(*number)) : std::nullopt;
  };
  stats.up_count = count("link up count");
  stats.down_count = count("link down count");
  static const std::regex kRecord(
      R"(([A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\s+LINK (UP|DOWN))");
  for (const std::string& line : lines_of(text)) {
    std::smatch match;
    if (!std::regex_search(line, match, kRecord)) continue;
    const auto when = device_time(match[1].str());
    if (!when) continue;
    stats.changes.push_back(
        {*when, match[2] == "UP", fmt::format("{} LINK {}", match[1].str(), match[2].str())});
  }
  return stats;
}

std::optional<LinkChange> recent_link_down(const LinkStatistics& stats, int64_t window_s) {
  if (!stats.now) return std::nullopt;
  for (const LinkChange& change : stats.changes) {
    if (!change.up && *stats.now - change.time <= window_s) return change;
  }
  return std::nullopt;
}

PingOutcome judge_ping(int exit_code, const std::string& out, const std::string& err) {
  std::string summary;
  for (const std::string& line : lines_of(out)) {
    if (line.find("recv time out") != std::string::npos ||
        line.find("Destination Host Unreachable") != std::string::npos) {
      return {false, std::string(trim(line))};
    }
    if (line.find("packets transmitted") != std::string::npos) summary = std::string(trim(line));
  }
  static const std::regex kNoLoss(R"(\b0(\.0+)?% packet loss)");
  if (exit_code == 0 && std::regex_search(summary, kNoLoss)) return {true, summary};
  if (!summary.empty()) return {false, summary};
  const std::string_view said = trim(err);
  return {false, said.empty() ? fmt::format("exit {}", exit_code) : std::string(said)};
}

}  // namespace npu_run
