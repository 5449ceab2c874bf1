#include "agent/plan/plan_supervision.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "basics/exit_status.hpp"

namespace npu_run {
namespace {

double seconds(std::chrono::milliseconds d) {
  return std::chrono::duration<double>(d).count();
}

std::string hang_text(const HangPolicy& hang) {
  if (hang.learned) {
    return fmt::format("auto ({:g} times the longest silence between beats, at least {:g} s)",
                       hang.learned_factor, seconds(hang.timeout));
  }
  return hang.enabled() ? fmt::format("{:g} s after a worker's last beat", seconds(hang.timeout))
                        : std::string("off");
}

std::string signals_text(const std::vector<int>& signals) {
  std::string text;
  for (int sig : signals) text += (text.empty() ? "" : ", ") + signal_name(sig);
  return text.empty() ? "none" : text;
}

}  // namespace

std::string supervision_text(const SupervisionConfig& s) {
  std::string out = fmt::format("supervision: max restarts {}", s.max_restarts);
  if (s.max_no_progress_restarts > 0)
    out += fmt::format(", at most {} in a row without progress", s.max_no_progress_restarts);
  out += fmt::format(
      "; a failure within {:g} s of the start that says the script is broken stops "
      "the job (--startup-window)\n",
      seconds(s.startup_window));
  out += fmt::format("supervision: hang timeout {}; exit timeout {}\n", hang_text(s.hang),
                     s.hang.exit_timeout ? fmt::format("{:g} s", seconds(*s.hang.exit_timeout))
                                         : std::string("off"));
  out += fmt::format("supervision: stragglers {}", kStragglerModeNames.name(s.straggler.mode));
  if (s.straggler.mode != StragglerMode::kOff)
    out += fmt::format(" (windows of {:g} s)", seconds(s.straggler.window));
  out += fmt::format("; a device another program holds is waited for {:g} s\n",
                     seconds(s.device_release_timeout));
  out += fmt::format(
      "supervision: signals forwarded to the workers: {}; {}; ledger of bad nodes: {}\n",
      signals_text(s.stop_signals),
      s.stop_with_parent ? "the job stops if the launcher that started npu_run exits"
                         : "no parent watched",
      s.ledger.path ? *s.ledger.path : std::string("none"));
  return out;
}

nlohmann::json supervision_json(const SupervisionConfig& s) {
  using nlohmann::json;
  json signals = json::array();
  for (int sig : s.stop_signals) signals.push_back(signal_name(sig));
  return json{
      {"max_restarts", s.max_restarts},
      {"max_no_progress_restarts",
       s.max_no_progress_restarts > 0 ? json(s.max_no_progress_restarts) : json(nullptr)},
      {"term_timeout_s", seconds(s.term_timeout)},
      {"startup_window_s", seconds(s.startup_window)},
      {"hang_timeout_s", s.hang.enabled() ? json(seconds(s.hang.timeout)) : json(nullptr)},
      {"hang_timeout_learned", s.hang.learned},
      {"exit_timeout_s", s.hang.exit_timeout ? json(seconds(*s.hang.exit_timeout)) : json(nullptr)},
      {"straggler", kStragglerModeNames.name(s.straggler.mode)},
      {"straggler_window_s", seconds(s.straggler.window)},
      {"device_release_timeout_s", seconds(s.device_release_timeout)},
      {"signals_to_handle", signals},
      {"stop_with_parent", s.stop_with_parent},
      {"auto_progress", s.auto_progress},
      {"ledger", s.ledger.path ? json(*s.ledger.path) : json(nullptr)}};
}

}  // namespace npu_run
