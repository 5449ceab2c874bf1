#include "health/nvidia_smi_output.hpp"

#include <sstream>

#include "basics/text.hpp"

namespace npu_run {

std::vector<std::vector<std::string>> parse_nvidia_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (trim(line).empty()) continue;
    std::vector<std::string> row;
    for (std::string_view cell : split(line, ',')) row.emplace_back(trim(cell));
    rows.push_back(std::move(row));
  }
  return rows;
}

std::optional<long long> nvidia_count(const std::string& cell) {
  return parse_integer(cell, 0, 1LL << 62);
}

std::optional<bool> nvidia_flag(const std::string& cell) {
  if (cell == "Yes" || cell == "yes" || cell == "1") return true;
  if (cell == "No" || cell == "no" || cell == "0") return false;
  return std::nullopt;
}

}  // namespace npu_run
