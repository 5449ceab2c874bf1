// A Unix stream socket that converses: each connection sends request lines and gets one answer
// line for each, from a handler on the loop (at once, or later through reply() when the answer
// waits on something, such as a copy still being fetched), until it closes; the handler hears the
// close too, so that what a connection began can be undone when its process dies in the middle (a
// worker's snapshot, agent/rooms/snapshot_room.cpp). Bounded: at most `max_connections` at a time
// (more are closed at once) and lines of at most `max_line` bytes (a longer one closes its
// connection). Every descriptor is close-on-exec; connections are taken by net::LocalAcceptLoop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace boost::asio {
class io_context;
}

namespace npu_run::net {

class LineSocket {
 public:
  // The answer to one line of connection `id` (without its newline; one is added); nullopt: it
  // comes later, through reply(), and the connection reads nothing more until then.
  using Answer = std::function<std::optional<std::string>(uint64_t id, const std::string& line)>;
  // Connection `id` is gone (closed by its peer, cut for a bad line, or by the destructor).
  using Closed = std::function<void(uint64_t id)>;

  // Binds and listens at `path` (throws std::runtime_error naming it and why).
  LineSocket(boost::asio::io_context& io, std::string path, Answer answer, Closed closed,
             size_t max_connections, size_t max_line);
  ~LineSocket();  // closes every connection (without calling `closed`) and removes the file
  LineSocket(const LineSocket&) = delete;
  LineSocket& operator=(const LineSocket&) = delete;

  size_t connections() const;
  // The answer held back for connection `id`; nothing if it is gone.
  void reply(uint64_t id, const std::string& line);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace npu_run::net
