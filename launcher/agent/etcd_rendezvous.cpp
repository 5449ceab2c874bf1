// --rdzv-backend etcd: the rendezvous of a job that survives the loss of any node, node 0's
// included. Every agent holds an etcd lease (renewed at a third of its TTL) and a member key on
// it, and campaigns for the job's leader key (etcd/election.hpp). The one etcd elects serves
// npu_run's own TCP rendezvous and the workers' store on its address, published in the leader
// key, and writes the job's memory (rendezvous/job_memory.hpp) with transactions fenced by its
// epoch; every agent, the leader's own included, is a client of that server through a
// LeaderLink, which follows a new leader when the old one's lease lapses. A leader that can no
// longer renew its lease stops serving and leaves before etcd could expire it, so that no two
// leaders' workers ever run at once.
//
// Keys under the job's prefix (<etcd_prefix>/<run id>), all on leases: `leader` (its value:
// the server's address), `members/<host>-<pid>`, `memory` (the leader's).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>

#include "agent/etcd_first_contact.hpp"
#include "agent/etcd_job_memory.hpp"
#include "agent/etcd_leader_key.hpp"
#include "agent/leader_link.hpp"
#include "agent/rendezvous.hpp"
#include "agent/rendezvous_host.hpp"
#include "agent/rendezvous_settings.hpp"
#include "agent/service_metrics.hpp"
#include "basics/durations.hpp"
#include "etcd/client.hpp"
#include "etcd/election.hpp"
#include "etcd/lease_keeper.hpp"
#include "net/held_port.hpp"
#include "net/host_address.hpp"
#include "rendezvous/server.hpp"

namespace npu_run {

namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

// While etcd does not answer, the first contact and a lost membership are tried again this often.
constexpr milliseconds kRetry = 1s;
// After a leader's lease lapses, etcd removes its key within half a second, and a follower's
// campaign is a request away: the new leader is named well within this after the TTL.
constexpr milliseconds kElectionSlack = 3s;
// A clean end waits this long at most for etcd to revoke the lease (its keys then go at once;
// otherwise they lapse with its TTL).
constexpr milliseconds kRevokeWait = 2s;

}  // namespace

class EtcdRendezvous : public Rendezvous {
 public:
  EtcdRendezvous(boost::asio::io_context& io, const LaunchConfig& cfg, std::string host,
                 const std::vector<PortRange>& avoid, store::StoreServer& store)
      : io_(io),
        cfg_(cfg),
        etcd_(*cfg.rendezvous.etcd),
        host_(std::move(host)),
        store_(store),
        client_(io, etcd_client_settings(etcd_)),
        port_(io, avoid),
        link_(io, cfg, host_, avoid, etcd_.lease_ttl + kElectionSlack),
        memory_(io, client_, key("memory"), key("leader"), [this] { return epoch_ != 0; }),
        first_contact_(io, client_, etcd_.endpoints),
        start_deadline_(io),
        retry_(io) {}
  ~EtcdRendezvous() override = default;

  void start(Handlers handlers) override;
  void join() override { link_.join(); }
  void report(const rdzv::Report& report) override { link_.report(report); }
  void send_health(const rdzv::HealthReport& report) override { link_.send_health(report); }
  void send_pings(const rdzv::PingReport& report) override { link_.send_pings(report); }
  void notice_hang(const rdzv::HangNotice& notice) override { link_.notice_hang(notice); }
  void query_status(std::function<void(StatusAnswer)> done) override {
    link_.query_status(std::move(done));
  }
  void close() override;
  std::string local_address() const override { return link_.local_address(); }
  std::string describe() const override {
    return fmt::format("{} (elected through etcd at {})", link_.describe(), etcd_.endpoints);
  }
  void on_hosting(std::function<void(rdzv::RendezvousServer&)> hosted) override {
    hosting_ = std::move(hosted);
  }
  void add_metrics(MetricsText& out) const override {
    if (server_) write_rendezvous_metrics(out, *server_);
    link_.add_metrics(out);
  }
  void on_job_ended(std::function<void(const rdzv::RendezvousState&)> ended) override {
    job_ended_ = std::move(ended);
  }
  void when_closed(std::function<void()> done) override;

