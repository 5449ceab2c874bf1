// How a node runs its checks and what a failed gate does: settings the launch's options fill
// in (--health-check, --health-timeout, --health-recheck) and the agent reads.
#pragma once

#include <chrono>
#include <string>

#include "basics/enum_table.hpp"

namespace npu_run {

// --health-check: gate (a failing node stops a static job and stays out of an elastic one),
// warn (failures are logged, nothing stops), off. The default, auto, is gate where a health
// tool or --health-check-cmd exists and off elsewhere.
enum class HealthMode { kOff, kWarn, kGate };
// The names on the command line, on the wire and in --dry-run.
inline constexpr EnumTable<HealthMode, 3> kHealthModeNames{{{
    {HealthMode::kOff, "off"},
    {HealthMode::kWarn, "warn"},
    {HealthMode::kGate, "gate"},
}}};

// --preflight: before the first round, and before a round with a node not probed yet, every node
// runs a short benchmark with the job's framework (rendezvous/state/preflight_pairs.hpp): quick (a
// matmul and an all_gather between node pairs) or full (bigger sizes, then the whole group).
enum class PreflightMode { kOff, kQuick, kFull };
inline constexpr EnumTable<PreflightMode, 3> kPreflightModeNames{{{
    {PreflightMode::kOff, "off"},
    {PreflightMode::kQuick, "quick"},
    {PreflightMode::kFull, "full"},
}}};

// --straggler: during the run, the rank that enters collectives last, keeping its peers waiting
// more than 30 % of the time over three windows, is named (warn), and with replace its node's
// seat goes to a ready spare (rendezvous/state/straggler_desk.hpp); off: the flight recorders are
// not sampled.
enum class StragglerMode { kOff, kWarn, kReplace };
inline constexpr EnumTable<StragglerMode, 3> kStragglerModeNames{{{
    {StragglerMode::kOff, "off"},
    {StragglerMode::kWarn, "warn"},
    {StragglerMode::kReplace, "replace"},
}}};

struct StragglerSettings {
  StragglerMode mode = StragglerMode::kWarn;
  std::chrono::milliseconds window{30'000};  // --straggler-window: one score per window
};

struct HealthRunSettings {
  std::chrono::milliseconds call_timeout{15000};  // each tool call (hccn_tool blocks for minutes)
  std::chrono::milliseconds budget{60000};        // all of a node's checks
  int busy_tries = 5;                             // of a call that answers "busy"
  std::chrono::milliseconds busy_pause{200};
};

struct HealthGateSettings {
  HealthMode mode = HealthMode::kOff;
  bool mode_chosen = false;  // --health-check given; else auto: gate where the tools exist
  HealthRunSettings run;
  std::string user_check;                         // --health-check-cmd
  int flap_window_min = 10;                       // --health-flap-window
  std::chrono::milliseconds recheck{30000};       // --health-recheck: an excluded node again
  bool strict_consistency = false;                // --strict-consistency
  std::string failed_hosts_file;                  // --health-failed-hosts
  PreflightMode preflight = PreflightMode::kOff;  // --preflight
  std::string preflight_python;                   // the probe's interpreter (absolute)
};

}  // namespace npu_run
