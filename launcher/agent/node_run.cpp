#include "agent/node_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "basics/descriptors.hpp"
#include "basics/usage_error.hpp"

namespace npu_run {

namespace {

// What still runs; the loop stops once nothing does.
class NodeRun {
 public:
  NodeRun(boost::asio::io_context& io, rdzv::RendezvousServer* server, const LaunchConfig& cfg)
      : io_(io), server_(server), cfg_(cfg), server_grace_(io) {}

  void attach(const LaunchHooks& hooks, LocalAgent& agent) {
    if (!hooks.attach) return;
    attached_running_ = true;
    attached_ = hooks.attach(
        io_, [&agent](int sig, const std::string& why) { agent.stop(sig, why); },
        [this] {
          attached_running_ = false;
          stop_when_all_done();
        });
  }

  // A server that started later (an etcd rendezvous' leader) is run as node 0's is.
  void adopt(rdzv::RendezvousServer& server) {
    server_ = &server;
    start_server();
  }

  void start_server() {
    if (server_ == nullptr) return;
    server_running_ = true;
    server_->start([this](const rdzv::Decision&) {
      server_running_ = false;
      stop_when_all_done();
    });
  }

  void agent_done(int code, Rendezvous& rendezvous) {
    exit_code_ = code;
    agent_running_ = false;
    if (server_running_ && !server_->job_finished()) outlive_agent();
    rendezvous.when_closed([this] {
      rendezvous_closing_ = false;
      stop_when_all_done();
    });
  }

  int run() {
    io_.run();
    attached_.reset();  // before the loop it uses goes
    return exit_code_;
  }

 private:
  // This node has reported; while a round is in progress the others still have to stop and
  // hear the decision. Without one there is nothing to finish for anyone.
  void outlive_agent() {
    if (!server_->round_in_progress()) {
      server_->stop();
      return;
    }
    server_grace_.expires_after(cfg_.supervision.term_timeout +
                                cfg_.rendezvous.timing.exit_barrier_timeout);
    server_grace_.async_wait([this](boost::system::error_code ec) {
      if (!ec) server_->stop();
    });
  }

  void stop_when_all_done() {
    if (!agent_running_ && !server_running_ && !attached_running_ && !rendezvous_closing_)
      io_.stop();
  }

  boost::asio::io_context& io_;
  rdzv::RendezvousServer* server_;
  const LaunchConfig& cfg_;
  boost::asio::steady_timer server_grace_;
  std::shared_ptr<void> attached_;
  bool agent_running_ = true;
  bool server_running_ = false;
  bool attached_running_ = false;
  bool rendezvous_closing_ = true;  // until the rendezvous says it has closed
  int exit_code_ = 1;
};

}  // namespace

void require_open_files(int nproc) {
  const auto needed = 64 + 16 * static_cast<unsigned long>(nproc);
  if (const unsigned long limit = ensure_open_files(needed); limit != 0) {
    throw UsageError(fmt::format(
        "the open-files limit (ulimit -n) is {}, but an agent with {} worker{} needs at least {} "
        "(EMFILE otherwise); raise it: ulimit -n {} in the shell, LimitNOFILE= in a systemd "
        "unit, nofile in /etc/security/limits.conf",
        limit, nproc, nproc == 1 ? "" : "s", needed, std::max<unsigned long>(needed, 1024)));
  }
}

int run_node(boost::asio::io_context& io, LocalAgent& agent, rdzv::RendezvousServer* server,
             Rendezvous& rendezvous, const LaunchConfig& cfg, const LaunchHooks& hooks) {
  NodeRun run(io, server, cfg);
  run.attach(hooks, agent);
  run.start_server();
  rendezvous.on_hosting([&run](rdzv::RendezvousServer& hosted) { run.adopt(hosted); });
  agent.start([&run, &rendezvous](int code) { run.agent_done(code, rendezvous); });
  return run.run();
}

}  // namespace npu_run
