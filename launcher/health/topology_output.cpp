#include "health/topology_output.hpp"

#include <charconv>
#include <sstream>

#include "basics/text.hpp"

namespace npu_run {

namespace {

// "Key : value" -> the value of the first line whose key (blanks trimmed) is `key`.
std::optional<std::string> keyed_value(const std::string& text, std::string_view key) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (trim(std::string_view(line).substr(0, colon)) != key) continue;
    return std::string(trim(std::string_view(line).substr(colon + 1)));
  }
  return std::nullopt;
}

// The first non-blank line after the line that is `heading` (blanks trimmed).
std::optional<std::string> value_under(const std::string& text, std::string_view heading) {
  std::istringstream lines(text);
  std::string line;
  bool found = false;
  while (std::getline(lines, line)) {
    const std::string_view trimmed = trim(line);
    if (found && !trimmed.empty()) return std::string(trimmed);
    found = found || trimmed == heading;
  }
  return std::nullopt;
}

}  // namespace

std::optional<SpodInfo> parse_spod_info(const std::string& text) {
  const auto pod = keyed_value(text, "Super Pod ID");
  if (!pod || pod->empty()) return std::nullopt;
  SpodInfo info{*pod, keyed_value(text, "Server Index").value_or(""), std::nullopt};
  if (const auto sdid = keyed_value(text, "SDID")) {
    int value = 0;
    const auto [end, ec] = std::from_chars(sdid->data(), sdid->data() + sdid->size(), value);
    if (ec == std::errc() && end == sdid->data() + sdid->size() && value >= 0) info.sdid = value;
  }
  return info;
}

std::optional<std::string> parse_lldp_switch(const std::string& text) {
  if (auto name = value_under(text, "System Name TLV"); name && !name->ends_with("TLV"))
    return name;
  auto chassis = value_under(text, "Chassis ID TLV");
  if (!chassis || chassis->ends_with("TLV")) return std::nullopt;
  for (const std::string_view prefix : {"MAC: ", "Local: ", "IPv4: ", "IfName: "}) {
    if (chassis->starts_with(prefix)) return chassis->substr(prefix.size());
  }
  return chassis;
}

}  // namespace npu_run
