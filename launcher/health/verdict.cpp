#include "health/verdict.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "basics/enum_table.hpp"
#include "basics/text.hpp"

namespace npu_run {

namespace {

constexpr EnumTable<HealthStatus, 5> kStatusNames{{{
    {HealthStatus::kPass, "pass"},
    {HealthStatus::kWarn, "warn"},
    {HealthStatus::kFail, "fail"},
    {HealthStatus::kSkipped, "skipped"},
    {HealthStatus::kNotRun, "not run"},
}}};

// Worst first: what stops the job, then what could not be checked, then warnings.
int rank_of(HealthStatus status) {
  switch (status) {
    case HealthStatus::kFail:
      return 0;
    case HealthStatus::kNotRun:
      return 1;
    case HealthStatus::kWarn:
      return 2;
    case HealthStatus::kSkipped:
      return 3;
    case HealthStatus::kPass:
      return 4;
  }
  return 4;
}

}  // namespace

std::string finding_subject(const HealthFinding& finding) {
  if (finding.device < 0) return finding.check;
  return fmt::format("{} device {}", finding.check, finding.device);
}

const char* to_string(HealthStatus status) {
  return kStatusNames.name(status).data();  // the names are literals: NUL-terminated
}

bool NodeVerdict::failed() const {
  return std::any_of(findings.begin(), findings.end(),
                     [](const HealthFinding& f) { return f.status == HealthStatus::kFail; });
}

std::vector<HealthFinding> NodeVerdict::with_status(HealthStatus status) const {
  std::vector<HealthFinding> found;
  std::copy_if(findings.begin(), findings.end(), std::back_inserter(found),
               [&](const HealthFinding& f) { return f.status == status; });
  return found;
}

std::string format_verdict_text(const NodeVerdict& verdict) {
  std::vector<const HealthFinding*> shown;
  for (const HealthFinding& finding : verdict.findings) {
    if (finding.status != HealthStatus::kPass) shown.push_back(&finding);
  }
  std::stable_sort(shown.begin(), shown.end(), [](const auto* a, const auto* b) {
    return rank_of(a->status) < rank_of(b->status);
  });
  std::string text;
  for (const HealthFinding* finding : shown) {
    text += fmt::format("{:<7} {}: {}", to_string(finding->status), finding_subject(*finding),
                        finding->detail);
    if (!finding->fix.empty()) text += fmt::format(" (fix: {})", finding->fix);
    text += '\n';
  }
  const auto passed = verdict.with_status(HealthStatus::kPass).size() + verdict.omitted_passes;
  text += fmt::format("{} of {} checks passed in {:.1f} s", passed,
                      verdict.findings.size() + verdict.omitted_passes,
                      static_cast<double>(verdict.elapsed_ms) / 1000.0);
  text += verdict.failed() ? "; the node fails its health gate\n" : "\n";
  return text;
}

NodeVerdict compact(const NodeVerdict& verdict) {
  NodeVerdict sent = verdict;
  sent.findings.clear();
  sent.pings.clear();  // answers travel in their own message
  if (sent.device_ips.size() > kMaxSentDevices) sent.device_ips.resize(kMaxSentDevices);
  sent.omitted_passes = verdict.omitted_passes;
  std::vector<HealthFinding> rest;
  for (const HealthFinding& finding : verdict.findings) {
    if (finding.status == HealthStatus::kPass) {
      ++sent.omitted_passes;
    } else {
      rest.push_back(finding);
    }
  }
  std::stable_sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) {
    return rank_of(a.status) < rank_of(b.status);
  });
  if (rest.size() > kMaxSentFindings) rest.resize(kMaxSentFindings);
  for (HealthFinding& finding : rest) {
    if (finding.detail.size() > kMaxSentText) finding.detail.resize(kMaxSentText);
    if (finding.fix.size() > kMaxSentText) finding.fix.resize(kMaxSentText);
  }
  sent.findings = std::move(rest);
  return sent;
}

std::string first_failure_line(const NodeVerdict& verdict) {
  for (const HealthFinding& finding : verdict.findings) {
    if (finding.status != HealthStatus::kFail) continue;
    std::string line = fmt::format("{}: {}", finding_subject(finding), finding.detail);
    if (!finding.fix.empty()) line += fmt::format(" (fix: {})", finding.fix);
    return line;
  }
  return {};
}

void to_json(nlohmann::json& json, const HealthFinding& finding) {
  json = {{"check", finding.check},
          {"device", finding.device},
          {"status", to_string(finding.status)},
          {"detail", finding.detail},
          {"fix", finding.fix}};
}

void from_json(const nlohmann::json& json, HealthFinding& finding) {
  finding.check = json.at("check").get<std::string>();
  finding.device = json.at("device").get<int>();
  const auto status = kStatusNames.find(json.at("status").get<std::string>());
  if (!status) throw nlohmann::json::other_error::create(501, "unknown health status", &json);
  finding.status = *status;
  finding.detail = json.at("detail").get<std::string>();
  finding.fix = json.value("fix", std::string{});
}

namespace {

// [{"device": 0, "ip": "10.0.0.10"}, ...]: a list, because its order is the local ranks'.
nlohmann::json device_ips_json(const std::vector<DeviceIp>& ips) {
  nlohmann::json json = nlohmann::json::array();
  for (const DeviceIp& d : ips) json.push_back({{"device", d.device}, {"ip", d.ip}});
  return json;
}

}  // namespace

void to_json(nlohmann::json& json, const NodeVerdict& verdict) {
  nlohmann::json tls = nlohmann::json::object();
  for (const auto& [device, value] : verdict.tls_switch) tls[std::to_string(device)] = value;
  json = {{"host", verdict.host},
          {"failed", verdict.failed()},
          {"elapsed_ms", verdict.elapsed_ms},
          {"slowest_call", verdict.slowest_call},
          {"slowest_ms", verdict.slowest_ms},
          {"omitted_passes", verdict.omitted_passes},
          {"findings", verdict.findings},
          {"tls_switch", tls},
          {"device_ips", device_ips_json(verdict.device_ips)},
          {"settings", verdict.settings}};
}

void from_json(const nlohmann::json& json, NodeVerdict& verdict) {
  verdict.host = json.at("host").get<std::string>();
  verdict.elapsed_ms = json.value("elapsed_ms", int64_t{0});
  verdict.slowest_call = json.value("slowest_call", "");
  verdict.slowest_ms = json.value("slowest_ms", int64_t{0});
  verdict.omitted_passes = json.value("omitted_passes", 0);
  verdict.findings = json.at("findings").get<std::vector<HealthFinding>>();
  verdict.tls_switch.clear();
  const nlohmann::json tls = json.value("tls_switch", nlohmann::json::object());
  for (const auto& [device, value] : tls.items()) {
    const auto id = parse_integer(device, 0, 1 << 20);
    if (!id) throw nlohmann::json::other_error::create(501, "a device id is not a number", &json);
    verdict.tls_switch[static_cast<int>(*id)] = value.get<int>();
  }
  verdict.device_ips.clear();
  for (const nlohmann::json& d : json.value("device_ips", nlohmann::json::array()))
    verdict.device_ips.push_back({d.at("device").get<int>(), d.at("ip").get<std::string>()});
  verdict.settings =
      json.value("settings", nlohmann::json::object()).get<std::map<std::string, std::string>>();
}

}  // namespace npu_run
