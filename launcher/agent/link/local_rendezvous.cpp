// The rendezvous of a single-node job: RendezvousState in-process, no server and no socket. The
// restart and exit decisions are thus made by the same code as in a multi-node job. It holds
// the workers' MASTER_PORT so that restarts reuse a port nobody else can take.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/link/assignment.hpp"
#include "agent/link/rendezvous.hpp"
#include "agent/link/rendezvous_settings.hpp"
#include "agent/link/service_metrics.hpp"
#include "basics/usage_error.hpp"
#include "net/address_probe.hpp"
#include "net/cloexec_socket.hpp"
#include "net/held_port.hpp"
#include "rendezvous/state/state.hpp"
#include "store/store_server.hpp"

namespace npu_run {

class LocalRendezvous : public Rendezvous {
 public:
  // `avoid`: ports the workers' MASTER_PORT must not be (HCCL's, the rendezvous port).
  LocalRendezvous(boost::asio::io_context& io, const LaunchConfig& cfg, std::string host,
                  const std::vector<PortRange>& avoid);
  void start(Handlers handlers) override;
  void join() override;
  void report(const rdzv::Report& report) override;
  void send(const rdzv::RoomMessage& message) override;
  void query_status(StatusAsk ask, std::function<void(StatusAnswer)> done) override;
  void close() override { closed_ = true; }
  void add_metrics(MetricsText& out) const override {
    write_rendezvous_metrics(out, state_, 1);
    if (store_) write_store_metrics(out, *store_);
  }
  void on_job_ended(std::function<void(const rdzv::RendezvousState&)> ended) override {
    job_ended_ = std::move(ended);
  }
  std::string describe() const override { return "in-process"; }

 private:
  void deliver(std::vector<rdzv::Outgoing> outgoing);

