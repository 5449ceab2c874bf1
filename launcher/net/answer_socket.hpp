// A Unix stream socket that answers: every connection gets one message, from a provider that
// may take a while (it asks the rendezvous), and is closed; nothing is read from it. Bounded:
// at most kMaxWaiting connections wait for their answers (others are closed at once), each at
// most `timeout`, after which it gets the timeout's answer. Every descriptor is close-on-exec.
// Connections are taken by net::LocalAcceptLoop. `npu_run status` on a node asks its agent
// through one (agent/records/status_service.hpp).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace boost::asio {
class io_context;
}

namespace npu_run::net {

class AnswerSocket {
 public:
  using Reply = std::function<void(std::string message)>;
  // Called once per connection; calls the Reply once, now or later (later calls are ignored).
  using Provider = std::function<void(Reply reply)>;

  // Binds and listens at `path` (throws std::runtime_error naming it and why). `on_timeout`
  // is sent to a connection whose provider did not reply within `timeout`.
  AnswerSocket(boost::asio::io_context& io, std::string path, Provider provider,
               std::chrono::milliseconds timeout, std::string on_timeout);
  ~AnswerSocket();  // closes everything and removes the socket file
  AnswerSocket(const AnswerSocket&) = delete;
  AnswerSocket& operator=(const AnswerSocket&) = delete;

  static constexpr size_t kMaxWaiting = 16;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace npu_run::net
