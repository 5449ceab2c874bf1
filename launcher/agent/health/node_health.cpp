#include "agent/health/node_health.hpp"

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <fstream>
#include <iterator>

#include "basics/text.hpp"
#include "health/tool_paths.hpp"
#include "workers/child_exits.hpp"

namespace npu_run {

NodeCheckSettings node_check_settings(const EnvMap& env, const NodeHealthOptions& options) {
  NodeCheckSettings checks;
  checks.host = options.host;
  checks.devices = options.devices;
  checks.kind = options.kind == DeviceKind::kAscend   ? NodeCheckSettings::Devices::kAscend
                : options.kind == DeviceKind::kNvidia ? NodeCheckSettings::Devices::kNvidia
                                                      : NodeCheckSettings::Devices::kNone;
  checks.tools = locate_health_tools(
      lookup(env, "PATH").value_or("/usr/bin:/bin"),
      [](const std::string& path) { return ::access(path.c_str(), X_OK) == 0; });
  checks.user_check = options.user_check;
  checks.flap_window_min = options.flap_window_min;
  checks.command_of = command_of_pid;
  return checks;
}

std::string command_of_pid(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  for (char& c : raw) {
    if (c == '\0') c = ' ';
  }
  return printable(raw.substr(0, 200));
}

NodeVerdict run_node_checks(const NodeCheckSettings& checks, const HealthRunSettings& settings) {
  boost::asio::io_context io;
  ChildExits exits(io);
  NodeVerdict verdict;
  auto runner = std::make_shared<HealthRunner>(io, exits, checks, settings);
  // Stopped, not run dry: before Linux 5.3 ChildExits keeps a SIGCHLD wait pending for good.
  runner->start([&](NodeVerdict done) {
    verdict = std::move(done);
    io.stop();
  });
  io.run();
  return verdict;
}

}  // namespace npu_run
