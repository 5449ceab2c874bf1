#include "agent/device_release.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <csignal>

namespace npu_run {

namespace {

constexpr std::chrono::milliseconds kRecheck{100};

}  // namespace

DeviceRelease::DeviceRelease(boost::asio::io_context& io, HolderSearch search,
                             std::chrono::milliseconds timeout)
    : timer_(io), search_(std::move(search)), timeout_(timeout) {}

void DeviceRelease::start(Done done) {
  done_ = std::move(done);
  deadline_ = std::chrono::steady_clock::now() + timeout_;
  told_waiting_ = false;
  check();
}

void DeviceRelease::cancel() {
  timer_.cancel();
  done_ = nullptr;
}

void DeviceRelease::check() {
  const std::vector<DeviceHolder> holders = find_device_holders(search_);
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
        describe(*foreign.front()), std::chrono::duration<double>(timeout_).count());
  }
  timer_.expires_after(kRecheck);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && done_) check();
  });
}

}  // namespace npu_run
