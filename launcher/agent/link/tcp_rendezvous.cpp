// The rendezvous of a multi-node job, seen from one agent: a RendezvousClient to the server on
// --master-addr:--master-port. It holds a worker port in case this node becomes node 0, and
// gives up on a round that does not form within --rdzv-timeout.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/link/node_store_proxy.hpp"
#include "agent/link/rendezvous.hpp"
#include "agent/link/rendezvous_settings.hpp"
#include "agent/link/service_metrics.hpp"
#include "net/held_port.hpp"
#include "rendezvous/client/client.hpp"

namespace npu_run {

class TcpRendezvous : public Rendezvous {
 public:
  // `avoid`: ports the workers' MASTER_PORT must not be (HCCL's, the rendezvous port).
  TcpRendezvous(boost::asio::io_context& io, const LaunchConfig& cfg, std::string host,
                const std::vector<PortRange>& avoid);
  ~TcpRendezvous() override;

  void start(Handlers handlers) override;
  void join() override;
  void report(const rdzv::Report& report) override;
  void send(const rdzv::RoomMessage& message) override;
  void query_status(StatusAsk ask, std::function<void(StatusAnswer)> done) override;
  void close() override;
  std::string describe() const override;
  std::string local_address() const override { return addr_; }
  void add_metrics(MetricsText& out) const override {
    if (proxy_) write_proxy_metrics(out, proxy_->proxy());
  }

 private:
  void send_join();
  void on_message(const rdzv::ServerMessage& message);
  rdzv::ProbeRequest probe_with_store(rdzv::ProbeRequest request) const;

  boost::asio::io_context& io_;
  const LaunchConfig& cfg_;
  std::string host_;
  std::string addr_;  // what peers use to reach this node
  net::HeldPort worker_port_;
  std::unique_ptr<NodeStoreProxy> proxy_;  // --worker-store tiered
  rdzv::RendezvousClient client_;
  struct JoinDeadline;  // a steady_timer; Asio stays out of this header
  std::unique_ptr<JoinDeadline> join_deadline_;
  Handlers handlers_;
  bool connected_ = false;
  bool join_wanted_ = false;
  bool first_join_sent_ = false;  // later joins carry no dials: the connection stays
  // A verdict ready before the join could be sent goes right after it (the server takes
  // verdicts from joiners only).
  std::optional<rdzv::HealthReport> health_waiting_;
  // Status queries sent on the session, by id (an answer lost with a connection the session
  // moved from never comes: the asker's own timeout covers it); failed all at once if it ends.
  std::map<uint64_t, std::function<void(StatusAnswer)>> status_waiting_;
  uint64_t next_status_query_ = 1;
  void fail_status_queries(const std::string& why);
};

namespace {

// The server ends a round that does not form after --rdzv-timeout and says who is missing; the
// agent's own deadline is a little later so that message normally arrives first.
constexpr std::chrono::seconds kDeadlineSlack{5};

// Status queries waiting for their answers at most (see status_waiting_).
constexpr size_t kMaxStatusQueries = 64;

}  // namespace

struct TcpRendezvous::JoinDeadline {
  explicit JoinDeadline(boost::asio::io_context& io) : timer(io) {}
  boost::asio::steady_timer timer;
};

TcpRendezvous::TcpRendezvous(boost::asio::io_context& io, const LaunchConfig& cfg, std::string host,
                             const std::vector<PortRange>& avoid)
    : io_(io),
      cfg_(cfg),
      host_(std::move(host)),
      worker_port_(io, avoid),
      client_(io, client_options(cfg)),
      join_deadline_(std::make_unique<JoinDeadline>(io)) {}

TcpRendezvous::~TcpRendezvous() = default;

std::string TcpRendezvous::describe() const {
  return client_.endpoint();
}

void TcpRendezvous::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  if (cfg_.rendezvous.worker_store == WorkerStore::kAgent) {
    // The rendezvous host serves the workers' store on its port (agent/link/shared_store.hpp).
    handlers_.assigned = [this, assigned = std::move(handlers_.assigned)](Assignment a) {
      a.worker_master_addr = cfg_.rendezvous.master_addr;
      a.worker_master_port = cfg_.rendezvous.master_port;
      assigned(a);
    };
  } else if (cfg_.rendezvous.worker_store == WorkerStore::kTiered) {
    // This node's proxy on its held port, backed by the rendezvous host's store.
    proxy_ = std::make_unique<NodeStoreProxy>(
        io_, worker_port_.acceptor(), cfg_.rendezvous.master_addr, cfg_.rendezvous.master_port,
        cfg_.rendezvous.timing.heartbeat_timeout);
    handlers_.assigned = [this, assigned = std::move(handlers_.assigned)](Assignment a) {
      proxy_->new_round();
      a.worker_master_addr = addr_;
      a.worker_master_port = worker_port_.port();
      assigned(a);
    };
  }
  client_.start(rdzv::RendezvousClient::Handlers{
      [this](const std::string& local_addr) {
        connected_ = true;
        addr_ = cfg_.rendezvous.local_addr.value_or(local_addr);
        spdlog::debug("joined the rendezvous at {} as {}", client_.endpoint(), addr_);
        if (join_wanted_) send_join();
      },
      [this](const rdzv::ServerMessage& message) { on_message(message); },
      [this](const std::string& why) {
        join_deadline_->timer.cancel();
        fail_status_queries(why);
        handlers_.failed(why);
      },
      handlers_.beats, handlers_.etcd_reachable});
}

