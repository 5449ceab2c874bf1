#include "health/npu_info_file.hpp"

#include <fmt/format.h>

#include <ctime>

#include "basics/text.hpp"

namespace npu_run {

namespace {

// hccn_tool's commands, per device, in the collector's order; the second part keeps only the
// lines with that text, as its "| grep" does.
constexpr std::pair<const char*, const char*> kHccnEntries[] = {
    {"-net_health", ""},   {"-ip", ""},      {"-link_stat", ""}, {"-link", ""}, {"-tls", "switch"},
    {"-optical", "prese"}, {"-optical", ""}, {"-stat", ""},      {"-fec", ""},
};

NpuInfoEntry npu_smi_entry(const HealthToolPaths& tools, std::vector<std::string> args) {
  NpuInfoEntry entry;
  entry.label = kStandardNpuSmi;
  entry.argv = {tools.npu_smi};
  for (std::string& arg : args) {
    entry.label += " " + arg;
    entry.argv.push_back(std::move(arg));
  }
  return entry;
}

void add_chip_entries(std::vector<NpuInfoEntry>& entries, const HealthToolPaths& tools,
                      const std::vector<ChipMapRow>& chips, const char* type) {
  for (const ChipMapRow& chip : chips) {
    entries.push_back(npu_smi_entry(tools, {"info", "-i", std::to_string(chip.npu), "-c",
                                            std::to_string(chip.chip), "-t", type}));
  }
}

}  // namespace

std::vector<std::string> npu_info_version_files() {
  return {"/usr/local/Ascend/driver/version.info", "/usr/local/Ascend/firmware/version.info",
          "/usr/local/Ascend/nnae/latest/ascend_nnae_install.info",
          "/usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info",
          "/usr/local/Ascend/ascend-toolkit/latest/x86_64-linux/ascend_toolkit_install.info"};
}

std::vector<NpuInfoEntry> npu_info_first(const HealthToolPaths& tools) {
  if (tools.npu_smi.empty()) return {};
  return {npu_smi_entry(tools, {"info", "-m"})};
}

std::vector<NpuInfoEntry> npu_info_rest(const HealthToolPaths& tools,
                                        const std::vector<ChipMapRow>& chips,
                                        const std::vector<int>& devices,
                                        const std::vector<std::string>& existing_files) {
  std::vector<NpuInfoEntry> entries;
  if (!tools.npu_smi.empty()) entries.push_back(npu_smi_entry(tools, {"info"}));
  for (const std::string& file : existing_files) entries.push_back({"cat " + file, {}, file, {}});
  if (!tools.npu_smi.empty()) add_chip_entries(entries, tools, chips, "health");
  if (!tools.hccn_tool.empty()) {
    for (const auto& [command, grep] : kHccnEntries) {
      for (const int device : devices) {
        NpuInfoEntry entry;
        entry.label = fmt::format("{} -i {} {} -g", kStandardHccnTool, device, command);
        if (*grep != '\0') entry.label += fmt::format(" | grep {}", grep);
        entry.argv = {tools.hccn_tool, "-i", std::to_string(device), command, "-g"};
        entry.grep = grep;
        entries.push_back(std::move(entry));
      }
    }
  }
  if (!tools.npu_smi.empty()) {
    for (const char* type : {"ecc", "board", "usages"})
      add_chip_entries(entries, tools, chips, type);
  }
  return entries;
}

std::string npu_info_header(int64_t wall_us) {
  const std::time_t seconds = static_cast<std::time_t>(wall_us / 1'000'000);
  std::tm local{};
  ::localtime_r(&seconds, &local);
  char text[32];
  if (std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local) == 0) text[0] = '\0';
  return fmt::format("Datetime: {}.{:06}\n\n\n", text, wall_us % 1'000'000);
}

std::string npu_info_block(const NpuInfoEntry& entry, const std::string& output) {
  std::string kept;
  std::vector<std::string_view> lines = split(output, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the last line's newline
  for (const std::string_view line : lines) {
    if (entry.grep.empty() || line.find(entry.grep) != std::string_view::npos) {
      kept += line;
      kept += '\n';
    }
  }
  return entry.label + "\n" + kept + "\n\n";
}

}  // namespace npu_run
