// The dry run's account of supervision: every option that decides when a worker is stopped,
// restarted or named (restarts, the stop's grace, hang and exit timeouts, the startup window,
// the devices' wait, stragglers, the signals handled, the parent watch, the ledger), as lines of
// text and as JSON (agent/plan_printer.cpp).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "config/launch_config.hpp"

namespace npu_run {

// "supervision: ..." lines, each ending in a newline.
std::string supervision_text(const SupervisionConfig& s);
// The same as an object: seconds as numbers, null where an option is off.
nlohmann::json supervision_json(const SupervisionConfig& s);

}  // namespace npu_run
