// The server's own clock: every 250 ms it lets the state machine act on what time alone decides
// (agents silent past the heartbeat timeout, the join timeout, progress to waiting agents, due
// dumps). After this process's own pause (net/own_pause.hpp) the next tick waits until each
// live agent's next heartbeat has been read: a tick at once would declare lost every agent whose
// heartbeats wait unread in the sockets, and node 0's own agent, which could not send.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>

namespace npu_run::rdzv {

class ServerTicks {
 public:
  static constexpr std::chrono::milliseconds kInterval{250};

  ServerTicks(boost::asio::io_context& io, std::chrono::milliseconds heartbeat_interval,
              std::chrono::milliseconds heartbeat_timeout);
  ~ServerTicks();
  ServerTicks(const ServerTicks&) = delete;
  ServerTicks& operator=(const ServerTicks&) = delete;

  // `tick` runs on every tick until cancel(); never after this object is gone.
  void start(std::function<void()> tick);
  void cancel();

  // How long the first tick after a pause waits: two heartbeats, within [kInterval, timeout/2].
  static std::chrono::milliseconds grace(std::chrono::milliseconds heartbeat_interval,
                                         std::chrono::milliseconds heartbeat_timeout);

 private:
  struct Clock;
  std::shared_ptr<Clock> clock_;  // shared with the timer's handler, which holds it weakly
};

}  // namespace npu_run::rdzv
