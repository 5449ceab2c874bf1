// A watch of every key under a prefix (etcd's /v3/watch: one POST whose chunked answer stays
// open, one JSON object per event batch). Ordered and gap-free from a revision: when the stream
// breaks (its member died, a reset), it resumes on the next member from the revision after the
// last one seen, so no event is lost or repeated; while no member answers it tries again each
// second. Only etcd itself ends it (a compacted revision, a lost login): `on_end` says why, and
// the caller reads the prefix afresh. Lines are bounded; the socket is close-on-exec.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "etcd/client.hpp"
#include "etcd/requests.hpp"

namespace npu_run::etcd {

struct WatchEvent {
  bool deleted = false;  // a DELETE (also a lease's expiry); else a PUT
  KeyValue kv;           // for a DELETE, the key and its mod revision
};

struct WatchHandlers {
  std::function<void(const std::vector<WatchEvent>& events, int64_t revision)> events;
  std::function<void(const std::string& why)> end;
  std::function<void(const std::string& why)> trouble;  // a stream broke; it resumes (for logs)
};

// Pure: one line of the stream; lines without events (created, progress) give none. Throws
// std::invalid_argument naming etcd's reason for an error or a cancellation.
struct WatchLine {
  std::vector<WatchEvent> events;
  int64_t revision = 0;
};
WatchLine parse_watch_line(const std::string& line);

class Watch {
 public:
  // Starts watching `prefix` from `from_revision` (0: from now), through `client`'s members and
  // login. Handlers run on the loop, never after stop() or the Watch's end.
  Watch(boost::asio::io_context& io, const Client& client, std::string prefix,
        int64_t from_revision, WatchHandlers handlers);
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  void stop();
  int64_t last_revision() const;  // the newest revision delivered

 private:
  struct Stream;
  std::shared_ptr<Stream> stream_;
};

}  // namespace npu_run::etcd
