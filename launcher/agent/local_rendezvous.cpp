#include "agent/local_rendezvous.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "agent/assignment.hpp"
#include "agent/rendezvous_settings.hpp"

namespace npu_run {

// The one client of an in-process rendezvous.
constexpr rdzv::ClientId kSelf = 1;

namespace {

// In-process, this agent is its own server: there is nobody to authenticate.
rdzv::JobSettings untokened(rdzv::JobSettings s) {
  s.token.clear();
  return s;
}

}  // namespace

LocalRendezvous::LocalRendezvous(boost::asio::io_context& io, const LaunchConfig& cfg,
                                 std::string host, const std::vector<PortRange>& avoid)
    : io_(io),
      cfg_(cfg),
      host_(std::move(host)),
      worker_port_(io, avoid),
      state_(untokened(job_settings(cfg)), rdzv::now()) {}

void LocalRendezvous::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  deliver(state_.on_message(
      kSelf, rdzv::Hello{rdzv::kMagic, rdzv::kProtocolVersion, cfg_.rendezvous.run_id, ""},
      rdzv::now()));
}

void LocalRendezvous::join() {
  rdzv::Join join =
      join_message(cfg_, this_node(cfg_, host_, cfg_.rendezvous.master_addr, worker_port_.port()));
  join.node_rank.reset();  // the only node: rank 0 whatever it was told
  deliver(state_.on_message(kSelf, join, rdzv::now()));
}

void LocalRendezvous::report(const rdzv::Report& report) {
  deliver(state_.on_message(kSelf, report, rdzv::now()));
}

void LocalRendezvous::deliver(std::vector<rdzv::Outgoing> outgoing) {
  for (rdzv::Outgoing& o : outgoing) {
    // Posted, never called inline, so the agent sees the same ordering as with a remote server.
    boost::asio::post(io_, [this, message = std::move(o.message)] {
      if (closed_) return;
      deliver_to_agent(handlers_, message, host_);
    });
  }
}

}  // namespace npu_run
