// What the plan makes of the answers that concern several devices at once: npu-smi's process
// table, nvidia-smi's queries, and the address family of every device.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "basics/text.hpp"
#include "health/node_checks.hpp"
#include "health/nvidia_smi_output.hpp"

namespace npu_run {

namespace {

std::string held_by(long pid, const std::string& name) {
  if (name.empty()) return fmt::format("pid {}", pid);
  return fmt::format("pid {} ({})", pid, printable(name));
}

}  // namespace

void NodeCheckPlan::judge_npu_processes(const ToolRun& run) {
  if (auto none = unanswered("npu_processes", -1, run)) return add(*none);
  const NpuSmiTable table = parse_npu_smi_info(run.out);
  if (run.code != 0 || table.chips.empty()) {
    return add({"npu_processes",
                -1,
                HealthStatus::kNotRun,
                fmt::format("npu-smi info printed no table ({})", run.describe()),
                {}});
  }
  if (chips_.empty()) {
    return add({"npu_processes",
                -1,
                HealthStatus::kNotRun,
                "without `npu-smi info -m` the processes cannot be placed on devices",
                {}});
  }
  std::vector<ChipMapRow> map;
  for (const auto& [device, chip] : chips_) map.push_back(chip);
  std::map<int, std::vector<std::string>> holders;  // this job's devices only
  for (const DeviceProcess& process : processes_on_devices(table, map, settings_.devices)) {
    std::string name = process.name;
    if (name.empty() && settings_.command_of) name = settings_.command_of(process.pid);
    holders[process.device].push_back(held_by(process.pid, name));
  }
  for (const int device : settings_.devices) {
    const auto held = holders.find(device);
    if (held == holders.end()) {
      add({"npu_processes", device, HealthStatus::kPass, "no process on the device", {}});
      continue;
    }
    std::string who;
    for (const std::string& one : held->second) who += (who.empty() ? "" : ", ") + one;
    add({"npu_processes", device, HealthStatus::kFail,
         fmt::format("device {} is held by {}", device, who),
         "end that process (it may be the last job's), or run on other devices with --devices"});
  }
}

void NodeCheckPlan::judge_hccn(const PlannedCall& call, const ToolRun& run) {
  const int device = call.device;
  if (call.check == "link") add(judge_link(device, run));
  if (call.check == "net_health") add(judge_net_health(device, run));
  if (call.check == "optical") add(judge_optical(device, run));
  if (call.check == "link_stat") add(judge_link_stat(device, run, settings_.flap_window_min));
  if (call.check == "tls") {
    std::optional<int> tls_switch;
    add(judge_tls(device, run, tls_switch));
    if (tls_switch) verdict_.tls_switch[device] = *tls_switch;
  }
  if (call.check == "ip") {
    std::optional<DeviceAddress> address;
    add(judge_device_ip(device, run, address));
    if (address) addresses_[device] = *address;
    if (--pending_ip_ == 0) judge_mixed_families();
  }
}

// HCCL fails when the cards of one node mix IPv4 and IPv6.
void NodeCheckPlan::judge_mixed_families() {
  std::vector<int> v4, v6;
  for (const auto& [device, address] : addresses_) (address.ipv6 ? v6 : v4).push_back(device);
  if (v4.empty() || v6.empty()) return;
  const auto list = [](const std::vector<int>& devices) { return fmt::format("{}", devices); };
  add({"ip", -1, HealthStatus::kFail,
       fmt::format("devices mix address families: IPv4 on {}, IPv6 on {}", list(v4), list(v6)),
       "give every device of the node addresses of one family (hccn_tool -i N -ip -s ...)"});
}

void NodeCheckPlan::judge_nvidia(const PlannedCall& call, const ToolRun& run) {
  if (auto none = unanswered(call.check, -1, run)) return add(*none);
  if (run.code != 0) {
    return add({call.check,
                -1,
                HealthStatus::kNotRun,
                fmt::format("{}: {}", run.command_line(), run.describe()),
                {}});
  }
  for (const auto& row : parse_nvidia_csv(run.out)) {
    if (call.check == "gpu_ecc" && row.size() >= 3) {
      const auto index = parse_integer(row[0], 0, 1 << 16);
      if (!index || !is_job_device(static_cast<int>(*index))) continue;
      const int device = static_cast<int>(*index);
      bus_ids_[row[1]] = device;
      const auto errors = nvidia_count(row[2]);
      if (errors && *errors > 0) {
        add({"gpu_ecc", device, HealthStatus::kFail,
             fmt::format("{} uncorrected volatile ECC errors", *errors),
             fmt::format("drain the GPU, then `nvidia-smi -r -i {}`; `nvidia-smi -q -d ECC` "
                         "shows the counters",
                         device)});
      } else {
        add({"gpu_ecc", device, HealthStatus::kPass, "no uncorrected ECC errors", {}});
      }
    }
    if (call.check == "gpu_remap" && row.size() >= 3) judge_gpu_remap(row);
    if (call.check == "gpu_processes" && row.size() >= 2) judge_gpu_process(row);
  }
}

void NodeCheckPlan::judge_gpu_remap(const std::vector<std::string>& row) {
  const auto gpu = bus_ids_.find(row[0]);
  if (gpu == bus_ids_.end()) return;
  const bool pending = nvidia_flag(row[1]).value_or(false);
  const bool failed = nvidia_flag(row[2]).value_or(false);
  if (!pending && !failed) return;
  add({"gpu_remap", gpu->second, HealthStatus::kFail,
       failed ? "row remapping failed" : "a row remapping is pending: the GPU needs a reset",
       fmt::format("drain the GPU, then `nvidia-smi -r -i {}`", gpu->second)});
}

void NodeCheckPlan::judge_gpu_process(const std::vector<std::string>& row) {
  const auto gpu = bus_ids_.find(row[1]);
  const auto pid = parse_integer(row[0], 1, 1LL << 40);
  if (gpu == bus_ids_.end() || !pid) return;
  const std::string name = settings_.command_of ? settings_.command_of(*pid) : std::string{};
  add({"gpu_processes", gpu->second, HealthStatus::kFail,
       fmt::format("GPU {} is held by {}", gpu->second, held_by(static_cast<long>(*pid), name)),
       "end that process (it may be the last job's), or run on other devices with --devices"});
}

}  // namespace npu_run
