// The waiting room: what the agent says while it waits for a round, the rendezvous' progress
// (who has joined, who is still missing, every 10 s at most) and, with --spares, that it stands
// by without workers until the job loses a node.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent/rooms/agent_rooms.hpp"

namespace npu_run {
namespace {

// Progress of a forming round is logged no more often than this.
constexpr std::chrono::seconds kProgressLogInterval{10};

std::string describe_progress(const rdzv::Progress& p) {
  if (!p.missing_node_ranks.empty()) {
    return fmt::format("joined {}/{}, waiting for node ranks {}", p.joined, p.expected,
                       fmt::join(p.missing_node_ranks, ", "));
  }
  const int missing = p.expected - p.joined;
  if (missing <= 0) {
    return fmt::format(
        "joined {}/{}; the round forms once their checks are in (the health gate, "
        "the pings, the pre-flight probe)",
        p.joined, p.expected);
  }
  return fmt::format("joined {}/{}, waiting for {} more node{}", p.joined, p.expected, missing,
                     missing == 1 ? "" : "s");
}

class WaitingRoom final : public AgentRoom {
 public:
  explicit WaitingRoom(const RoomContext& ctx) : ctx_(ctx) {}

  void listen(Rendezvous::Handlers& /*handlers*/, Inbox& inbox) override {
    inbox.on<rdzv::Progress>([this](const rdzv::Progress& p) { progress(p); });
    inbox.on<rdzv::Standby>([this](const rdzv::Standby& s) { standby(s); });
  }

 private:
  void progress(const rdzv::Progress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_progress_log_ < kProgressLogInterval) return;
    last_progress_log_ = now;
    spdlog::info("rendezvous at {}: {}", ctx_.rendezvous.describe(), describe_progress(p));
  }

  // --spares: no seat in this round; this agent waits to take a lost node's.
  void standby(const rdzv::Standby& s) const {
    if (ctx_.host.state() != AgentState::kRendezvous) return;
    spdlog::info(
        "standing by as a spare of round {} ({} node{} run, {} spare{} wait): no workers here "
        "until the job loses a node, whose seat this agent then takes",
        s.round, s.nodes, s.nodes == 1 ? "" : "s", s.spares, s.spares == 1 ? "" : "s");
  }

  RoomContext ctx_;
  std::chrono::steady_clock::time_point last_progress_log_{};
};

}  // namespace

std::unique_ptr<AgentRoom> waiting_room(const RoomContext& ctx) {
  return std::make_unique<WaitingRoom>(ctx);
}

}  // namespace npu_run