  boost::asio::io_context& io_;
  const LaunchConfig& cfg_;
  std::string host_;
  net::HeldPort worker_port_;
  // --worker-store agent: the workers' store, served to this host on --master-port when the
  // user chose one (tcp://ADDR:PORT in scripts), else on the held port.
  std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> store_ports_;
  std::unique_ptr<store::StoreServer> store_;
  int store_port() const;
  rdzv::RendezvousState state_;
  Handlers handlers_;
  bool closed_ = false;
  std::function<void(const rdzv::RendezvousState&)> job_ended_;
  bool ended_ = false;
  // Dumps asked for (`npu_run status --dump`), by query id: this node's own records answer
  // them, within the collection's deadline.
  std::map<uint64_t, std::function<void(StatusAnswer)>> dumps_waiting_;
  uint64_t next_dump_ = 1;
  boost::asio::steady_timer dump_deadline_;   // answers a dump whose records never came
  static constexpr rdzv::ClientId kSelf = 1;  // the one client of an in-process rendezvous
};

namespace {

// The single node's store on the port the user chose, at every address MASTER_ADDR has here
// ("localhost" is 127.0.0.1 and ::1, and a client may try either first).
std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> bind_store_port(
    boost::asio::io_context& io, const std::string& addr, int port) {
  const net::ResolvedEndpoints resolved = net::resolve_endpoints(addr, port);
  std::string error = resolved.error;
  std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> bound;
  for (const auto& endpoint : resolved.endpoints) {
    auto acceptor = std::make_unique<boost::asio::ip::tcp::acceptor>(io);
    boost::system::error_code ec;
    net::open_cloexec(*acceptor, endpoint.protocol(), ec);
    if (!ec) acceptor->set_option(boost::asio::ip::tcp::acceptor::reuse_address(true), ec);
    if (!ec && endpoint.protocol() == boost::asio::ip::tcp::v6())
      acceptor->set_option(boost::asio::ip::v6_only(true), ec);
    if (!ec) acceptor->bind(endpoint, ec);
    if (!ec) {
      bound.push_back(std::move(acceptor));
      continue;
    }
    if (ec.value() == EADDRNOTAVAIL) continue;  // no such address here
    error = ec == boost::asio::error::address_in_use
                ? "the port is in use (another job on this host?)"
                : ec.message();
    bound.clear();
    break;
  }
  if (!bound.empty()) return bound;
  throw UsageError(fmt::format(
      "cannot serve the workers' store on --master-port {} at {}: {}; choose another port, or "
      "drop --master-port and a free one is used",
      port, addr, error));
}

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
      state_(untokened(job_settings(cfg)), rdzv::now()),
      dump_deadline_(io) {
  // A single node has no tier: tiered serves as agent does.
  if (!npu_run_serves_store(cfg.rendezvous.worker_store)) return;
  store_ = std::make_unique<store::StoreServer>(io);
  if (cfg.rendezvous.master_port_chosen && cfg.rendezvous.master_port != 0) {
    store_ports_ = bind_store_port(io, cfg.rendezvous.master_addr, cfg.rendezvous.master_port);
    for (auto& acceptor : store_ports_) store_->listen_for_local_clients(*acceptor);
  } else {
    store_->listen_for_local_clients(worker_port_.acceptor());
  }
}

int LocalRendezvous::store_port() const {
  boost::system::error_code ec;
  return store_ports_.empty() ? worker_port_.port()
                              : store_ports_.front()->local_endpoint(ec).port();
}

void LocalRendezvous::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  deliver(state_.on_message(
      kSelf, rdzv::Hello{rdzv::kMagic, rdzv::kProtocolVersion, cfg_.rendezvous.run_id, ""},
      rdzv::now()));
}

void LocalRendezvous::join() {
  if (store_) store_->clear();  // a restart's workers start from a fresh key space
  rdzv::Join join =
      join_message(cfg_, this_node(cfg_, host_, cfg_.rendezvous.master_addr, store_port()));
  join.node_rank.reset();  // the only node: rank 0 whatever it was told
  if (handlers_.snapshots) join.snapshots = handlers_.snapshots();
  deliver(state_.on_message(kSelf, join, rdzv::now()));
}

void LocalRendezvous::report(const rdzv::Report& report) {
  deliver(state_.on_message(kSelf, report, rdzv::now()));
}

// Every room's message goes to the state as a server's would, but a hang's notice: the only
// node has nobody to tell, and its report follows. (Pings and the probe are never asked of one
// node: a ring and a group need two.)
void LocalRendezvous::send(const rdzv::RoomMessage& message) {
  if (std::holds_alternative<rdzv::HangNotice>(message)) return;
  std::visit([this](const auto& m) { deliver(state_.on_message(kSelf, m, rdzv::now())); }, message);
}

void LocalRendezvous::deliver(std::vector<rdzv::Outgoing> outgoing) {
  // As node 0's server does: the blame of a round formed, and the job's records at its end.
  if (auto blame = state_.take_new_blame()) {
    // One node has nobody to wait for: said only when its health gate took the time.
    spdlog::log(
        blame->cause == rdzv::BlameCause::kNone ? spdlog::level::debug : spdlog::level::info, "{}",
        blame->sentence);
  }
  if (auto straggler = state_.take_new_straggler())
    spdlog::warn("{}", rdzv::announcement(*straggler, state_.settings().straggler.mode));
  if (state_.phase() == rdzv::RendezvousState::Phase::kFinished && !ended_) {
    ended_ = true;
    if (job_ended_) job_ended_(state_);
  }
  for (rdzv::Outgoing& o : outgoing) {
    if (auto* status = std::get_if<rdzv::JobStatus>(&o.message)) {
      const auto it = dumps_waiting_.find(status->query_id);
      if (it == dumps_waiting_.end()) continue;
      boost::asio::post(
          io_, [done = std::move(it->second), answer = std::move(*status)] { done(answer); });
      dumps_waiting_.erase(it);
      continue;
    }
    // Posted, never called inline, so the agent sees the same ordering as with a remote server.
    boost::asio::post(io_, [this, message = std::move(o.message)] {
      if (closed_) return;
      deliver_to_agent(handlers_, message, host_);
    });
  }
}

void LocalRendezvous::query_status(StatusAsk ask, std::function<void(StatusAnswer)> done) {
  if (ask == StatusAsk::kStatus) {
    boost::asio::post(io_, [this, done = std::move(done)] { done(state_.status(rdzv::now())); });
    return;
  }
  const uint64_t id = next_dump_++;
  dumps_waiting_.emplace(id, std::move(done));
  deliver(state_.on_message(kSelf, rdzv::StatusQuery{id, true}, rdzv::now()));
  dump_deadline_.expires_after(rdzv::LiveDumps::kDeadline + std::chrono::milliseconds(100));
  // Cancelled when this goes (the timer is a member): the handler then sees an error first.
  dump_deadline_.async_wait([this](boost::system::error_code ec) {
    if (!ec) deliver(state_.answer_due_dumps(rdzv::now()));
  });
}

std::unique_ptr<Rendezvous> local_rendezvous(boost::asio::io_context& io, const LaunchConfig& cfg,
                                             const std::string& host,
                                             const std::vector<PortRange>& avoid) {
  return std::make_unique<LocalRendezvous>(io, cfg, host, avoid);
}

}  // namespace npu_run
