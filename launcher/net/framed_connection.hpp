// One TCP connection that speaks frames (net/frames.hpp): it reads into a FrameDecoder and hands
// over whole frames, and writes a queue of frames in order. The rendezvous server's sessions and
// the agent's client both use it, so the read loop and the write queue exist once.
//
// The outgoing queue is bounded in bytes: a peer that stops reading cannot make us buffer without
// limit. A frame that would take the queue past its cap closes the connection (the handler hears
// why); a frame that only says "still here" can be sent with send_unless_busy() and is dropped
// while anything else waits.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/frames.hpp"
#include "net/tcp_timeouts.hpp"

namespace npu_run::net {

struct ConnectionLimits {
  size_t max_frame;         // largest payload the peer may send
  size_t read_buffer;       // bytes per read: small keeps thousands of idle connections cheap
  size_t max_queued_bytes;  // outgoing bytes waiting for the peer; one frame may always wait
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

class FramedConnection : public std::enable_shared_from_this<FramedConnection> {
 public:
  struct Handlers {
    // The complete frames of one read, then the error that ended reading, if the peer sent an
    // oversized frame. The handler may close the connection; frames are not read after that.
    // `closed` runs once when the connection ends by itself, never after close().
    std::function<void(std::vector<std::string>& frames, const std::optional<WireError>& error)>
        frames;
    std::function<void(const ConnectionClosed&)> closed;
  };

  static std::shared_ptr<FramedConnection> create(boost::asio::ip::tcp::socket socket,
                                                  ConnectionLimits limits);
  FramedConnection(boost::asio::ip::tcp::socket socket, ConnectionLimits limits);
  FramedConnection(const FramedConnection&) = delete;
  FramedConnection& operator=(const FramedConnection&) = delete;

  // Starts reading; sets TCP_NODELAY (frames are small and answered at once).
  void start(Handlers handlers);
  void set_max_frame(size_t max_frame) { decoder_.set_max_frame(max_frame); }
  // Caps TCP's retransmission backoff and gives up after `give_up_after` (net/tcp_timeouts.hpp).
  TcpTimeouts bound_tcp_timeouts(std::chrono::milliseconds give_up_after) {
    return net::bound_tcp_timeouts(socket_.native_handle(), give_up_after);
  }

  // Queues `frame` (shared: one broadcast is serialized once). Returns false, and closes the
  // connection with kQueueFull, when the queue holds anything and would pass its cap.
  bool send(std::shared_ptr<const std::string> frame);
  // Queues `frame` only when nothing is waiting: for heartbeats and their answers.
  void send_unless_busy(std::shared_ptr<const std::string> frame);
  // Stops reading, sends what is queued, then closes and reports kSent.
  void close_after_sending();
  // Closes now, dropping what is queued; no handler runs afterwards.
  void close();

  // False once closed or closing: nothing more is read or queued.
  bool is_open() const { return !closed_ && !closing_; }
  size_t queued_bytes() const { return queued_bytes_; }
  // "address:port" of the peer, or "unknown peer".
  const std::string& peer() const { return peer_; }
  std::string local_address() const;

 private:
  void read();
  void write();
  // Closes the socket once and tells the owner why (later, from the event loop, when the owner's
  // own call got here: its handler must not run inside the owner's send()).
  void finish(const ConnectionClosed& why, bool from_owner);

  boost::asio::ip::tcp::socket socket_;
  ConnectionLimits limits_;
  std::string peer_;
  std::vector<char> buffer_;
  FrameDecoder decoder_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  size_t queued_bytes_ = 0;
  bool closing_ = false;  // close_after_sending(): no more reads, close when the queue empties
  bool closed_ = false;
  Handlers handlers_;
};

}  // namespace npu_run::net
