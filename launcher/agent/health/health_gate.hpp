// This node's part of the health gate (--health-check): before every round it runs the node
// checks (agent/health/health_runner.hpp) while the rendezvous waits, adds the settings that must
// agree across nodes, logs one line per failure and warning, and hands the verdict to the
// rendezvous; a node kept out of an elastic job checks again every --health-recheck seconds.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "basics/environment.hpp"
#include "config/launch_config.hpp"
#include "health/device_pings.hpp"
#include "health/verdict.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class HealthGate {
 public:
  using Report = std::function<void(const NodeVerdict&)>;
  HealthGate(boost::asio::io_context& io, const LaunchConfig& cfg, std::string host, EnvMap env);
  ~HealthGate();

  bool enabled() const;
  // Runs the checks for the next round; `report` gets the verdict (whole; the rendezvous is
  // sent compact()) as soon as every check that can fail the node is in, and `late` the whole
  // verdict once the warning-only checks (optics, link flaps) are in too, if they came after.
  // An elastic job's failed gate runs them again every --health-recheck seconds, reporting
  // each verdict, until stop().
  void check(const Report& report, const Report& late = {});
  // The round formed: no more pings or rechecks, but the warning-only checks still running end
  // and reach `late`.
  void settle();
  // Runs the device-plane pings the rendezvous asked for (hccn_tool -ping, one call at a time
  // like every hccn_tool call, each under the per-call timeout, all within the budget); `done`
  // gets an answer for each.
  void ping(std::vector<DevicePing> pings, std::function<void(std::vector<PingResult>)> done);
  // What the pings found for this node: one line per failure or warning. A failure in an
  // elastic job keeps the node out, so its checks run again after --health-recheck, reported
  // as check()'s were.
  void pinged(const std::vector<HealthFinding>& findings);
  // No more checks, pings or rechecks (a round was assigned, or the agent ends).
  void stop();
  // FaultDiag's npu_info file at `path` (agent/health/npu_info_snapshot.hpp) on an Ascend node with
  // npu-smi or hccn_tool, unless --health-check is off; collected beside everything else.
  void npu_info(const std::string& path);
  // `then` runs once no npu_info file is being collected (posted at once if none is). `hurry`:
  // those still collecting stop now and write what answered.
  void after_npu_info(std::function<void()> then, bool hurry);
  // The gate stopped the job: a node whose own verdict failed adds its name to
  // --health-failed-hosts.
  void job_stopped() const;
  // The last verdict, for `npu_run status` on this host.
  const std::optional<NodeVerdict>& last() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What must agree on every node, as this node has it: HCCL's settings, the visible devices'
// count, the driver and CANN versions (their version.info files), the python executable, and the
// SHA-256 of the training script. "" for what is unset or unreadable.
std::map<std::string, std::string> consistency_settings(const LaunchConfig& cfg, const EnvMap& env);

}  // namespace npu_run
