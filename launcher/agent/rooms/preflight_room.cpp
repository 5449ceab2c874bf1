// The pre-flight probe's room (--preflight): when the rendezvous asks this node for its part of
// a probe step (rdzv::ProbeRequest, before a round forms), it runs python/npu_run_preflight.py
// with the workers' python and environment, bounded by the request's timeout, and sends what it
// measured (agent/core/preflight_answer.hpp). The rendezvous judges every node's figures
// (rendezvous/state/state_probe.cpp).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include "agent/core/preflight_answer.hpp"
#include "agent/health/tool_call.hpp"
#include "agent/plan/worker_env.hpp"
#include "agent/plan/worker_plan.hpp"
#include "agent/rooms/agent_rooms.hpp"
#include "agent/rooms/preflight_source.hpp"
#include "workers/child_exits.hpp"

namespace npu_run {
namespace {

class PreflightRoom final : public AgentRoom {
 public:
  explicit PreflightRoom(const RoomContext& ctx) : ctx_(ctx) {}
  ~PreflightRoom() override {
    if (call_) call_->cancel();
  }
  PreflightRoom(const PreflightRoom&) = delete;
  PreflightRoom& operator=(const PreflightRoom&) = delete;

  // Always: node 0's --preflight decides for the job, and a node launched without it answers
  // that it cannot probe, rather than leave the round waiting.
  void listen(Rendezvous::Handlers& /*handlers*/, Inbox& inbox) override {
    inbox.on<rdzv::ProbeRequest>([this](const rdzv::ProbeRequest& request) { run(request); });
  }

  // What the probe before this round found: every node logs it.
  void assigned(const Assignment& assignment) override {
    for (const std::string& note : assignment.probe_notes) {
      if (note.rfind("pre-flight probe (", 0) == 0) {
        spdlog::info("{}", note);
      } else {
        spdlog::warn("{}", note);
      }
    }
  }

  // A probe still running ends with the agent: nothing it started outlives it.
  void finishing(std::function<void()> done) override {
    if (call_) call_->cancel();
    done();
  }

 private:
  void run(const rdzv::ProbeRequest& request) {
    if (ctx_.host.state() != AgentState::kRendezvous) return;
    if (ctx_.cfg.health.preflight == PreflightMode::kOff) {
      ctx_.rendezvous.send(rdzv::ProbeReport{
          request.run, 0, 0, true,
          "this node runs with --preflight off while node 0 asked for a probe; give every node "
          "the same --preflight"});
      return;
    }
    if (call_) call_->cancel();  // an older step's, which the rendezvous no longer waits for
    if (!exits_) exits_ = std::make_unique<ChildExits>(ctx_.io);
    nlohmann::json spec{{"step", request.step},
                        {"group", request.group},
                        {"rank", request.rank},
                        {"size", request.size},
                        {"store_addr", request.store_addr},
                        {"store_port", request.store_port},
                        {"matmul", request.matmul},
                        {"full", request.full},
                        {"timeout_ms", request.timeout_ms},
                        {"host_store", ctx_.cfg.rendezvous.worker_store == WorkerStore::kTorch}};
    // Every asked node times together once all have imported torch: in the job's store all of
    // them meet; in torch's own store (--worker-store torch) only the group's nodes.
    const bool shared = ctx_.cfg.rendezvous.worker_store != WorkerStore::kTorch;
    const std::string step_key = request.group.substr(0, request.group.rfind('.'));
    spec["sync_key"] = shared ? "npu_run_preflight/" + step_key + "/ready"
                              : "npu_run_preflight/" + request.group + "/ready";
    spec["sync_nodes"] = shared ? request.asked : request.size;
    std::vector<std::string> argv{ctx_.cfg.health.preflight_python, "-c", kPreflightProbe,
                                  spec.dump()};
    // A call this one replaced still reports (cancelled): only the latest is answered.
    const uint64_t mine = ++calls_;
    call_ = ToolCall::start(
        ctx_.io, *exits_, std::move(argv), to_envp(probe_env()),
        std::chrono::milliseconds(request.timeout_ms),
        [this, alive = std::weak_ptr<bool>(alive_), request, mine](const ToolRun& run) {
          if (!alive.expired() && calls_ == mine) answered(request, run);
        });
  }

  // The workers' environment (no token, the interface peers reach this node on), no ranks.
  EnvMap probe_env() const {
    EnvMap contract;
    const std::string ifname = socket_interface_of(ctx_.rendezvous.local_address());
    for (const char* name : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME"}) {
      if (!ifname.empty() && !ctx_.agent.agent_env.contains(name)) contract[name] = ifname;
    }
    return merged_worker_env(ctx_.cfg, ctx_.agent.agent_env, contract);
  }

  void answered(const rdzv::ProbeRequest& request, const ToolRun& run) {
    call_.reset();
    // Not kept between steps (before Linux 5.3 its SIGCHLD wait would keep the loop running);
    // dropped once the handler that reported this exit has returned.
    boost::asio::post(ctx_.io, [exits = std::move(exits_)] {});
    rdzv::ProbeReport report = read_probe_answer(run);
    report.run = request.run;
    if (report.failed) {
      spdlog::warn("pre-flight probe, step {}: this node's probe failed: {}", request.step,
                   report.detail);
    } else {
      spdlog::info("pre-flight probe, step {}: {}all_gather with {} other node(s) {:.3f} s ({})",
                   request.step,
                   request.matmul ? fmt::format("matmul {:.3f} s, ",
                                                static_cast<double>(report.matmul_us) / 1e6)
                                  : "",
                   request.size - 1, static_cast<double>(report.gather_us) / 1e6, report.detail);
    }
    if (ctx_.host.state() == AgentState::kRendezvous) ctx_.rendezvous.send(report);
  }

  RoomContext ctx_;
  std::unique_ptr<ChildExits> exits_;
  std::shared_ptr<ToolCall> call_;
  uint64_t calls_ = 0;  // probes started: the latest is the one answered
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace

std::unique_ptr<AgentRoom> preflight_room(const RoomContext& ctx) {
  return std::make_unique<PreflightRoom>(ctx);
}

}  // namespace npu_run
