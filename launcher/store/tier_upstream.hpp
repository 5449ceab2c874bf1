// The one connection a node's store proxy holds to node 0's store, in the tier generation
// (store/wire.hpp): requests go out in order and their answers come back in that order, each
// handed to the callback given with its request; tagged waits come back as wake-ups whenever
// they are satisfied. Bounded like any peer: an answer larger than the limits, or bytes that
// fit no expected answer, end the connection. Its first request is the tier's VALIDATE; the
// answer says node 0 took the connection (`accepted`), and the owner sends nothing before it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "net/stream_connection.hpp"
#include "store/wire.hpp"

namespace npu_run::store {

// What came back for one request: the answer's bytes as a torch client would get them, or the
// reason node 0's store refused it.
struct TierOutcome {
  std::string_view answer;
  std::string refused;  // non-empty: refused
};

class TierUpstream : public std::enable_shared_from_this<TierUpstream> {
 public:
  using Answer = std::function<void(const TierOutcome&)>;
  struct Handlers {
    std::function<void()> accepted;  // node 0 answered the greeting
    std::function<void(uint32_t tag)> woken;
    // Once, and nothing runs after it. Before `accepted`, node 0 applied nothing sent here.
    std::function<void(const std::string& why, bool was_accepted)> lost;
  };

  // Starts speaking the tier generation on a connected socket.
  static std::shared_ptr<TierUpstream> start(boost::asio::ip::tcp::socket socket,
                                             StoreLimits limits, Handlers handlers);
  TierUpstream(StoreLimits limits, Handlers handlers);

  // Sends `request`; `answer` (for requests that get one, tier_answers) runs when it comes.
  void send(const Request& request, Answer answer = {});
  // Closes without calling `lost`.
  void close();
  bool is_open() const { return connection_ && connection_->is_open() && !lost_; }
  // Requests sent whose answers have not come yet.
  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    Command command;
    size_t values;  // MULTI_GET: how many values its answer has
    Answer answer;
  };
  void received(std::string_view bytes);
  // Handles the message at the front of the buffer; false when it has not fully arrived.
  bool take_message(size_t& at);
  void lose(const std::string& why);

  StoreLimits limits_;
  Handlers handlers_;
  std::shared_ptr<net::StreamConnection> connection_;
  std::deque<Pending> pending_;
  std::string buffer_;
  bool lost_ = false;
  bool accepted_ = false;
};

}  // namespace npu_run::store
