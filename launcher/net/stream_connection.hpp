// One TCP connection as a byte stream: a read loop that hands each chunk to its owner, and a
// queue of outgoing buffers written in order. The rendezvous (through FramedConnection, which
// decodes frames on top) and the workers' store (which decodes TCPStore requests) both use it,
// so the read loop, the bounded write queue and the close rules exist once.
//
// The outgoing queue is bounded in bytes: a peer that stops reading cannot make us buffer without
// limit. A buffer that would take the queue past its cap closes the connection (the handler hears
// why); a buffer that only says "still here" can be sent with send_unless_busy() and is dropped
// while anything else waits.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "net/tcp_timeouts.hpp"

namespace npu_run::net {

struct ConnectionLimits {
  size_t max_frame;         // largest message the peer may send
  size_t read_buffer;       // bytes per read: small keeps thousands of idle connections cheap
  size_t max_queued_bytes;  // outgoing bytes waiting for the peer; one buffer may always wait
};

// Why a connection closed by itself (never reported for the owner's close()).
struct ConnectionClosed {
  enum class Cause {
    kPeerClosed,  // end of stream
    kReadError,
    kWriteError,
    kQueueFull,  // the peer does not read what we send
    kSent,       // close_after_sending() finished
  };
  Cause cause;
  boost::system::error_code error;  // for kReadError and kWriteError
  size_t queued_bytes = 0;          // for kQueueFull

  // "closed by the peer", "Connection reset by peer", "it does not read what it is sent" ...
  std::string text() const;
};

// A dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d; they are IPv4 peers.
boost::asio::ip::address unmapped(const boost::asio::ip::address& address);

class StreamConnection : public std::enable_shared_from_this<StreamConnection> {
 public:
  struct StreamHandlers {
    // The bytes of one read. The handler may close the connection; nothing is read after that.
    std::function<void(std::string_view bytes)> received;
    // Runs once when the connection ends by itself, never after close().
    std::function<void(const ConnectionClosed&)> closed;
  };

  static std::shared_ptr<StreamConnection> create(boost::asio::ip::tcp::socket socket,
                                                  ConnectionLimits limits);
  StreamConnection(boost::asio::ip::tcp::socket socket, ConnectionLimits limits);
  StreamConnection(const StreamConnection&) = delete;
  StreamConnection& operator=(const StreamConnection&) = delete;
  virtual ~StreamConnection() = default;

  // Starts reading; sets TCP_NODELAY (requests are small and answered at once).
  void start_stream(StreamHandlers handlers);
  // Gives a started connection to a new owner (another protocol on a shared port): from the
  // next read on, its bytes and its end go to `handlers`.
  void replace_handlers(StreamHandlers handlers) { stream_handlers_ = std::move(handlers); }
  // Caps TCP's retransmission backoff and gives up after `give_up_after` (net/tcp_timeouts.hpp).
  TcpTimeouts bound_tcp_timeouts(std::chrono::milliseconds give_up_after) {
    return net::bound_tcp_timeouts(socket_.native_handle(), give_up_after);
  }

  // Queues `bytes` (shared: one broadcast is serialized once). Returns false, and closes the
  // connection with kQueueFull, when the queue holds anything and would pass its cap.
  bool send(std::shared_ptr<const std::string> bytes);
  // Queues `bytes` only when nothing is waiting: for heartbeats and their answers.
  void send_unless_busy(std::shared_ptr<const std::string> bytes);
  // Stops reading, sends what is queued, then closes and reports kSent.
  void close_after_sending();
  // Closes now, dropping what is queued; no handler runs afterwards.
  void close();

  // False once closed or closing: nothing more is read or queued.
  bool is_open() const { return !closed_ && !closing_; }
  size_t queued_bytes() const { return queued_bytes_; }
  // Bytes read so far: a connection that has said nothing yet may be a silent client of
  // another protocol.
  uint64_t bytes_received() const { return bytes_received_; }
  // When this connection was accepted (made): how long a silent one has been silent.
  std::chrono::steady_clock::time_point opened_at() const { return opened_at_; }
  // "address:port" of the peer, or "unknown peer".
  const std::string& peer() const { return peer_; }
  // The peer's address (unspecified when unknown) and ours.
  boost::asio::ip::address peer_address() const;
  std::string local_address() const;

 private:
  void read();
  void write();
  // Closes the socket once and tells the owner why (later, from the event loop, when the owner's
  // own call got here: its handler must not run inside the owner's send()).
  void finish(const ConnectionClosed& why, bool from_owner);

  ConnectionLimits limits_;
  boost::asio::ip::tcp::socket socket_;
  std::string peer_;
  std::vector<char> buffer_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  size_t queued_bytes_ = 0;
  uint64_t bytes_received_ = 0;
  const std::chrono::steady_clock::time_point opened_at_ = std::chrono::steady_clock::now();
  bool closing_ = false;  // close_after_sending(): no more reads, close when the queue empties
  bool closed_ = false;
  StreamHandlers stream_handlers_;
};

}  // namespace npu_run::net
