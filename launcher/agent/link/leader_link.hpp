// The agent's side of a rendezvous whose server moves (an etcd rendezvous, whose leader can be
// lost and replaced): a TCP client of the current leader's server, replaced by one of the new
// leader's when the leader changes, while the agent sees one rendezvous throughout. What the
// agent was doing carries over: a join waiting for its round goes to the new leader; a round
// in progress is re-formed (its workers stop, as for any lost node) and the agent's report of
// it, which no server could take, is answered with a restart, so that the agent joins the new
// leader's next round.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/link/rendezvous.hpp"

namespace npu_run {

class MetricsText;

class LeaderLink {
 public:
  // `grace`: how long the loss of a leader's server waits for a new leader before the agent
  // hears of it (a killed leader's connections close at once; etcd names its successor once
  // its lease has lapsed).
  LeaderLink(boost::asio::io_context& io, const LaunchConfig& cfg, std::string host,
             std::vector<PortRange> avoid, std::chrono::milliseconds grace);
  ~LeaderLink();
  LeaderLink(const LeaderLink&) = delete;
  LeaderLink& operator=(const LeaderLink&) = delete;

  void start(Rendezvous::Handlers handlers);
  // The leader of `epoch` serves at addr:port. A later epoch replaces the link; the same one
  // changes nothing.
  void follow(const std::string& addr, int port, int64_t epoch);
  int64_t epoch() const { return epoch_; }
  bool has_leader() const { return link_ != nullptr; }
  // --metrics-port: the current link's (its store proxy).
  void add_metrics(MetricsText& out) const;

  void join();
  void report(const rdzv::Report& report);
  // To the current leader (dropped while there is none); the last health verdict goes again
  // to a new leader along with the join it belongs to.
  void send(const rdzv::RoomMessage& message);
  void query_status(Rendezvous::StatusAsk ask, std::function<void(Rendezvous::StatusAnswer)> done);
  void close();
  std::string describe() const;
  std::string local_address() const;

 private:
  struct Link;
  Rendezvous::Handlers link_handlers(uint64_t mine);
  void on_message(uint64_t mine, const rdzv::ServerMessage& message);
  void carry_over(const std::string& leader);
  void on_link_failed(uint64_t mine, const std::string& why);
  void answer_with_restart();

  boost::asio::io_context& io_;
  const LaunchConfig& cfg_;
  std::string host_;
  std::vector<PortRange> avoid_;
  Rendezvous::Handlers handlers_;
  std::chrono::milliseconds grace_;
  struct GraceTimer;  // a steady_timer; Asio stays out of this header
  std::unique_ptr<GraceTimer> failure_grace_;
  std::unique_ptr<Link> link_;
  uint64_t generation_ = 0;
  int64_t epoch_ = 0;
  // Where the agent stands, as the messages through here show it.
  bool join_wanted_ = false;  // join() called, not assigned yet
  std::optional<rdzv::HealthReport> health_;
  std::optional<uint64_t> round_;  // assigned, no decision yet
  int restart_count_ = 0;          // of the last assignment
  bool reported_ = false;
  bool answer_next_report_ = false;  // its round's leader was lost: restart, not a report
  bool closed_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace npu_run
