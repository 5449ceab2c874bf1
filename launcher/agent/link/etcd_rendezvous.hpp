// --rdzv-backend etcd: the rendezvous of a job that survives the loss of any node, node 0's
// included. Every agent holds an etcd lease (renewed at a third of its TTL) and a member key on
// it, and campaigns for the job's leader key (etcd/election.hpp). The one etcd elects serves
// npu_run's own TCP rendezvous and the workers' store on its address, published in the leader
// key, and writes the job's memory (rendezvous/protocol/job_memory.hpp) with transactions fenced by
// its epoch; every agent, the leader's own included, is a client of that server through a
// LeaderLink, which follows a new leader when the old one's lease lapses. Renewals that fail
// while etcd elects its own leader cost nothing (etcd/lease_keeper.hpp). A leader whose renewals
// fail while the other agents' succeed, one more through every member included, is cut off
// alone: it stops serving and leaves before etcd could expire its lease, so that no two
// leaders' workers ever run at once. A leader whose lease
// etcd expired while no agent reached it (etcd wholly down) rejoins: elected again, it serves on;
// another elected, it follows that one as a member.
//
// Keys under the job's prefix (<etcd_prefix>/<run id>), all on leases: `leader` (its value:
// the server's address), `members/<host>-<pid>`, `memory` (the leader's).
#pragma once

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>

#include "agent/link/etcd_first_contact.hpp"
#include "agent/link/etcd_job_memory.hpp"
#include "agent/link/etcd_leader_key.hpp"
#include "agent/link/etcd_leader_seat.hpp"
#include "agent/link/leader_link.hpp"
#include "agent/link/rendezvous.hpp"
#include "agent/link/rendezvous_settings.hpp"
#include "agent/link/service_metrics.hpp"
#include "basics/durations.hpp"
#include "etcd/client.hpp"
#include "etcd/election.hpp"
#include "etcd/lease_keeper.hpp"
#include "net/held_port.hpp"
#include "net/host_address.hpp"

namespace npu_run {

// Its design: the comment above; its factory: etcd_rendezvous() in agent/link/rendezvous.hpp.
class EtcdRendezvous : public Rendezvous {
 public:
  EtcdRendezvous(boost::asio::io_context& io, const LaunchConfig& cfg, std::string host,
                 const std::vector<PortRange>& avoid, store::StoreServer& store);
  ~EtcdRendezvous() override = default;

  void start(Handlers handlers) override;
  void join() override { link_.join(); }
  void report(const rdzv::Report& report) override { link_.report(report); }
  void send(const rdzv::RoomMessage& message) override { link_.send(message); }
  void query_status(StatusAsk ask, std::function<void(StatusAnswer)> done) override {
    link_.query_status(ask, std::move(done));
  }
  void close() override;
  std::string local_address() const override { return link_.local_address(); }
  std::string describe() const override {
    return fmt::format("{} (elected through etcd at {})", link_.describe(), etcd_.endpoints);
  }
  void on_hosting(std::function<void(rdzv::RendezvousServer&)> hosted) override {
    seat_.on_hosting(std::move(hosted));
  }
  void add_metrics(MetricsText& out) const override {
    if (seat_.server()) write_rendezvous_metrics(out, *seat_.server());
    link_.add_metrics(out);
  }
  void on_job_ended(std::function<void(const rdzv::RendezvousState&)> ended) override {
    seat_.on_job_ended(std::move(ended));
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
  void on_lease_lapsing(const std::string& why);
  void decide_lapse(const std::string& why, std::chrono::steady_clock::time_point since);
  void on_lease_renewed();
  void on_lease_lost(const std::string& why);
  void failover_off(const std::string& why);
  void hold_departures(bool hold);
  void read_memory_then_campaign();
  void campaign();
  void on_elected(int64_t epoch);
  void on_following(const std::string& value, int64_t epoch);
  void write_memory(rdzv::JobMemory memory);
  void step_down(const std::string& why);
  void demote(int64_t other_epoch);
  void retry_in(milliseconds delay, void (EtcdRendezvous::*what)());
  void revoke_lease();
  void finish_closing();
  bool job_over() const { return memory_.latest() && memory_.latest()->finished; }
  bool reaches_etcd() const { return keeper_ && keeper_->healthy(); }

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
  EtcdLeaderSeat seat_;
  boost::asio::steady_timer start_deadline_;
  boost::asio::steady_timer retry_;
  boost::asio::steady_timer lapse_check_;
  boost::asio::steady_timer hold_limit_;  // departures are held at most this long
  std::string trouble_;                   // what etcd said last, for the start's failure
  bool etcd_lost_ = false;  // this agent's lease was lost; warned once until it has one again
  bool closed_ = false;
  bool closing_done_ = false;
  std::function<void()> on_closed_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace npu_run
