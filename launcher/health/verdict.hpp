// A node's health verdict: what each check found, device by device, and the facts the job-wide
// checks compare across nodes (TLS switches, settings). One line per finding in the log, the
// whole of it in `npu_run status` and `npu_run doctor --devices`, JSON on the wire.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace npu_run {

enum class HealthStatus {
  kPass,
  kWarn,     // worth saying once per round; never stops a job
  kFail,     // the node cannot run this job: the gate stops it
  kSkipped,  // not run on purpose (no such tool, no such device kind), with the reason
  kNotRun,   // meant to run but could not answer (timeout, busy to the end, the budget)
};

// "pass", "warn", "fail", "skipped", "not run".
const char* to_string(HealthStatus status);

struct HealthFinding {
  std::string check;  // "link", "net_health", "npu_health", "user_check", ...
  int device = -1;    // the physical device id (/dev/davinciN, hccn_tool -i N); -1: the node
  HealthStatus status = HealthStatus::kPass;
  std::string detail;  // what the tool said, in its words ("link status: DOWN")
  std::string fix;     // the command that fixes or investigates it; empty when none
};

// A device's address on the device plane (`hccn_tool -i N -ip -g`).
struct DeviceIp {
  int device = -1;
  std::string ip;
};

// One answer of `hccn_tool -i N -ping -g address IP` (health/device_pings.hpp).
enum class PingAnswer { kReached, kUnreached, kNotRun };
struct PingResult {
  int device = -1;
  std::string ip;
  PingAnswer answer = PingAnswer::kNotRun;
  std::string detail;  // "recv time out seq=0", "timed out after 15 s", ...
};

struct NodeVerdict {
  std::string host;
  std::vector<HealthFinding> findings;
  // Per device, for the job-wide checks: the TLS switch (0/1) where hccn_tool told it.
  std::map<int, int> tls_switch;
  // This job's devices' addresses, in local-rank order, for the device-plane pings.
  std::vector<DeviceIp> device_ips;
  // Answers of the pings the rendezvous asked for (a ping run only; not sent with the verdict).
  std::vector<PingResult> pings;
  // Settings that must agree on every node (HCCL_*, versions, the script's hash): name -> value,
  // "" for unset.
  std::map<std::string, std::string> settings;
  int64_t elapsed_ms = 0;  // how long the node checks took
  // The check call that took longest ("hccn_tool -i 3 -optical -g") and how long: what the blame
  // of a slow round names (rendezvous/state/round_blame.hpp). Empty: no call ran.
  std::string slowest_call{};
  int64_t slowest_ms = 0;
  // Passes left out of `findings` (compact()): counted, not listed.
  int omitted_passes = 0;

  bool failed() const;
  std::vector<HealthFinding> with_status(HealthStatus status) const;
};

// The verdict as it travels to the rendezvous: passes counted instead of listed, at most
// kMaxSentFindings findings (worst first) with their texts cut to kMaxSentText bytes.
NodeVerdict compact(const NodeVerdict& verdict);
inline constexpr size_t kMaxSentFindings = 64;
inline constexpr size_t kMaxSentText = 480;
inline constexpr size_t kMaxSentDevices = 64;  // device_ips

// "link device 5", or "user_check" for a finding about the whole node.
std::string finding_subject(const HealthFinding& finding);

// One line per finding that is not a pass, worst first: "fail link device 5: link status: DOWN
// (fix: hccn_tool -i 5 -link -g; check the cable and the switch port)". Then one line counting
// the checks that passed and naming those skipped or not run, with why.
std::string format_verdict_text(const NodeVerdict& verdict);
// The first failure, in one line, for a summary: "node 2 (host-c): device 5 link: link status:
// DOWN". Empty when nothing failed.
std::string first_failure_line(const NodeVerdict& verdict);

void to_json(nlohmann::json& json, const HealthFinding& finding);
void from_json(const nlohmann::json& json, HealthFinding& finding);
void to_json(nlohmann::json& json, const NodeVerdict& verdict);
void from_json(const nlohmann::json& json, NodeVerdict& verdict);

}  // namespace npu_run