 private:
  std::string key(const std::string& name) const { return etcd_.prefix + "/" + name; }
  int serve_port() const {
    return cfg_.rendezvous.master_port_chosen ? cfg_.rendezvous.master_port : port_.port();
  }
  void contact_etcd();
  void join_etcd();
  void on_lease(int64_t id);
  void on_lease_lost(const std::string& why);
  void read_memory_then_campaign();
  void campaign();
  void on_elected(int64_t epoch);
  void on_following(const std::string& value, int64_t epoch);
  void write_memory(rdzv::JobMemory memory);
  void step_down(const std::string& why);
  void retry_in(milliseconds delay, void (EtcdRendezvous::*what)());
  void revoke_lease();
  void finish_closing();
  bool job_over() const { return memory_.latest() && memory_.latest()->finished; }
  bool reaches_etcd() const;
  bool etcd_gone_for_all() const;

  boost::asio::io_context& io_;
  const LaunchConfig& cfg_;
  const EtcdSettings& etcd_;
  std::string host_;
  store::StoreServer& store_;
  etcd::Client client_;
  net::HeldPort port_;  // where this agent serves the rendezvous if it leads
  LeaderLink link_;
  Handlers handlers_;
  std::string addr_;  // this agent's address, as the others reach it
  std::unique_ptr<etcd::LeaseKeeper> keeper_;
  std::unique_ptr<etcd::Election> election_;
  EtcdJobMemory memory_;  // the job's, as the last leader wrote it
  EtcdFirstContact first_contact_;
  int64_t epoch_ = 0;  // while this agent leads
  std::unique_ptr<rdzv::RendezvousServer> server_;
  std::function<void(rdzv::RendezvousServer&)> hosting_;
  std::function<void(const rdzv::RendezvousState&)> job_ended_;  // for each server it hosts
  boost::asio::steady_timer start_deadline_;
  boost::asio::steady_timer retry_;
  std::string trouble_;     // what etcd said last, for the start's failure
  bool etcd_lost_ = false;  // this agent's lease was lost; warned once until it has one again
  bool closed_ = false;
  bool closing_done_ = false;
  std::function<void()> on_closed_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

void EtcdRendezvous::start(Handlers handlers) {
  handlers.etcd_reachable = [this]() -> std::optional<bool> { return reaches_etcd(); };
  handlers_ = handlers;
  link_.start(std::move(handlers));
  addr_ = cfg_.rendezvous.local_addr.value_or("");
  if (addr_.empty()) {
    addr_ = net::route_source_address(etcd::parse_endpoints(etcd_.endpoints).front().host);
  }
  if (addr_.empty()) addr_ = host_;
  // etcd unreachable at the start: the job fails within the rendezvous timeout, naming every
  // member and what each said.
  start_deadline_.expires_after(cfg_.rendezvous.timing.join_timeout);
  start_deadline_.async_wait([this](boost::system::error_code ec) {
    if (ec || closed_ || link_.has_leader()) return;
    handlers_.failed(fmt::format(
        "no rendezvous leader came from etcd at {} within {:.0f} s: {}", etcd_.endpoints,
        std::chrono::duration<double>(cfg_.rendezvous.timing.join_timeout).count(),
        trouble_.empty() ? "no agent could campaign" : trouble_));
  });
  contact_etcd();
}

// An answer that refuses npu_run ends the job at once, by name; no answer is said at once and
// tried again until the deadline (agent/etcd_first_contact.hpp).
void EtcdRendezvous::contact_etcd() {
  first_contact_.start(EtcdFirstContact::Handlers{
      [this] {
        client_.prefer_leader([this, alive = std::weak_ptr<int>(alive_)] {
          if (!alive.expired() && !closed_) join_etcd();
        });
      },
      [this](const std::string& why) {
        start_deadline_.cancel();
        handlers_.failed(why);
      },
      [this](const std::string& why) { trouble_ = why; }});
}

void EtcdRendezvous::retry_in(milliseconds delay, void (EtcdRendezvous::*what)()) {
  retry_.expires_after(delay);
  retry_.async_wait([this, what](boost::system::error_code ec) {
    if (!ec && !closed_) (this->*what)();
  });
}

void EtcdRendezvous::join_etcd() {
  keeper_ = std::make_unique<etcd::LeaseKeeper>(
      io_, client_, std::chrono::duration_cast<std::chrono::seconds>(etcd_.lease_ttl),
      etcd::LeaseKeeper::Handlers{[this](int64_t id) { on_lease(id); },
                                  [this](const std::string& why) { on_lease_lost(why); }});
  keeper_->start();
}

// What this agent's heartbeats say: its lease was renewed within the renewal period and a bit.
bool EtcdRendezvous::reaches_etcd() const {
  return keeper_ && !keeper_->stopped() &&
         std::chrono::steady_clock::now() - keeper_->renewed_at() <=
             etcd_.lease_ttl / 3 + etcd_.lease_ttl / 12;
}

// The leader lost its lease: when no agent said in its last heartbeats (those after two thirds
// of the TTL since the leader's last renewal) that it reaches etcd, etcd is gone for everyone,
// not only for this agent, and nobody can be elected in its place.
bool EtcdRendezvous::etcd_gone_for_all() const {
  if (!server_ || !keeper_) return false;
  return server_->clients_reaching_etcd(keeper_->renewed_at() + etcd_.lease_ttl * 2 / 3) == 0;
}

void EtcdRendezvous::on_lease(int64_t id) {
  const std::string member = key(fmt::format("members/{}-{}", host_, ::getpid()));
  client_.call("/v3/kv/put", etcd::put_request(member, addr_, id), [](const etcd::Reply&) {});
  if (memory_.following()) {
    campaign();
    return;
  }
  read_memory_then_campaign();
}

void EtcdRendezvous::on_lease_lost(const std::string& why) {
  if (closed_) return;
  trouble_ = why;
  election_.reset();
  if (epoch_ != 0 && !etcd_lost_ && !etcd_gone_for_all()) {
    step_down(fmt::format("can no longer renew its etcd lease ({}) while other agents can", why));
    return;
  }
  if (link_.has_leader() && !etcd_lost_) {
    spdlog::warn("{}{}: the job goes on over TCP, but failover is off until etcd answers again",
                 why, epoch_ != 0 ? ", and no agent of the job reaches etcd" : "");
  }
  etcd_lost_ = true;
  retry_in(kRetry, &EtcdRendezvous::join_etcd);
}

void EtcdRendezvous::read_memory_then_campaign() {
  memory_.follow([this] { campaign(); },
                 [this](const std::string& why) {
                   trouble_ = why;
                   retry_in(kRetry, &EtcdRendezvous::read_memory_then_campaign);
                 });
}

void EtcdRendezvous::campaign() {
  if (closed_ || job_over() || !keeper_) return;
  election_ = std::make_unique<etcd::Election>(
      io_, client_, key("leader"), leader_value(LeaderAddress{addr_, serve_port()}, host_),
      keeper_->id(),
      etcd::Election::Handlers{
          [this](int64_t epoch) { on_elected(epoch); },
          [this](const std::string& value, int64_t epoch) { on_following(value, epoch); },
          [this](const std::string& why) {
            trouble_ = why;
            spdlog::debug("etcd campaign: {}", why);
          }});
  election_->campaign();
}

void EtcdRendezvous::on_elected(int64_t epoch) {
  if (closed_ || job_over()) return;
  if (server_ && epoch_ != 0) {
    // Elected again after etcd was gone: the same server goes on under the new epoch.
    spdlog::info("etcd answers again and elected this agent again (epoch {}): failover is on",
                 epoch);
    etcd_lost_ = false;
    epoch_ = epoch;
    write_memory(memory_.latest().value_or(rdzv::JobMemory{}));
    link_.follow(addr_, serve_port(), epoch);
    return;
  }
  epoch_ = epoch;
  ElectedHost at{addr_, serve_port(), std::nullopt,
                 [this](const rdzv::JobMemory& m) { write_memory(m); }};
  if (memory_.latest()) at.resume = rdzv::successor_memory(*memory_.latest(), wall_now_ms());
  try {
    server_ = host_elected_rendezvous(io_, cfg_, store_, at);
  } catch (const std::exception& e) {
    step_down(fmt::format("cannot serve the rendezvous on {}:{} ({})", addr_, at.port, e.what()));
    return;
  }
  if (at.resume) {
    spdlog::warn(
        "etcd elected this agent to lead the rendezvous after {} (epoch {}): serving "
        "on {}:{}, the job continues with round {} (restart {})",
        at.resume->leader_host.empty() ? "the last leader" : at.resume->leader_host, epoch, addr_,
        at.port, at.resume->round, at.resume->restart_count);
  } else {
    spdlog::info("etcd elected this agent to lead the rendezvous (epoch {}): serving on {}:{}",
                 epoch, addr_, at.port);
  }
  if (job_ended_) server_->on_job_ended(job_ended_);
  if (hosting_) hosting_(*server_);
  write_memory(at.resume.value_or(rdzv::JobMemory{}));
  link_.follow(addr_, at.port, epoch);
}

void EtcdRendezvous::on_following(const std::string& value, int64_t epoch) {
  if (closed_ || job_over()) return;
  if (epoch_ != 0 && epoch != epoch_) {
    step_down(fmt::format("finds another leader in etcd (epoch {})", epoch));
    return;
  }
  if (etcd_lost_) spdlog::info("etcd answers again: failover is on again on this node");
  etcd_lost_ = false;
  if (epoch_ != 0) return;  // its own key, still there from before etcd was gone
  const std::optional<LeaderAddress> leader = leader_address(value);
  if (!leader) {
    spdlog::warn(
        "etcd's leader key {} holds '{}', not an npu_run rendezvous address; is another "
        "program using the prefix?",
        key("leader"), value.substr(0, 200));
    return;
  }
  link_.follow(leader->addr, leader->port, epoch);
}

// Every write of the leader is fenced by its epoch (agent/etcd_job_memory.hpp).
void EtcdRendezvous::write_memory(rdzv::JobMemory memory) {
  memory.leader_host = host_;
  memory_.write(memory, epoch_, keeper_->id(), [this] {
    if (epoch_ != 0 && !etcd_lost_) step_down("no longer holds the leader key it was elected with");
  });
}

void EtcdRendezvous::step_down(const std::string& why) {
  if (epoch_ == 0) return;
  const std::string what = fmt::format(
      "this agent led the rendezvous (epoch {}) but {}: it stops its workers and leaves the job, "
      "so that the workers of two leaders never run at once",
      epoch_, why);
  epoch_ = 0;
  election_.reset();
  if (keeper_) keeper_->abandon();
  link_.close();
  if (server_) server_->stop();
  handlers_.failed(what);
}

void EtcdRendezvous::close() {
  if (closed_) return;
  closed_ = true;
  link_.close();
  first_contact_.stop();
  election_.reset();
  memory_.stop();
  start_deadline_.cancel();
  retry_.cancel();
  // The cap on the wait for etcd; the revoke usually answers in milliseconds.
  retry_.expires_after(kRevokeWait);
  retry_.async_wait([this](boost::system::error_code ec) {
    if (!ec) finish_closing();
  });
  memory_.after_writes([this] { revoke_lease(); });  // once the last write of the memory is in
}

void EtcdRendezvous::revoke_lease() {
  if (!keeper_) return finish_closing();
  keeper_->revoke([this] { finish_closing(); });
}

void EtcdRendezvous::finish_closing() {
  if (closing_done_) return;
  closing_done_ = true;
  retry_.cancel();
  if (on_closed_) on_closed_();
}

void EtcdRendezvous::when_closed(std::function<void()> done) {
  if (closing_done_ || !closed_) {
    done();
    return;
  }
  on_closed_ = std::move(done);
}

std::unique_ptr<Rendezvous> etcd_rendezvous(boost::asio::io_context& io, const LaunchConfig& cfg,
                                            const std::string& host,
                                            const std::vector<PortRange>& avoid,
                                            store::StoreServer& store) {
  return std::make_unique<EtcdRendezvous>(io, cfg, host, avoid, store);
}

}  // namespace npu_run
