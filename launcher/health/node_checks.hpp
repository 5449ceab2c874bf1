// The node checks of the health gate as a plan: which tool calls to make for this node's
// devices, and what each answer means (a HealthFinding with the tool's words and the fix).
// Pure: the agent runs the calls (agent/health/health_runner.hpp) and hands each answer back; a
// call's answer may add calls (npu-smi's chip map decides which chips to ask about).
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "health/device_pings.hpp"
#include "health/hccn_output.hpp"
#include "health/npu_smi_output.hpp"
#include "health/tool_run.hpp"
#include "health/verdict.hpp"

namespace npu_run {

// Each tool runs one call at a time (hccn_tool: one per device, agent/health/health_runner.hpp);
// different tools run side by side. A device refuses a second hccn_tool call with "busy"
// (exit 11), and npu-smi is given the same courtesy.
enum class HealthTool { kNpuSmi, kHccnTool, kNvidiaSmi, kUserCheck };

struct HealthToolPaths {
  std::string npu_smi;  // empty: not found
  std::string hccn_tool;
  std::string nvidia_smi;
};

struct NodeCheckSettings {
  std::string host;
  enum class Devices { kNone, kAscend, kNvidia } kind = Devices::kNone;
  std::vector<int> devices;  // physical ids of this job's local ranks
  HealthToolPaths tools;
  std::string user_check;  // --health-check-cmd, run with sh -c; empty: none
  int flap_window_min = 10;
  // The command line of a pid npu-smi names without one (inside containers): /proc, by the agent.
  std::function<std::string(long pid)> command_of;
  // Not empty: a ping run instead of the node checks, the pings the rendezvous asked this node
  // for once every node's device addresses were in (health/device_pings.hpp). Their answers
  // are the verdict's `pings`.
  std::vector<DevicePing> pings{};
};

struct PlannedCall {
  HealthTool tool = HealthTool::kNpuSmi;
  std::string check;  // the finding it produces ("link", "npu_health", ...)
  int device = -1;    // physical id; -1: the node
  std::vector<std::string> argv;
  // Its finding is at worst a warning (optics, link flaps): the gate's verdict is sent without
  // waiting for it, and it runs after every call that can fail the node.
  bool warn_only = false;
};

class NodeCheckPlan {
 public:
  explicit NodeCheckPlan(NodeCheckSettings settings);

  // The calls to make first, and findings known without any call (a tool that is missing).
  std::vector<PlannedCall> first_calls();
  // Judges one call's answer; returns the calls it makes necessary.
  std::vector<PlannedCall> record(const PlannedCall& call, const ToolRun& run);
  // A call that never ran (the time budget ran out first).
  void never_ran(const PlannedCall& call, const std::string& why);

  NodeVerdict verdict() const;

 private:
  std::vector<PlannedCall> ascend_calls();
  std::vector<PlannedCall> nvidia_calls();
  std::vector<PlannedCall> ping_calls();
  void record_ping(const PlannedCall& call, const ToolRun& run);
  void read_chip_map(const ToolRun& map_run);
  std::vector<PlannedCall> chip_health_calls();
  void add(HealthFinding finding) { verdict_.findings.push_back(std::move(finding)); }
  bool is_job_device(int device) const {
    return std::find(settings_.devices.begin(), settings_.devices.end(), device) !=
           settings_.devices.end();
  }
  void judge_npu_processes(const ToolRun& run);
  void judge_hccn(const PlannedCall& call, const ToolRun& run);
  void judge_nvidia(const PlannedCall& call, const ToolRun& run);
  void judge_mixed_families();
  void judge_gpu_remap(const std::vector<std::string>& row);
  void judge_gpu_process(const std::vector<std::string>& row);

  NodeCheckSettings settings_;
  NodeVerdict verdict_;
  std::map<int, ChipMapRow> chips_;   // physical id -> npu-smi's (NPU, chip), this job's only
  std::optional<ToolRun> map_run_;    // `npu-smi info -m`, once answered
  std::optional<NpuSmiTable> table_;  // `npu-smi info`, once answered (empty: it was not)
  std::map<int, DeviceAddress> addresses_;
  size_t pending_ip_ = 0;               // -ip -g answers still to come
  std::map<std::string, int> bus_ids_;  // nvidia-smi's PCI bus id -> this job's GPU
};

// Judges of single answers, each usable alone (tests, `doctor --devices`).
HealthFinding judge_link(int device, const ToolRun& run);
HealthFinding judge_net_health(int device, const ToolRun& run);
HealthFinding judge_device_ip(int device, const ToolRun& run, std::optional<DeviceAddress>& found);
HealthFinding judge_tls(int device, const ToolRun& run, std::optional<int>& tls_switch);
HealthFinding judge_optical(int device, const ToolRun& run);
HealthFinding judge_link_stat(int device, const ToolRun& run, int flap_window_min);
HealthFinding judge_chip_health(int device, const ChipMapRow& chip, const ToolRun& run);
HealthFinding judge_user_check(const ToolRun& run);
// The finding of a call that did not answer (timeout, busy to the end, not started), or
// nullopt when it answered and its output should be judged.
std::optional<HealthFinding> unanswered(const std::string& check, int device, const ToolRun& run);

}  // namespace npu_run
