// `--metrics-port`: a small HTTP responder on the agent's own event loop that answers GET
// /metrics with what `render` writes (Prometheus' text format, agent/link/metrics_text.hpp). Boost.
// Beast parses and writes; every connection is bounded, so a slow or hostile client costs one
// connection slot for a few seconds, never the job: a request larger than kMaxRequest bytes, a
// method other than GET or HEAD, or a client slower than the deadline loses its connection, and
// beyond kMaxConnections at once the oldest is closed for the newcomer. Nothing here blocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace boost::asio {
class io_context;
}

namespace npu_run {

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  static constexpr size_t kMaxConnections = 16;
  static constexpr size_t kMaxRequest = size_t{8} * 1024;
  static constexpr std::chrono::milliseconds kDeadline{5'000};  // to send a request and read

  // Listens on addr:port now (close-on-exec); throws UsageError naming the address and the fix
  // when it cannot.
  MetricsServer(boost::asio::io_context& io, const std::string& addr, int port, Render render);
  ~MetricsServer();  // closes the listener and every connection
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const;
  uint64_t requests() const;  // answered so far, any status

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace npu_run
