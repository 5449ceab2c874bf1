#include "agent/rooms/health_room.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <optional>

#include "agent/health/health_gate.hpp"
#include "rendezvous/protocol/protocol.hpp"

namespace npu_run {
namespace {

class HealthRoom final : public AgentRoom {
 public:
  HealthRoom(const RoomContext& ctx, std::function<void(const NodeVerdict&)> heard)
      : ctx_(ctx),
        gate_(ctx.io, ctx.cfg, ctx.agent.host, ctx.agent.agent_env),
        heard_(std::move(heard)) {}

  void listen(Rendezvous::Handlers& handlers, Inbox& inbox) override {
    inbox.on<rdzv::PingRequest>([this](const rdzv::PingRequest& request) { ping(request); });
    inbox.on<rdzv::PingVerdict>([this](const rdzv::PingVerdict& v) { gate_.pinged(v.findings); });
    // The gate stopped the job: nothing more to check, and this node's name goes where the
    // failed hosts are kept before the agent leaves.
    handlers.health_failed = [this,
                              leave = std::move(handlers.health_failed)](const std::string& why) {
      gate_.stop();
      gate_.job_stopped();
      if (leave) leave(why);
    };
  }

  // The checks run while the rendezvous waits for the others; their verdict follows the join
  // once the checks that can fail the node are in. The whole verdict, with the warning-only
  // checks, follows once the round formed (before it, a second verdict would count as a recheck
  // and be pinged again), for npu_run status.
  void joining() override {
    assigned_ = false;
    whole_.reset();
    gate_.check(
        [this](const NodeVerdict& verdict) {
          heard_(verdict);
          const AgentState state = ctx_.host.state();
          if (state == AgentState::kRendezvous || state == AgentState::kRunning)
            ctx_.rendezvous.send(rdzv::HealthReport{compact(verdict)});
        },
        [this](const NodeVerdict& verdict) {
          whole_ = compact(verdict);
          if (assigned_) send_whole();
        });
  }

  void assigned(const Assignment& assigned) override {
    // A gating node was assigned once its verdict passed; no recheck is due, and warning-only
    // checks still running end. (One that only warns may still be checking: its verdict is
    // still shown.)
    assigned_ = true;
    if (ctx_.cfg.health.mode == HealthMode::kGate) gate_.settle();
    if (whole_) send_whole();
    for (const std::string& note : assigned.health_notes) spdlog::warn("health gate: {}", note);
  }

  void started(Attempt& attempt) override { npu_info_file(attempt, "npu_info_before.txt"); }
  void done(GroupEnd& /*end*/, Attempt& attempt) override {
    npu_info_file(attempt, "npu_info_after.txt");
  }

  // The last npu_info file is finished first (a stop signal cuts it short).
  void finishing(std::function<void()> done) override {
    gate_.stop();
    const Attempt* attempt = ctx_.host.attempt();
    gate_.after_npu_info(std::move(done), attempt != nullptr && attempt->interrupted_by != 0);
  }

 private:
  // Before the round forms: this node's device-plane pings, answered when all have run.
  void ping(const rdzv::PingRequest& request) {
    if (ctx_.host.state() != AgentState::kRendezvous) return;
    const uint64_t run = request.run;
    gate_.ping(request.pings, [this, run](std::vector<PingResult> results) {
      if (ctx_.host.state() != AgentState::kRendezvous) return;
      // Within what the server takes from an agent (a client frame).
      using Limits = rdzv::Limits;
      if (results.size() > Limits::kMaxPings) results.resize(Limits::kMaxPings);
      for (PingResult& r : results) {
        if (r.detail.size() > Limits::kMaxPingText) r.detail.resize(Limits::kMaxPingText);
      }
      ctx_.rendezvous.send(rdzv::PingReport{run, std::move(results)});
    });
  }

  // FaultDiag's view of the devices at the attempt's start or end, under --log-dir only, in the
  // environment_check/ folder FaultDiag looks for.
  void npu_info_file(const Attempt& attempt, const char* name) {
    if (!ctx_.cfg.output.log_dir) return;
    const std::string folder = fmt::format("{}/attempt_{}/environment_check", ctx_.agent.run_dir,
                                           attempt.assignment.restart_count);
    std::error_code ignored;  // a folder that cannot be made fails the write, which warns
    std::filesystem::create_directories(folder, ignored);
    gate_.npu_info(folder + "/" + name);
  }

  void send_whole() {
    const AgentState state = ctx_.host.state();
    if (state == AgentState::kRendezvous || state == AgentState::kRunning)
      ctx_.rendezvous.send(rdzv::HealthReport{std::move(*whole_)});
    whole_.reset();
  }

  RoomContext ctx_;
  HealthGate gate_;
  std::function<void(const NodeVerdict&)> heard_;
  bool assigned_ = false;               // this round's assignment came
  std::optional<NodeVerdict> whole_{};  // the whole verdict, held until then
};

}  // namespace

std::unique_ptr<AgentRoom> health_room(const RoomContext& ctx,
                                       std::function<void(const NodeVerdict&)> heard) {
  return std::make_unique<HealthRoom>(ctx, std::move(heard));
}

}  // namespace npu_run
