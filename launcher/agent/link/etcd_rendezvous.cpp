#include "agent/link/etcd_rendezvous.hpp"

#include <spdlog/spdlog.h>

namespace npu_run {

namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

// While etcd does not answer, the first contact and a lost membership are tried again this often.
constexpr milliseconds kCampaignRetry = 1s;
// After a leader's lease lapses, etcd removes its key within half a second, and a follower's
// campaign is a request away: the new leader is named well within this after the TTL.
constexpr milliseconds kElectionSlack = 3s;
// A clean end waits this long at most for etcd to revoke the lease (its keys then go at once;
// otherwise they lapse with its TTL).
constexpr milliseconds kRevokeWait = 2s;
// A leader's last renewal before it steps down waits this long for etcd: a twelfth of the TTL,
// so that it still stops its workers about when etcd could first expire its lease.
milliseconds last_try_limit(milliseconds ttl) {
  return ttl / 12;
}

}  // namespace

EtcdRendezvous::EtcdRendezvous(boost::asio::io_context& io, const LaunchConfig& cfg,
                               std::string host, const std::vector<PortRange>& avoid,
                               store::StoreServer& store)
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
      seat_(io, cfg, store),
      start_deadline_(io),
      retry_(io),
      lapse_check_(io),
      hold_limit_(io) {}

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
// tried again until the deadline (agent/link/etcd_first_contact.hpp).
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
                                  [this](const std::string& why) { on_lease_lapsing(why); },
                                  [this] { on_lease_renewed(); },
                                  [this](const std::string& why) { on_lease_lost(why); }});
  keeper_->start();
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

// No renewal has taken for most of the TTL. The agent looks again after a heartbeat interval and
// a half (a renewal that waited out etcd's election often answers in between: nothing to say
// then). A follower then says failover is off. A leader asks its followers' heartbeats: a
// follower whose renewals fail shows it within a twelfth of the TTL after its next renewal, so
// one that still reaches etcd does while this agent does not. It is cut off alone, and the
// others will elect a new leader.
void EtcdRendezvous::on_lease_lapsing(const std::string& why) {
  if (closed_) return;
  trouble_ = why;
  spdlog::debug("etcd lease lapsing: {}", why);
  hold_departures(true);
  // Two heartbeat intervals of the followers' word (at most a tenth of the TTL each), from half
  // a beat before the lapse: a follower whose renewals fail says so before then; one cut off
  // from nothing is heard at least once, even late.
  const milliseconds beat = cfg_.rendezvous.timing.heartbeat_interval;
  const auto since = std::chrono::steady_clock::now() - beat / 2;
  lapse_check_.expires_after(beat * 3 / 2);
  lapse_check_.async_wait([this, why, since](boost::system::error_code ec) {
    if (!ec) decide_lapse(why, since);
  });
}

void EtcdRendezvous::decide_lapse(const std::string& why,
                                  std::chrono::steady_clock::time_point since) {
  if (closed_ || !keeper_ || !keeper_->lapsed()) return;
  if (epoch_ == 0) return failover_off(why);
  if (seat_.server() && seat_.server()->clients_reaching_etcd(since) > 0) {
    // Its own renewals may have gone while etcd elected its leader and hang on a member since;
    // the others', sent later, took. One more through every member decides.
    keeper_->try_now(last_try_limit(etcd_.lease_ttl),
                     [this, why, alive = std::weak_ptr<int>(alive_)](bool renewed) {
                       if (renewed || alive.expired() || closed_ || !keeper_ || keeper_->stopped())
                         return;
                       step_down(fmt::format(
                           "can no longer renew its etcd lease ({}) while other agents can", why));
                     });
    return;
  }
  failover_off(why + ", and no agent of the job reaches etcd");
}

// While this leader's lease is in doubt, an agent that hangs up may be following a leader etcd
// elected in its place: its departure must not end the job (rendezvous/server/server.hpp). Not for
// longer than a new leader would take to be named: with etcd gone for good, an agent that hung
// up is lost after all, and the job must hear of it.
void EtcdRendezvous::hold_departures(bool hold) {
  if (epoch_ == 0 || !seat_.server()) return;
  seat_.server()->hold_departures(hold);
  if (!hold) {
    hold_limit_.cancel();
    return;
  }
  hold_limit_.expires_after(etcd_.lease_ttl + kElectionSlack);
  hold_limit_.async_wait([this](boost::system::error_code ec) {
    if (ec || closed_ || epoch_ == 0 || !seat_.server()) return;
    seat_.server()->hold_departures(false);  // those held so long count
    if (keeper_ && !keeper_->healthy()) hold_departures(true);
  });
}

