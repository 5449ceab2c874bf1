#include "agent/health/device_release.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

#include "agent/health/tool_call.hpp"
#include "health/tool_paths.hpp"
#include "workers/child_exits.hpp"

namespace npu_run {

namespace {

constexpr std::chrono::milliseconds kRecheck{100};
// npu-smi is slow and talks to the driver: asked at most once a second while a device is held.
constexpr std::chrono::milliseconds kNpuSmiRecheck{1000};

bool same_hold(const DeviceHolder& a, const DeviceHolder& b) {
  return a.pid == b.pid && a.device == b.device;
}

}  // namespace

DeviceReleaseSettings device_release_settings(const LaunchConfig& cfg, const EnvMap& env,
                                              std::string mark) {
  DeviceReleaseSettings settings;
  const std::string root = lookup(env, "NPU_RUN_DEV_ROOT").value_or("/dev");
  settings.search.devices = device_nodes(root, cfg.shape.devices);
  settings.search.mark = std::move(mark);
  settings.search.self = ::getpid();
  settings.timeout = cfg.supervision.device_release_timeout;
  settings.devices = cfg.shape.devices;
  settings.call_timeout = cfg.health.run.call_timeout;
  // device_nodes() names "<root>/davinciN" or "<root>/nvidiaN" (the root made canonical).
  const std::string first = settings.search.devices.empty() ? "" : settings.search.devices[0];
  if (first.find("/nvidia") != std::string::npos) return settings;
  settings.device_prefix =
      first.empty() ? root + "/davinci" : first.substr(0, first.find_last_not_of("0123456789") + 1);
  settings.npu_smi =
      locate_health_tools(lookup(env, "PATH").value_or("/usr/bin:/bin"),
                          [](const std::string& path) { return ::access(path.c_str(), X_OK) == 0; })
          .npu_smi;
  return settings;
}

DeviceRelease::DeviceRelease(boost::asio::io_context& io, DeviceReleaseSettings settings)
    : io_(io), timer_(io), settings_(std::move(settings)) {}

DeviceRelease::~DeviceRelease() {
  cancel();
}

void DeviceRelease::start(Done done) {
  cancel();
  done_ = std::move(done);
  deadline_ = std::chrono::steady_clock::now() + settings_.timeout;
  told_waiting_ = false;
  check();
}

void DeviceRelease::cancel() {
  ++cycle_;
  timer_.cancel();
  if (auto call = std::exchange(call_, nullptr)) call->cancel();
  done_ = nullptr;
}

void DeviceRelease::check() {
  if (settings_.npu_smi.empty() || settings_.devices.empty() || npu_smi_failed_) {
    reported_.clear();
    return decide();
  }
  if (chip_map_.empty()) return ask_npu_smi({"info", "-m"});
  ask_npu_smi({"info"});
}

void DeviceRelease::ask_npu_smi(std::vector<std::string> arguments) {
  if (!exits_) exits_ = std::make_unique<ChildExits>(io_);
  arguments.insert(arguments.begin(), settings_.npu_smi);
  // Never past the deadline by more than a second: a hung npu-smi is no answer.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline_ - std::chrono::steady_clock::now());
  const auto timeout =
      std::min(settings_.call_timeout, std::max(left, std::chrono::milliseconds(1000)));
  call_ = ToolCall::start(
      io_, *exits_, std::move(arguments), timeout,
      [this, alive = std::weak_ptr<char>(alive_), cycle = cycle_](const ToolRun& run) {
        // A killed call still answers, maybe after this is gone.
        if (alive.expired() || cycle != cycle_ || !done_) return;
        call_.reset();
        npu_smi_answered(run);
      });
}

void DeviceRelease::npu_smi_answered(const ToolRun& run) {
  if (chip_map_.empty()) {
    chip_map_ = run.exited_zero() ? parse_chip_map(run.out) : std::vector<ChipMapRow>{};
    if (chip_map_.empty()) return npu_smi_unusable(run.command_line() + ": " + run.describe());
    return ask_npu_smi({"info"});
  }
  const NpuSmiTable table = parse_npu_smi_info(run.out);
  if (!run.exited_zero() || table.chips.empty())
    return npu_smi_unusable(run.command_line() + ": " + run.describe());
  reported_.clear();
  for (const DeviceProcess& p : processes_on_devices(table, chip_map_, settings_.devices)) {
    const std::string device = fmt::format("{}{}", settings_.device_prefix, p.device);
    reported_.push_back(
        reported_holder(settings_.search, static_cast<pid_t>(p.pid), device, p.name));
  }
  decide();
}

void DeviceRelease::npu_smi_unusable(const std::string& why) {
  spdlog::warn("{} gave no process table: this node's devices are checked through /proc alone",
               why);
  npu_smi_failed_ = true;
  reported_.clear();
  decide();
}

void DeviceRelease::decide() {
  std::vector<DeviceHolder> holders = find_device_holders(settings_.search);
  for (const DeviceHolder& r : reported_) {
    const auto seen = [&r](const DeviceHolder& h) { return same_hold(h, r); };
    if (std::none_of(holders.begin(), holders.end(), seen)) holders.push_back(r);
  }
  std::vector<const DeviceHolder*> foreign;
  for (const DeviceHolder& h : holders) {
    if (h.ours) {
      spdlog::warn("{}: killing it before the next attempt", describe(h));
      ::kill(h.pid, SIGKILL);
    } else {
      foreign.push_back(&h);
    }
  }
  if (holders.empty()) {
    if (told_waiting_) spdlog::info("this node's devices are free");
    if (auto done = std::exchange(done_, nullptr)) done("");
    return;
  }
  if (std::chrono::steady_clock::now() >= deadline_) {
    // A foreign holder first; one of ours that SIGKILL did not end (stuck in the driver) too.
    const DeviceHolder& first = foreign.empty() ? holders.front() : *foreign.front();
    const std::string held = describe(first);
    const std::string more =
        holders.size() > 1 ? fmt::format(" (and {} more)", holders.size() - 1) : "";
    if (auto done = std::exchange(done_, nullptr)) done(held + more);
    return;
  }
  if (!foreign.empty() && !told_waiting_) {
    told_waiting_ = true;
    spdlog::warn(
        "{}, not a process of this job: waiting up to {:.0f} s for it to let go "
        "(--device-release-timeout)",
        describe(*foreign.front()), std::chrono::duration<double>(settings_.timeout).count());
  }
  const bool asks_npu_smi = !settings_.npu_smi.empty() && !npu_smi_failed_;
  timer_.expires_after(asks_npu_smi ? kNpuSmiRecheck : kRecheck);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && done_) check();
  });
}

}  // namespace npu_run
