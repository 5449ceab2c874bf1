// `npu_run doctor`: checks of this host that large or Ascend jobs depend on, each ok/warn/fail
// with the exact command that fixes it. Reads /proc (or a fake tree in tests), never changes it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "basics/environment.hpp"

namespace npu_run {

struct DoctorSettings {
  int nnodes = 1;  // scales the recommendations
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Set inside a scheduler's job on a node other than node 0: the master port is node 0's to
  // check (on hosts shared by several "nodes", probing it would race node 0's own probe).
  std::optional<int> other_node_rank;
  std::string proc_root = "/proc";  // $NPU_RUN_PROC_ROOT in tests
  std::string hccn_conf = "/etc/hccn.conf";
  EnvMap env;  // HCCL_IF_BASE_PORT, NPU_RUN_DEV_ROOT, visible devices
  // --rdzv-backend etcd --rdzv-endpoint A,B,C: each member is asked whether it answers.
  std::string etcd_endpoints;
};

struct CheckResult {
  enum class Status { kOk, kWarn, kFail };
  std::string name;
  Status status = Status::kOk;
  std::string detail;
  std::string fix;  // a command or file line; empty when there is nothing to do
};

std::vector<CheckResult> run_doctor(const DoctorSettings& settings);

std::string format_doctor_text(const DoctorSettings& settings,
                               const std::vector<CheckResult>& results);
std::string format_doctor_json(const DoctorSettings& settings,
                               const std::vector<CheckResult>& results);

// 0 when nothing failed, 1 otherwise (warnings alone pass).
int doctor_exit_code(const std::vector<CheckResult>& results);

// "60000-60031,61000" -> ranges; the format of net.ipv4.ip_local_reserved_ports.
std::vector<std::pair<int, int>> parse_port_ranges(const std::string& text);

}  // namespace npu_run