void EtcdRendezvous::failover_off(const std::string& why) {
  if (link_.has_leader() && !etcd_lost_) {
    spdlog::warn("{}: the job goes on over TCP, but failover is off until etcd answers again", why);
  }
  etcd_lost_ = true;
}

void EtcdRendezvous::on_lease_renewed() {
  hold_departures(false);
  if (closed_ || !etcd_lost_) return;
  spdlog::info("etcd answers again and kept this agent's lease: failover is on again");
  etcd_lost_ = false;
}

// etcd refused a lease or says it expired: a new one, and the same election again. A leader
// keeps serving meanwhile: etcd elects it again (it serves on) or another (it follows that one).
void EtcdRendezvous::on_lease_lost(const std::string& why) {
  if (closed_) return;
  trouble_ = why;
  election_.reset();
  failover_off(why);
  retry_in(why.starts_with("etcd granted no lease") ? kCampaignRetry : milliseconds(0),
           &EtcdRendezvous::join_etcd);
}

void EtcdRendezvous::read_memory_then_campaign() {
  memory_.follow([this] { campaign(); },
                 [this](const std::string& why) {
                   trouble_ = why;
                   retry_in(kCampaignRetry, &EtcdRendezvous::read_memory_then_campaign);
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
  if (seat_.server() && epoch_ != 0) {
    // Elected again after etcd was gone: the same server goes on under the new epoch.
    spdlog::info("etcd answers again and elected this agent again (epoch {}): failover is on",
                 epoch);
    etcd_lost_ = false;
    epoch_ = epoch;
    hold_departures(false);
    write_memory(memory_.latest().value_or(rdzv::JobMemory{}));
    link_.follow(addr_, serve_port(), epoch);
    return;
  }
  epoch_ = epoch;
  ElectedHost at{addr_, serve_port(), std::nullopt,
                 [this](const rdzv::JobMemory& m) { write_memory(m); }};
  if (memory_.latest()) at.resume = rdzv::successor_memory(*memory_.latest(), wall_now_ms());
  try {
    seat_.open(at, epoch);
  } catch (const std::exception& e) {
    step_down(fmt::format("cannot serve the rendezvous on {}:{} ({})", addr_, at.port, e.what()));
    return;
  }
  write_memory(at.resume.value_or(rdzv::JobMemory{}));
  link_.follow(addr_, at.port, epoch);
}

void EtcdRendezvous::on_following(const std::string& value, int64_t epoch) {
  if (closed_ || job_over()) return;
  if (epoch_ != 0 && epoch != epoch_) demote(epoch);
  if (etcd_lost_ && reaches_etcd()) {
    spdlog::info("etcd answers again: failover is on again on this node");
    etcd_lost_ = false;
  }
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

// Every write of the leader is fenced by its epoch (agent/link/etcd_job_memory.hpp).
void EtcdRendezvous::write_memory(rdzv::JobMemory memory) {
  memory.leader_host = host_;
  memory_.write(memory, epoch_, keeper_->id(), [this] {
    if (epoch_ == 0 || closed_) return;
    // Its key went with its lease: rejoin with a new one; etcd elects it again or another.
    spdlog::warn("this agent no longer holds the leader key it was elected with (epoch {})",
                 epoch_);
    election_.reset();
    if (keeper_) keeper_->abandon();
    retry_in(milliseconds(0), &EtcdRendezvous::join_etcd);
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
  seat_.stop();
  handlers_.failed(what);
}

// Another agent was elected while this one's lease had lapsed (etcd was gone for every agent):
// it stops serving and goes on as a member of the new leader's rounds.
void EtcdRendezvous::demote(int64_t other_epoch) {
  spdlog::warn(
      "this agent led the rendezvous (epoch {}) until its etcd lease lapsed; etcd elected "
      "another agent (epoch {}): it stops serving and rejoins the job as a member",
      epoch_, other_epoch);
  epoch_ = 0;
  lapse_check_.cancel();
  seat_.retire();
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
  lapse_check_.cancel();
  hold_limit_.cancel();
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
