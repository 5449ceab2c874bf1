#include "health/npu_smi_output.hpp"

#include <algorithm>
#include <regex>
#include <sstream>

#include "basics/text.hpp"

namespace npu_run {

namespace {

std::vector<std::string> table_cells(std::string_view line) {
  std::vector<std::string> cells;
  line = trim(line);
  if (line.size() < 2 || line.front() != '|') return cells;
  line = line.substr(1);
  if (line.back() == '|') line.remove_suffix(1);
  for (std::string_view cell : split(line, '|')) cells.emplace_back(trim(cell));
  return cells;
}

std::vector<std::string> words(std::string_view text) {
  std::vector<std::string> found;
  std::istringstream in{std::string(text)};
  for (std::string word; in >> word;) found.push_back(word);
  return found;
}

std::optional<int> small_number(std::string_view text) {
  const auto value = parse_integer(text, 0, 1 << 20);
  if (!value) return std::nullopt;
  return static_cast<int>(*value);
}

bool looks_like_bus_id(const std::string& cell) {
  static const std::regex kBusId(R"([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])");
  return std::regex_search(cell, kBusId);
}

// A process row: "| 0       0                 | 2698909       | python3   | 600     |".
void read_process_row(const std::vector<std::string>& cells, NpuSmiTable& table) {
  if (cells.size() < 3) return;
  const auto ids = words(cells[0]);
  if (ids.size() < 2) return;  // "No running processes found in NPU 0"
  const auto npu = small_number(ids[0]);
  const auto chip = small_number(ids[1]);
  const auto pid = parse_integer(cells[1], 1, 1LL << 40);
  if (!npu || !chip || !pid) return;
  table.processes.push_back({*npu, *chip, static_cast<long>(*pid), cells[2]});
}

}  // namespace

NpuSmiTable parse_npu_smi_info(const std::string& text) {
  NpuSmiTable table;
  bool in_processes = false;
  std::optional<NpuSmiChip> pending;  // a chip's first row, waiting for its chip-id row
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto cells = table_cells(line);
    if (cells.size() < 2) continue;
    if (cells[1].find("Process id") != std::string::npos) {
      in_processes = true;
      continue;
    }
    if (in_processes) {
      read_process_row(cells, table);
      continue;
    }
    const auto first = words(cells[0]);
    if (first.empty() || !small_number(first[0])) continue;  // headers
    if (looks_like_bus_id(cells[1])) {
      if (!pending) continue;
      pending->chip = *small_number(first[0]);
      table.chips.push_back(*pending);
      pending.reset();
    } else if (first.size() >= 2) {
      NpuSmiChip chip;
      chip.npu = *small_number(first[0]);
      chip.name = first[1];
      const auto health = words(cells[1]);
      chip.health = health.empty() ? "" : health[0];
      pending = chip;
    }
  }
  return table;
}

std::optional<ChipHealth> parse_chip_health(const std::string& text) {
  std::optional<ChipHealth> health;
  std::string codes, information;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string_view key = trim(std::string_view(line).substr(0, colon));
    const std::string value(trim(std::string_view(line).substr(colon + 1)));
    if (key == "Health Status") health = ChipHealth{value, {}, {}};
    if (key == "Error Code") codes = value;
    if (key == "Error Information") information = value;
  }
  if (!health) return std::nullopt;
  if (codes != "NA") health->error_codes = words(codes);
  if (information != "NA") health->information = information;
  return health;
}

std::vector<ChipMapRow> parse_chip_map(const std::string& text) {
  std::vector<ChipMapRow> rows;
  bool has_physical = false;
  bool header_seen = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find("Chip Logic ID") != std::string::npos) {
      header_seen = true;
      has_physical = line.find("Phy-ID") != std::string::npos;
      continue;
    }
    const auto w = words(line);
    const size_t ids = has_physical ? 4 : 3;
    if (!header_seen || w.size() < ids) continue;
    const auto npu = small_number(w[0]);
    const auto chip = small_number(w[1]);
    const auto logic = small_number(w[2]);
    const auto physical = has_physical ? small_number(w[3]) : logic;
    if (!npu || !chip || !logic || !physical) continue;
    ChipMapRow row{*npu, *chip, *physical, {}};
    for (size_t i = ids; i < w.size(); ++i) row.name += (i > ids ? " " : "") + w[i];
    rows.push_back(row);
  }
  return rows;
}

std::vector<DeviceProcess> processes_on_devices(const NpuSmiTable& table,
                                                const std::vector<ChipMapRow>& map,
                                                const std::vector<int>& devices) {
  std::vector<DeviceProcess> found;
  for (const NpuSmiProcess& process : table.processes) {
    for (const ChipMapRow& chip : map) {
      if (chip.npu != process.npu || chip.chip != process.chip) continue;
      if (std::find(devices.begin(), devices.end(), chip.physical_id) == devices.end()) continue;
      found.push_back(DeviceProcess{chip.physical_id, process.pid, process.name});
    }
  }
  return found;
}

}  // namespace npu_run
