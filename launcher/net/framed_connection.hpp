// One TCP connection that speaks frames (net/frames.hpp): a StreamConnection whose bytes go
// through a FrameDecoder, so the owner is handed whole frames. The rendezvous server's sessions
// and the agent's client both use it.
//
// On a port shared with another protocol, the first bytes decide (classify_first_bytes): a
// connection that does not start with a frame is handed, with the bytes read so far, to the
// owner's `foreign` handler, and frames are never decoded from it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/frames.hpp"
#include "net/stream_connection.hpp"

namespace npu_run::net {

class FramedConnection : public StreamConnection {
 public:
  struct Handlers {
    // The complete frames of one read, then the error that ended reading, if the peer sent an
    // oversized frame. The handler may close the connection; frames are not read after that.
    // `closed` runs once when the connection ends by itself, never after close().
    std::function<void(std::vector<std::string>& frames, const std::optional<WireError>& error)>
        frames;
    std::function<void(const ConnectionClosed&)> closed;
    // Optional: the connection speaks another protocol; `first_bytes` is everything read so
    // far. The handler owns the connection from now on (replace_handlers) or closes it.
    std::function<void(std::string first_bytes)> foreign{};
  };

  static std::shared_ptr<FramedConnection> create(boost::asio::ip::tcp::socket socket,
                                                  ConnectionLimits limits);
  FramedConnection(boost::asio::ip::tcp::socket socket, ConnectionLimits limits);

  // Starts reading; sets TCP_NODELAY (frames are small and answered at once).
  void start(Handlers handlers);
  void set_max_frame(size_t max_frame) { decoder_.set_max_frame(max_frame); }

 private:
  void on_bytes(std::string_view bytes);

  FrameDecoder decoder_;
  Handlers handlers_;
  std::string first_bytes_;  // while it is not yet known which protocol the peer speaks
};

}  // namespace npu_run::net
