#include "agent/core/stop_requests.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>

#include "basics/exit_status.hpp"

namespace npu_run {

StopRequests::StopRequests(boost::asio::io_context& io, const SupervisionConfig& cfg,
                           Handlers handlers)
    : cfg_(cfg), handlers_(std::move(handlers)), signals_(io), parent_watch_(io) {
  for (int sig : handled_signals()) signals_.add(sig);
}

void StopRequests::start() {
  wait_for_signal();
  if (cfg_.stop_with_parent) watch_parent();
}

void StopRequests::cancel() {
  boost::system::error_code ignored;
  signals_.cancel(ignored);
  parent_watch_.cancel();
}

void StopRequests::on_signal(int sig) {
  const auto& stops = cfg_.stop_signals;
  if (std::find(stops.begin(), stops.end(), sig) != stops.end()) {
    handlers_.stop(sig, "received " + signal_name(sig));
    return;
  }
  RoundWorkers* workers = handlers_.running();
  const size_t groups = workers != nullptr ? workers->running_pids().size() : 0;
  spdlog::info("received {}: forwarded to {} worker process group{}", signal_name(sig), groups,
               groups == 1 ? "" : "s");
  if (workers != nullptr) workers->forward_signal(sig);
}

// The stop signals, plus SIGUSR1/SIGUSR2 to forward unless they are stop signals.
std::vector<int> StopRequests::handled_signals() const {
  std::vector<int> all = cfg_.stop_signals;
  for (int sig : {SIGUSR1, SIGUSR2}) {
    if (std::find(all.begin(), all.end(), sig) == all.end()) all.push_back(sig);
  }
  return all;
}

void StopRequests::wait_for_signal() {
  signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;  // cancelled at the end of the job
    on_signal(sig);
    wait_for_signal();
  });
}

void StopRequests::watch_parent() {
  parent_watch_.start([this] {
    handlers_.stop(SIGTERM,
                   fmt::format("{} (pid {}), which started npu_run, exited without stopping it",
                               parent_watch_.parent_name(), parent_watch_.parent()));
  });
  spdlog::debug("watching the parent {} (pid {}) through {}", parent_watch_.parent_name(),
                parent_watch_.parent(), to_string(parent_watch_.mechanism()));
}

}  // namespace npu_run
