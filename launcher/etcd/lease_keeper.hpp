// An etcd lease held for as long as its owner lives (an agent's membership, a leader's key):
// granted with a TTL of a few seconds, renewed at a third of it through the client's members,
// revoked on a clean end so its keys go at once. Its owner must stop acting on it before etcd
// can expire it: etcd counts the TTL from a renewal it took, which happened after this side
// sent it, so `lost` runs once no renewal sent in the last TTL minus a margin has succeeded (or
// etcd says the lease is gone): a leader cut off from etcd stops before a new one can be chosen.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "etcd/client.hpp"

namespace npu_run::etcd {

class LeaseKeeper {
 public:
  struct Handlers {
    std::function<void(int64_t id)> granted;
    std::function<void(const std::string& why)> lost;  // once; the keeper has stopped
  };
  using Clock = std::chrono::steady_clock;

  LeaseKeeper(boost::asio::io_context& io, Client& client, std::chrono::seconds ttl,
              Handlers handlers);
  ~LeaseKeeper();  // stops renewing; the lease lapses on etcd's side (revoke() to end it now)
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Grants the lease; a grant that fails is `lost` with why.
  void start();
  // Revokes it (its keys go at once) and stops; `done` runs when etcd answered or failed.
  void revoke(std::function<void()> done);
  // Stops renewing without revoking: what a killed agent leaves (tests, a deposed leader).
  void abandon();

  int64_t id() const { return id_; }
  // When the last grant or renewal that etcd took was sent; the epoch of the clock before one.
  Clock::time_point renewed_at() const { return renewed_at_; }
  bool stopped() const { return stopped_; }
  // How long before etcd could expire the lease the keeper gives up: a sixth of the TTL.
  std::chrono::milliseconds margin() const { return ttl_ / 6; }

 private:
  void renew();
  void schedule_renewal();
  void arm_deadline(Clock::time_point sent);
  void give_up(const std::string& why);

  Client& client_;
  std::chrono::milliseconds ttl_;
  Handlers handlers_;
  boost::asio::steady_timer renewal_;
  boost::asio::steady_timer deadline_;  // `lost` when it fires
  int64_t id_ = 0;
  Clock::time_point renewed_at_{};
  bool stopped_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace npu_run::etcd
