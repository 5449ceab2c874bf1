#include "rendezvous/server/server_ticks.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>

#include "net/own_pause.hpp"

namespace npu_run::rdzv {

using std::chrono::milliseconds;

struct ServerTicks::Clock : std::enable_shared_from_this<Clock> {
  Clock(boost::asio::io_context& io, milliseconds interval, milliseconds timeout)
      : timer(io), heartbeat_interval(interval), heartbeat_timeout(timeout) {}

  void schedule(milliseconds in) {
    timer.expires_after(in);
    timer.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      const auto self = weak.lock();
      if (ec || !self || !self->tick) return;
      if (net::fired_after_own_pause(self->timer) && !self->grace_given) {
        self->hear_before_judging();
        return;
      }
      self->grace_given = false;
      // A copy runs: the tick may stop the server, whose cancel() clears `tick` mid-call.
      const std::function<void()> running = self->tick;
      running();
      if (self->tick) self->schedule(kInterval);
    });
  }

  void hear_before_judging() {
    const std::chrono::duration<double> paused = net::lateness(timer);
    const milliseconds wait = grace(heartbeat_interval, heartbeat_timeout);
    spdlog::log(paused > heartbeat_timeout / 4 ? spdlog::level::warn : spdlog::level::debug,
                "rendezvous server: this process was stalled for at least {:.1f} s (stopped, "
                "starved of a core, or its machine paused); the agents are heard for {:.2f} s "
                "before their silence is judged",
                paused.count(), std::chrono::duration<double>(wait).count());
    grace_given = true;
    schedule(wait);
  }

  boost::asio::steady_timer timer;
  const milliseconds heartbeat_interval;
  const milliseconds heartbeat_timeout;
  std::function<void()> tick;
  bool grace_given = false;  // after a pause: the next tick acts, however late it comes
};

ServerTicks::ServerTicks(boost::asio::io_context& io, milliseconds heartbeat_interval,
                         milliseconds heartbeat_timeout)
    : clock_(std::make_shared<Clock>(io, heartbeat_interval, heartbeat_timeout)) {}

ServerTicks::~ServerTicks() {
  cancel();
}

void ServerTicks::start(std::function<void()> tick) {
  clock_->tick = std::move(tick);
  clock_->schedule(kInterval);
}

void ServerTicks::cancel() {
  clock_->tick = nullptr;
  clock_->timer.cancel();
}

milliseconds ServerTicks::grace(milliseconds heartbeat_interval, milliseconds heartbeat_timeout) {
  return std::clamp(2 * heartbeat_interval, kInterval, std::max(kInterval, heartbeat_timeout / 2));
}

}  // namespace npu_run::rdzv
