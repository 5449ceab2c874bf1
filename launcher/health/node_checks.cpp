// The plan of a node's checks: which calls, in which order, and what each answer adds.
#include "health/node_checks.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "basics/text.hpp"
#include "health/nvidia_smi_output.hpp"

namespace npu_run {

namespace {

// hccn_tool's per-device commands, in the order FaultDiag's collector runs them.
// The checks that can fail a node (or its job: the TLS switch) first, for every device; then
// those that only warn, which the gate's verdict does not wait for
// (agent/health/health_runner.hpp).
struct HccnCheck {
  const char* check;
  const char* flag;
  bool warn_only;
};
constexpr HccnCheck kHccnChecks[] = {
    {"link", "-link", false},      {"net_health", "-net_health", false},
    {"ip", "-ip", false},          {"tls", "-tls", false},
    {"optical", "-optical", true}, {"link_stat", "-link_stat", true},
};

const char* const kGpuQuery = "--query-gpu=index,pci.bus_id,ecc.errors.uncorrected.volatile.total";
const char* const kRemapQuery =
    "--query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure";
const char* const kAppsQuery = "--query-compute-apps=pid,gpu_bus_id,used_memory";

}  // namespace

NodeCheckPlan::NodeCheckPlan(NodeCheckSettings settings) : settings_(std::move(settings)) {
  verdict_.host = settings_.host;
}

std::vector<PlannedCall> NodeCheckPlan::first_calls() {
  if (!settings_.pings.empty()) return ping_calls();
  std::vector<PlannedCall> calls;
  if (settings_.kind == NodeCheckSettings::Devices::kAscend) calls = ascend_calls();
  if (settings_.kind == NodeCheckSettings::Devices::kNvidia) calls = nvidia_calls();
  if (settings_.kind == NodeCheckSettings::Devices::kNone) {
    add({"devices", -1, HealthStatus::kSkipped, "no NPUs or GPUs on this node", {}});
  }
  if (!settings_.user_check.empty()) {
    calls.push_back(
        {HealthTool::kUserCheck, "user_check", -1, {"/bin/sh", "-c", settings_.user_check}});
  }
  return calls;
}

std::vector<PlannedCall> NodeCheckPlan::ascend_calls() {
  std::vector<PlannedCall> calls;
  const std::string& npu_smi = settings_.tools.npu_smi;
  const std::string& hccn = settings_.tools.hccn_tool;
  if (npu_smi.empty()) {
    add({"npu-smi",
         -1,
         HealthStatus::kSkipped,
         "npu-smi is not on PATH nor in /usr/local/bin or /usr/local/sbin: the NPUs' health and "
         "the processes on them are not checked",
         {}});
  } else {
    calls.push_back({HealthTool::kNpuSmi, "npu_map", -1, {npu_smi, "info", "-m"}});
    calls.push_back({HealthTool::kNpuSmi, "npu_processes", -1, {npu_smi, "info"}});
  }
  if (hccn.empty()) {
    add({"hccn_tool",
         -1,
         HealthStatus::kSkipped,
         "hccn_tool is not on PATH nor in /usr/local/Ascend/driver/tools: links, device "
         "addresses, TLS and optics are not checked",
         {}});
    return calls;
  }
  for (const bool warn_only : {false, true}) {
    for (const int device : settings_.devices) {
      for (const HccnCheck& c : kHccnChecks) {
        if (c.warn_only != warn_only) continue;
        calls.push_back({HealthTool::kHccnTool,
                         c.check,
                         device,
                         {hccn, "-i", std::to_string(device), c.flag, "-g"},
                         c.warn_only});
      }
    }
  }
  pending_ip_ = settings_.devices.size();
  return calls;
}

std::vector<PlannedCall> NodeCheckPlan::ping_calls() {
  std::vector<PlannedCall> calls;
  for (const DevicePing& ping : settings_.pings) {
    if (settings_.tools.hccn_tool.empty()) {
      verdict_.pings.push_back({ping.device, ping.ip, PingAnswer::kNotRun,
                                "hccn_tool is not on PATH nor in /usr/local/Ascend/driver/tools"});
      continue;
    }
    calls.push_back({HealthTool::kHccnTool,
                     "ping",
                     ping.device,
                     {settings_.tools.hccn_tool, "-i", std::to_string(ping.device), "-ping", "-g",
                      "address", ping.ip}});
  }
  return calls;
}

void NodeCheckPlan::record_ping(const PlannedCall& call, const ToolRun& run) {
  PingResult result{call.device, call.argv.back(), PingAnswer::kNotRun, {}};
  if (auto none = unanswered("ping", call.device, run)) {
    result.detail = none->detail;
  } else {
    const PingOutcome outcome = judge_ping(run.code, run.out, run.err);
    result.answer = outcome.reached ? PingAnswer::kReached : PingAnswer::kUnreached;
    result.detail = outcome.detail;
  }
  verdict_.pings.push_back(std::move(result));
}

std::vector<PlannedCall> NodeCheckPlan::nvidia_calls() {
  const std::string& smi = settings_.tools.nvidia_smi;
  if (smi.empty()) {
    add({"nvidia-smi",
         -1,
         HealthStatus::kSkipped,
         "nvidia-smi is not on PATH: the GPUs' ECC errors, row remapping and processes are not "
         "checked",
         {}});
    return {};
  }
  const std::string csv = "--format=csv,noheader";
  return {{HealthTool::kNvidiaSmi, "gpu_ecc", -1, {smi, kGpuQuery, csv + ",nounits"}},
          {HealthTool::kNvidiaSmi, "gpu_remap", -1, {smi, kRemapQuery, csv}},
          {HealthTool::kNvidiaSmi, "gpu_processes", -1, {smi, kAppsQuery, csv}}};
}

// Once both the chip map and the table are in. The table's Health column is the same driver
// query as `info -t health -c` (dcmi_get_device_health), which alone adds the error codes: only
// a chip the table does not show OK (or does not show) is asked about, so that a healthy node
// makes two npu-smi calls, not two plus one per chip.
std::vector<PlannedCall> NodeCheckPlan::chip_health_calls() {
  if (!map_run_ || !table_) return {};
  const ToolRun& map_run = *map_run_;
  if (auto none = unanswered("npu_health", -1, map_run)) {
    add(*none);
    return {};
  }
  std::vector<PlannedCall> calls;
  for (const int device : settings_.devices) {
    const auto chip = chips_.find(device);
    if (chip == chips_.end()) {
      add({"npu_health", device, HealthStatus::kFail,
           fmt::format("device {} is not in `npu-smi info -m` ({})", device, map_run.describe()),
           "`npu-smi info -m` lists the chips the driver sees; check the driver and the device"});
      continue;
    }
    const auto shown =
        std::find_if(table_->chips.begin(), table_->chips.end(), [&](const NpuSmiChip& row) {
          return row.npu == chip->second.npu && row.chip == chip->second.chip;
        });
    if (shown != table_->chips.end() && shown->health == "OK") {
      add({"npu_health", device, HealthStatus::kPass, "OK", {}});
      continue;
    }
    calls.push_back({HealthTool::kNpuSmi,
                     "npu_health",
                     device,
                     {settings_.tools.npu_smi, "info", "-t", "health", "-i",
                      std::to_string(chip->second.npu), "-c", std::to_string(chip->second.chip)}});
  }
  return calls;
}

void NodeCheckPlan::read_chip_map(const ToolRun& map_run) {
  map_run_ = map_run;
  if (unanswered("npu_health", -1, map_run)) return;
  for (const ChipMapRow& row : parse_chip_map(map_run.out)) {
    if (is_job_device(row.physical_id)) chips_[row.physical_id] = row;
  }
}

std::vector<PlannedCall> NodeCheckPlan::record(const PlannedCall& call, const ToolRun& run) {
  if (call.check == "ping") {
    record_ping(call, run);
    return {};
  }
  if (call.check == "npu_map") {
    read_chip_map(run);
    return chip_health_calls();
  }
  if (call.check == "npu_health") add(judge_chip_health(call.device, chips_[call.device], run));
  if (call.check == "npu_processes") {
    judge_npu_processes(run);
    table_ = unanswered("npu_processes", -1, run) ? NpuSmiTable{} : parse_npu_smi_info(run.out);
    return chip_health_calls();
  }
  if (call.check == "user_check") add(judge_user_check(run));
  if (call.tool == HealthTool::kHccnTool) judge_hccn(call, run);
  if (call.tool == HealthTool::kNvidiaSmi) judge_nvidia(call, run);
  return {};
}

void NodeCheckPlan::never_ran(const PlannedCall& call, const std::string& why) {
  if (call.check == "ping") {
    verdict_.pings.push_back({call.device, call.argv.back(), PingAnswer::kNotRun, why});
    return;
  }
  add({call.check == "npu_map" ? "npu_health" : call.check,
       call.device,
       HealthStatus::kNotRun,
       why,
       {}});
  if (call.check == "npu_processes") {  // the chips the map found are not asked about either
    table_ = NpuSmiTable{};
    for (const PlannedCall& health : chip_health_calls()) never_ran(health, why);
  }
  if (call.check == "ip" && --pending_ip_ == 0) judge_mixed_families();
}

NodeVerdict NodeCheckPlan::verdict() const {
  // The node's own findings first, then device by device, each in the order of kCheckOrder, so
  // that what a node reports does not depend on which tool answered first.
  static const std::vector<std::string> kCheckOrder = {
      "devices",       "npu-smi", "hccn_tool",  "nvidia-smi",   "user_check", "npu_health",
      "npu_processes", "link",    "net_health", "ip",           "tls",        "optical",
      "link_stat",     "gpu_ecc", "gpu_remap",  "gpu_processes"};
  const auto order = [](const std::string& check) {
    return std::find(kCheckOrder.begin(), kCheckOrder.end(), check) - kCheckOrder.begin();
  };
  NodeVerdict sorted = verdict_;
  for (const int device : settings_.devices) {
    const auto address = addresses_.find(device);
    if (address != addresses_.end()) sorted.device_ips.push_back({device, address->second.address});
  }
  std::stable_sort(sorted.findings.begin(), sorted.findings.end(),
                   [&](const HealthFinding& a, const HealthFinding& b) {
                     if (a.device != b.device) return a.device < b.device;
                     return order(a.check) < order(b.check);
                   });
  return sorted;
}

}  // namespace npu_run