void TcpRendezvous::join() {
  join_wanted_ = true;
  // The connection itself is bounded by --rdzv-timeout in the client; this bounds the round.
  join_deadline_->timer.expires_after(cfg_.rendezvous.timing.join_timeout + kDeadlineSlack);
  join_deadline_->timer.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    client_.close();
    handlers_.failed(
        fmt::format("no rendezvous round formed at {} within {:.0f} s", client_.endpoint(),
                    std::chrono::duration<double>(cfg_.rendezvous.timing.join_timeout).count()));
  });
  if (connected_) send_join();
}

void TcpRendezvous::send_join() {
  join_wanted_ = false;
  rdzv::Join join = join_message(cfg_, this_node(cfg_, host_, addr_, worker_port_.port()));
  if (handlers_.snapshots) join.snapshots = handlers_.snapshots();
  if (!first_join_sent_) {
    // How this agent got in, for the blame of a slow first round; later joins use the same
    // connection.
    first_join_sent_ = true;
    join.dialled_ms = client_.first_dial_ms();
    join.dials = client_.dials();
  }
  client_.send(join);
  if (health_waiting_) {
    client_.send(*health_waiting_);
    health_waiting_.reset();
  }
}

void TcpRendezvous::report(const rdzv::Report& report) {
  client_.send(report);
}

void TcpRendezvous::send(const rdzv::RoomMessage& message) {
  const auto* health = std::get_if<rdzv::HealthReport>(&message);
  if (health != nullptr && join_wanted_) {
    health_waiting_ = *health;
    return;
  }
  std::visit([this](const auto& m) { client_.send(m); }, message);
}

void TcpRendezvous::query_status(StatusAsk ask, std::function<void(StatusAnswer)> done) {
  if (!connected_) {
    boost::asio::post(io_, [done = std::move(done), where = client_.endpoint()] {
      done(fmt::format("this agent is not connected to the rendezvous at {} yet", where));
    });
    return;
  }
  const uint64_t id = next_status_query_++;
  status_waiting_.emplace(id, std::move(done));
  // The oldest are given up past a few dozen: their answers were lost with a connection.
  if (status_waiting_.size() > kMaxStatusQueries) status_waiting_.erase(status_waiting_.begin());
  client_.send(rdzv::StatusQuery{id, ask == StatusAsk::kDump});
}

void TcpRendezvous::fail_status_queries(const std::string& why) {
  auto waiting = std::move(status_waiting_);
  status_waiting_.clear();
  for (auto& [id, done] : waiting) done(why);
}

void TcpRendezvous::close() {
  join_deadline_->timer.cancel();
  client_.close();
  fail_status_queries("this agent has left the rendezvous");
}

void TcpRendezvous::on_message(const rdzv::ServerMessage& message) {
  if (std::holds_alternative<rdzv::Assigned>(message)) join_deadline_->timer.cancel();
  if (const auto* status = std::get_if<rdzv::JobStatus>(&message)) {
    const auto it = status_waiting_.find(status->query_id);
    if (it == status_waiting_.end()) return;  // not asked for, or given up
    auto done = std::move(it->second);
    status_waiting_.erase(it);
    done(*status);
    return;
  }
  if (const auto* probe = std::get_if<rdzv::ProbeRequest>(&message)) {
    deliver_to_agent(handlers_, probe_with_store(*probe), host_);
    return;
  }
  deliver_to_agent(handlers_, message, host_);
}

// The pre-flight probe's groups meet in the store the workers will use, where npu_run serves
// one; with --worker-store torch the group's first node hosts torch's own (the request's).
rdzv::ProbeRequest TcpRendezvous::probe_with_store(rdzv::ProbeRequest request) const {
  if (cfg_.rendezvous.worker_store == WorkerStore::kAgent) {
    request.store_addr = cfg_.rendezvous.master_addr;
    request.store_port = cfg_.rendezvous.master_port;
  } else if (cfg_.rendezvous.worker_store == WorkerStore::kTiered) {
    request.store_addr = addr_;
    request.store_port = worker_port_.port();
  }
  return request;
}

std::unique_ptr<Rendezvous> tcp_rendezvous(boost::asio::io_context& io, const LaunchConfig& cfg,
                                           const std::string& host,
                                           const std::vector<PortRange>& avoid) {
  return std::make_unique<TcpRendezvous>(io, cfg, host, avoid);
}

}  // namespace npu_run
