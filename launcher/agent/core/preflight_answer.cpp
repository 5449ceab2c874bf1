#include "agent/core/preflight_answer.hpp"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

namespace npu_run {

namespace {

std::string probe_last_line(const std::string& text) {
  const size_t end = text.find_last_not_of("\r\n \t");
  if (end == std::string::npos) return "";
  const size_t newline = text.rfind('\n', end);
  const size_t begin = newline == std::string::npos ? 0 : newline + 1;
  return text.substr(begin, end + 1 - begin);
}

int64_t answer_micros(const nlohmann::json& answer, const char* key) {
  const auto it = answer.find(key);
  if (it == answer.end() || !it->is_number_integer()) return 0;
  return std::clamp<int64_t>(it->get<int64_t>(), 0, std::numeric_limits<int64_t>::max());
}

rdzv::ProbeReport probe_failed(std::string why) {
  rdzv::ProbeReport report;
  report.failed = true;
  report.detail = std::move(why);
  return report;
}

}  // namespace

rdzv::ProbeReport read_probe_answer(const ToolRun& run) {
  const std::string said = probe_last_line(run.err);
  if (!run.exited_zero()) {
    return probe_failed(said.empty() ? run.describe() : run.describe() + ": " + said);
  }
  const nlohmann::json answer = nlohmann::json::parse(probe_last_line(run.out), nullptr, false);
  if (!answer.is_object()) {
    return probe_failed(said.empty() ? "it printed no answer" : "it printed no answer: " + said);
  }
  if (const auto error = answer.find("error"); error != answer.end() && error->is_string())
    return probe_failed(error->get<std::string>());
  rdzv::ProbeReport report;
  report.matmul_us = answer_micros(answer, "matmul_us");
  report.gather_us = answer_micros(answer, "gather_us");
  if (const auto detail = answer.find("detail"); detail != answer.end() && detail->is_string())
    report.detail = detail->get<std::string>();
  return report;
}

}  // namespace npu_run
