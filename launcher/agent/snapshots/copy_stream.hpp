// One TCP connection between two agents for snapshot copies
// (agent/snapshots/snapshot_copy_server.hpp, agent/snapshots/snapshot_copy_client.hpp): JSON lines
// for what is asked and answered, raw bytes for a snapshot between them, and the proof at the start
// that both ends know the job's copy key (the rendezvous' HMAC challenge,
// rendezvous/protocol/auth.hpp, with its own labels' key).
//
// Bounded and never stuck: a line is at most 4 KiB; bytes move 1 MiB at a time between the
// socket and a file (never more in memory); an operation that makes no progress for `stall`
// closes the connection, so a peer that stops reading or sending loses it. Each operation calls
// its handler once, with "" or why it failed; the stream outlives its pending operations (they
// hold it), and close() makes them fail at once.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace npu_run {

// How long a copy connection may make no progress before it is cut.
inline constexpr std::chrono::milliseconds kCopyStall{30'000};

class CopyStream : public std::enable_shared_from_this<CopyStream> {
 public:
  using json = nlohmann::json;
  using Done = std::function<void(const std::string& error)>;
  using Received = std::function<void(const std::string& error, const json& message)>;

  CopyStream(boost::asio::ip::tcp::socket socket, std::chrono::milliseconds stall);

  // Resolves and connects to addr:port (close-on-exec); `done` gets the stream or why not.
  static void connect(
      boost::asio::io_context& io, const std::string& addr, int port,
      std::chrono::milliseconds stall,
      std::function<void(const std::string& error, std::shared_ptr<CopyStream>)> done);

  void send(const json& message, Done done);
  void receive(Received done);                           // one JSON object line
  void receive_into(int fd, uint64_t bytes, Done done);  // raw bytes written to fd
  void send_from(int fd, uint64_t bytes, Done done);     // raw bytes read from fd, offset 0
  void close();
  std::string peer() const { return peer_; }

  // The two ends of the proof: the connecting agent offers, the listening one demands.
  void offer_proof(const std::string& key, const std::string& run_id, const Done& done);
  void demand_proof(const std::string& key, const std::string& run_id, const Done& done);

 private:
  void arm(const char* what);
  void disarm();
  void fail(const Done& done, const std::string& what, const boost::system::error_code& ec);
  void pump_in(int fd, uint64_t left, Done done);
  void pump_out(int fd, uint64_t offset, uint64_t left, Done done);

  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer deadline_;
  std::chrono::milliseconds stall_;
  boost::asio::streambuf input_;
  std::vector<char> chunk_;
  std::string output_;
  std::string peer_;
  std::string stalled_;  // what the deadline cut, for the handler's error
};

// Whether a peer's answer says {"ok": true}; anything else, of any type, is not (a peer's JSON is
// never trusted to hold the types asked for).
bool copy_ok(const nlohmann::json& answer);
// A peer's text field, or "" when it is missing or not text.
std::string copy_text(const nlohmann::json& message, const char* key);

// The key both ends prove they know: from the job's rendezvous token (HMAC-SHA256 with a label of
// its own, so that a copy proof is never a rendezvous proof); without a token, only the run id
// binds, as it does for the rendezvous itself.
std::string copy_key(const std::string& token);

}  // namespace npu_run
