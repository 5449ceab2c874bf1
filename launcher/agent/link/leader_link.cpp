#include "agent/link/leader_link.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

namespace npu_run {

struct LeaderLink::Link {
  std::unique_ptr<LaunchConfig> cfg;  // the launch's, with the leader as --master-addr:port
  std::unique_ptr<Rendezvous> rdzv;
  std::string leader;  // "addr:port"
};

struct LeaderLink::GraceTimer {
  explicit GraceTimer(boost::asio::io_context& io) : timer(io) {}
  boost::asio::steady_timer timer;
};

namespace {

// A handler of one link that does nothing once a newer link replaced it.
template <typename... Args>
std::function<void(Args...)> current_only(const uint64_t& generation, uint64_t mine,
                                          std::function<void(Args...)> handler) {
  if (!handler) return handler;
  return [&generation, mine, handler = std::move(handler)](Args... args) {
    if (generation == mine) handler(args...);
  };
}

}  // namespace

LeaderLink::LeaderLink(boost::asio::io_context& io, const LaunchConfig& cfg, std::string host,
                       std::vector<PortRange> avoid, std::chrono::milliseconds grace)
    : io_(io),
      cfg_(cfg),
      host_(std::move(host)),
      avoid_(std::move(avoid)),
      grace_(grace),
      failure_grace_(std::make_unique<GraceTimer>(io)) {}

LeaderLink::~LeaderLink() = default;

void LeaderLink::start(Rendezvous::Handlers handlers) {
  handlers_ = std::move(handlers);
}

Rendezvous::Handlers LeaderLink::link_handlers(uint64_t mine) {
  Rendezvous::Handlers h = handlers_;
  h.assigned = [this, mine](const Assignment& a) {
    if (generation_ != mine) return;
    join_wanted_ = false;
    round_ = a.round;
    reported_ = false;
    restart_count_ = a.restart_count;
    handlers_.assigned(a);
  };
  h.message = [this, mine](const rdzv::ServerMessage& message) { on_message(mine, message); };
  h.failed = [this, mine](const std::string& why) { on_link_failed(mine, why); };
  h.health_failed = current_only(generation_, mine, handlers_.health_failed);
  return h;
}

// A message of the current leader's link goes to the agent as it is; a decision and a
// dismissal end the round this link carries over to a new leader.
void LeaderLink::on_message(uint64_t mine, const rdzv::ServerMessage& message) {
  if (generation_ != mine) return;
  if (std::holds_alternative<rdzv::Decision>(message) ||
      std::holds_alternative<rdzv::Dismissed>(message)) {
    round_.reset();
    if (std::holds_alternative<rdzv::Decision>(message)) reported_ = false;
  }
  if (handlers_.message) handlers_.message(message);
}

// The leader's server is gone (or refused this agent): a new leader may be on its way. The
// agent hears of it only if none comes within the grace.
void LeaderLink::on_link_failed(uint64_t mine, const std::string& why) {
  if (generation_ != mine || closed_) return;
  spdlog::warn("{}; waiting up to {:.1f} s for etcd to name a new rendezvous leader", why,
               std::chrono::duration<double>(grace_).count());
  failure_grace_->timer.expires_after(grace_);
  failure_grace_->timer.async_wait([this, mine, why](boost::system::error_code ec) {
    if (!ec && generation_ == mine && !closed_) handlers_.failed(why);
  });
}

void LeaderLink::follow(const std::string& addr, int port, int64_t epoch) {
  if (closed_ || epoch <= epoch_) return;
  if (link_ && link_->cfg->rendezvous.master_addr == addr &&
      link_->cfg->rendezvous.master_port == port) {
    epoch_ = epoch;  // the same server, elected again (after etcd was gone): nothing moves
    return;
  }
  std::unique_ptr<Link> old = std::move(link_);
  failure_grace_->timer.cancel();
  epoch_ = epoch;
  ++generation_;
  link_ = std::make_unique<Link>();
  link_->cfg = std::make_unique<LaunchConfig>(cfg_);
  link_->cfg->rendezvous.master_addr = addr;
  link_->cfg->rendezvous.master_port = port;
  link_->cfg->rendezvous.master_port_chosen = true;
  link_->leader = addr.find(':') == std::string::npos ? fmt::format("{}:{}", addr, port)
                                                      : fmt::format("[{}]:{}", addr, port);
  link_->rdzv = tcp_rendezvous(io_, *link_->cfg, host_, avoid_);
  link_->rdzv->start(link_handlers(generation_));
  if (old) {
    // Its handlers may be on the stack: closed now, destroyed once they have returned.
    old->rdzv->close();
    boost::asio::post(io_, [old = std::shared_ptr<Link>(std::move(old))] {});
    carry_over(link_->leader);
    return;
  }
  if (join_wanted_) {
    link_->rdzv->join();
    if (health_) link_->rdzv->send(*health_);
  }
}

void LeaderLink::carry_over(const std::string& leader) {
  if (round_) {
    spdlog::warn("the rendezvous moved to the new leader at {} (epoch {}) during round {}", leader,
                 epoch_, *round_);
    if (reported_) {
      answer_with_restart();
      return;
    }
    answer_next_report_ = true;
    if (handlers_.message) {
      handlers_.message(rdzv::Reform{
          *round_, "", -1,
          fmt::format("the rendezvous leader was lost; the job re-forms at the new leader {}",
                      leader)});
    }
    return;
  }
  if (!join_wanted_) return;
  spdlog::info("the rendezvous moved to the new leader at {} (epoch {}): joining there", leader,
               epoch_);
  link_->rdzv->join();
  if (health_) link_->rdzv->send(*health_);
}

// The round's leader is gone, and with it whatever it would have decided: the agent hears a
// restart that re-forms the job (no restart of its own is counted here; the new leader's
// assignment says which attempt it is), and joins the new leader.
void LeaderLink::answer_with_restart() {
  rdzv::Decision decision;
  decision.round = round_.value_or(0);
  decision.action = rdzv::Action::kRestart;
  decision.restart_count = restart_count_;
  decision.membership_change = true;
  round_.reset();
  reported_ = false;
  boost::asio::post(io_, [this, decision, alive = std::weak_ptr<int>(alive_)] {
    if (!alive.expired() && !closed_ && handlers_.message) handlers_.message(decision);
  });
}

void LeaderLink::join() {
  join_wanted_ = true;
  health_.reset();
  if (link_) link_->rdzv->join();
}

void LeaderLink::report(const rdzv::Report& report) {
  reported_ = true;
  if (answer_next_report_) {
    answer_next_report_ = false;
    answer_with_restart();
    return;
  }
  if (link_) link_->rdzv->report(report);
}

void LeaderLink::send(const rdzv::RoomMessage& message) {
  if (const auto* health = std::get_if<rdzv::HealthReport>(&message)) health_ = *health;
  if (link_) link_->rdzv->send(message);
}

void LeaderLink::query_status(Rendezvous::StatusAsk ask,
                              std::function<void(Rendezvous::StatusAnswer)> done) {
  if (link_) {
    link_->rdzv->query_status(ask, std::move(done));
    return;
  }
  boost::asio::post(io_, [done = std::move(done)] {
    done(std::string("etcd has not named a rendezvous leader yet"));
  });
}

void LeaderLink::close() {
  closed_ = true;
  failure_grace_->timer.cancel();
  if (link_) link_->rdzv->close();
}

std::string LeaderLink::describe() const {
  return link_ ? link_->rdzv->describe() : "etcd (no leader yet)";
}

std::string LeaderLink::local_address() const {
  return link_ ? link_->rdzv->local_address() : "";
}

void LeaderLink::add_metrics(MetricsText& out) const {
  if (link_) link_->rdzv->add_metrics(out);
}

}  // namespace npu_run
