#include "rendezvous/protocol/session_ledger.hpp"

#include <fmt/format.h>

namespace npu_run::rdzv {

void SessionLedger::sent(const Frame& frame) {
  ++sent_;
  unacked_.push_back(frame);
}

bool SessionLedger::acknowledge(uint64_t count) {
  if (count > sent_) return false;
  uint64_t first_kept = sent_ - unacked_.size() + 1;
  while (!unacked_.empty() && first_kept <= count) {
    unacked_.pop_front();
    ++first_kept;
  }
  return true;
}

std::optional<std::string> SessionLedger::resume_refusal(uint64_t count) const {
  const uint64_t first_kept = sent_ - unacked_.size();  // the sequence number before the first
  if (count <= sent_ && count >= first_kept) return std::nullopt;
  return fmt::format(
      "resumed the session at message {}, but this agent sent {} of which {} are "
      "confirmed",
      count, sent_, first_kept);
}

}  // namespace npu_run::rdzv
