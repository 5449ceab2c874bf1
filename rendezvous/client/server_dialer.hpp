// Reaching the rendezvous server: resolves its name (an IP literal needs no lookup), connects
// with a timeout per attempt, and retries with exponential backoff and jitter until a deadline,
// saying now and then what it waits for. The client retries through it too when a connection
// dies before the server has welcomed it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>

namespace npu_run::rdzv {

// How hard to try. The defaults suit a start, when the server may still be coming up; a
// session resuming after a partition wants a fresh SYN every second (the kernel's own SYN
// retries back off to 1, 3, 7 s) and takes a refusal as the server's end.
struct DialPolicy {
  std::chrono::milliseconds attempt_timeout{10'000};  // per connect attempt
  std::chrono::milliseconds max_backoff{2'000};       // between attempts
  bool refusal_is_final = false;  // "connection refused": nothing listens any more; give up
};

class ServerDialer : public std::enable_shared_from_this<ServerDialer> {
 public:
  using Clock = std::chrono::steady_clock;
  struct Handlers {
    std::function<void(boost::asio::ip::tcp::socket)> connected;
    // The deadline passed: the message names the server, the last error and the likely fix.
    std::function<void(const std::string& why)> gave_up;
  };

  static std::shared_ptr<ServerDialer> create(boost::asio::io_context& io, std::string host,
                                              int port, std::chrono::milliseconds timeout,
                                              DialPolicy policy = {});

  void start(Handlers handlers);  // the first attempt, now
  // The last attempt (or a connection it made) failed for `error`: another after a backoff.
  void retry(const std::string& error);
  void cancel();  // no handler runs afterwards

  std::string endpoint() const;                 // "host:port", for messages
  std::chrono::milliseconds time_left() const;  // until the deadline, at least 1 ms
  const std::string& last_error() const { return last_error_; }
  // Connections tried so far, this one included, and when the first was (wall clock, ms since
  // the epoch): what the blame of a slow round reads of a join that waited to be let in.
  int dials() const { return attempts_ + 1; }
  int64_t started_ms() const { return started_ms_; }

 private:
  ServerDialer(boost::asio::io_context& io, std::string host, int port,
               std::chrono::milliseconds timeout, DialPolicy policy);
  void attempt();
  // One attempt: every endpoint in turn (a name may resolve to several), until one connects.
  void connect(std::vector<boost::asio::ip::tcp::endpoint> endpoints);
  void connect_to(size_t index);
  void give_up(const std::string& error);
  void log_waiting(const std::string& error, Clock::time_point now);

  boost::asio::io_context& io_;
  std::string host_;
  int port_;
  std::chrono::milliseconds timeout_;
  DialPolicy policy_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::ip::tcp::socket socket_;                    // the attempt in progress
  std::vector<boost::asio::ip::tcp::endpoint> endpoints_;  // of the attempt in progress
  boost::asio::steady_timer retry_timer_;
  boost::asio::steady_timer attempt_timer_;
  std::mt19937 rng_;
  Handlers handlers_;
  Clock::time_point deadline_;
  Clock::time_point last_waiting_log_;
  std::chrono::milliseconds backoff_;
  int attempts_ = 0;
  int64_t started_ms_ = 0;
  std::string last_error_;
  bool unresolved_ = false;  // the last attempt failed to resolve the server's name
  bool cancelled_ = false;
};

}  // namespace npu_run::rdzv
