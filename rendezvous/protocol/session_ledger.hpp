// The agent's side of its session's sequenced messages (rendezvous/protocol/messages.hpp): how many
// it sent and received, and the frames the server has not confirmed yet, which a resume on a new
// connection sends again. Pure: the client (rendezvous/client/client.cpp) feeds it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

namespace npu_run::rdzv {

class SessionLedger {
 public:
  using Frame = std::shared_ptr<const std::string>;

  // A sequenced message sent: kept until the server confirms it (at most a few per round, the
  // join and the reports).
  void sent(const Frame& frame);
  void received_one() { ++received_; }
  // The server received the first `count` sequenced messages: those are dropped. False when it
  // claims more than were sent.
  bool acknowledge(uint64_t count);
  // Why the server's resume at `count` cannot be this session's: more than were sent, or fewer
  // than the ones still kept begin after. Nothing when it can.
  std::optional<std::string> resume_refusal(uint64_t count) const;

  uint64_t sent_count() const { return sent_; }
  uint64_t received_count() const { return received_; }
  // Sent, not yet confirmed: numbers sent_count() - size() + 1 .. sent_count().
  const std::deque<Frame>& unconfirmed() const { return unacked_; }

 private:
  uint64_t sent_ = 0;
  uint64_t received_ = 0;
  std::deque<Frame> unacked_;
};

}  // namespace npu_run::rdzv
