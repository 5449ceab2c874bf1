// The node's NPU state as MindCluster's FaultDiag reads it: npu_info_before.txt and
// npu_info_after.txt, which its collector (mindcluster-deploy's npu_info_collect.sh) writes
// at a job's start and end. A "Datetime: ..." line, then for each command its command line,
// its standard output and two blank lines, in the collector's order. The command lines name
// the tools by their standard absolute paths, as the collector prints them whatever it ran,
// because that is what FaultDiag's parsers match. Pure: the agent runs the commands
// (agent/health/npu_info_snapshot.hpp) and this says which, and how the file looks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "health/node_checks.hpp"

namespace npu_run {

inline constexpr const char* kStandardNpuSmi = "/usr/local/bin/npu-smi";
inline constexpr const char* kStandardHccnTool = "/usr/local/Ascend/driver/tools/hccn_tool";

// The version files the collector prints when they exist, in its order.
std::vector<std::string> npu_info_version_files();

struct NpuInfoEntry {
  std::string label;              // the command line as the file shows it
  std::vector<std::string> argv;  // what runs; empty: `file` is read instead
  std::string file;               // a "cat FILE" entry
  std::string grep;               // keep only the lines containing this ("| grep switch")
};

// `npu-smi info -m`, the entry whose answer names the chips (empty without npu-smi).
std::vector<NpuInfoEntry> npu_info_first(const HealthToolPaths& tools);
// The rest, in the collector's order: `npu-smi info`, the version files that exist, each chip's
// health, each device's hccn_tool -net_health, -ip, -link_stat, -link, -tls (switch line),
// -optical (present line, then whole), -stat, -fec, then each chip's ecc, board and usages.
// `chips`: this job's chips from `npu-smi info -m` (none: the npu-smi per-chip entries are left
// out); `devices`: the physical ids hccn_tool is asked about.
std::vector<NpuInfoEntry> npu_info_rest(const HealthToolPaths& tools,
                                        const std::vector<ChipMapRow>& chips,
                                        const std::vector<int>& devices,
                                        const std::vector<std::string>& existing_files);

// "Datetime: 2026-11-26 01:48:03.123456" and two blank lines; `wall_us`: microseconds since the
// epoch, printed in local time as `date` does.
std::string npu_info_header(int64_t wall_us);
// One entry: its command line, the output (only the lines with `grep`, if given), two blank
// lines.
std::string npu_info_block(const NpuInfoEntry& entry, const std::string& output);

}  // namespace npu_run
