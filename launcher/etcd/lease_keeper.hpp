// An etcd lease held for as long as its owner lives (an agent's membership, a leader's key):
// granted with a TTL of a few seconds, renewed at a third of it through the client's members,
// revoked on a clean end so its keys go at once.
//
// Renewals that fail are not a lost lease. etcd expires leases only on its leader, and a new
// leader extends every lease by its TTL and more when it takes over (etcd's lessor Promote): a
// renewal that waits out etcd's own election (1-2 s after its leader member is lost) still finds
// the lease. So when no renewal sent in the last TTL minus a margin has succeeded, the owner is
// told the lease is `lapsing` (it may expire: a leader cut off from etcd alone must stop before
// a new one can be chosen) and the keeper goes on renewing the same lease: `renewed` when etcd
// takes one (nothing was lost), `lost` only when etcd answers that the lease is gone.
//
// At the lapse one renewal goes to every member at once: the renewals sent one at a time may all
// hang on the member that learns etcd's new leader last, while the other agents' renewals took
// through the new leader long ago. Without it a leader would conclude it alone was cut off.
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

// No handler may destroy the keeper; each may stop it (abandon, revoke).
class LeaseKeeper {
 public:
  struct Handlers {
    std::function<void(int64_t id)> granted;
    std::function<void(const std::string& why)> lapsing;  // once per lapse; still renewing
    std::function<void()> renewed;                        // a renewal took after `lapsing`
    std::function<void(const std::string& why)> lost;     // once; the keeper has stopped
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
  // One renewal through every member now, for an owner about to act on a lapse: `done(true)`
  // when etcd took it within `limit`, `done(false)` when every member failed or none answered
  // in time. Renewals sent while etcd elected its leader may hang on a member until the call's
  // timeout; one sent now tells whether etcd answers this agent at this moment. Not called when
  // the keeper is gone.
  void try_now(std::chrono::milliseconds limit, std::function<void(bool renewed)> done);

  int64_t id() const { return id_; }
  // When the last grant or renewal that etcd took was sent; the epoch of the clock before one.
  Clock::time_point renewed_at() const { return renewed_at_; }
  bool stopped() const { return stopped_; }
  bool lapsed() const { return lapsed_; }
  // Renewing as it should: the last renewal took and was sent within a renewal period and a
  // twelfth of the TTL. A renewal that fails or hangs shows here within that twelfth, long
  // before the lease could lapse.
  bool healthy() const;
  // How long before etcd could expire the lease the keeper says it is lapsing: a sixth of the TTL.
  std::chrono::milliseconds margin() const { return ttl_ / 6; }

 private:
  void renew();
  void schedule_renewal(std::chrono::milliseconds after);
  std::chrono::milliseconds next_renewal_after(Clock::time_point sent) const;
  void renew_through_every_member();
  void on_renewal(Clock::time_point sent, const Reply& reply);
  void arm_deadline(Clock::time_point sent);
  void give_up(const std::string& why);
  void end_try(bool renewed);

  Client& client_;
  std::chrono::milliseconds ttl_;
  Handlers handlers_;
  boost::asio::steady_timer renewal_;
  boost::asio::steady_timer deadline_;   // `lapsing` when it fires
  boost::asio::steady_timer try_limit_;  // try_now()'s
  std::function<void(bool)> tried_;      // try_now()'s caller, until it is answered
  int64_t id_ = 0;
  Clock::time_point renewed_at_{};
  int in_flight_ = 0;  // renewals sent and not answered, since the last lapse
  // Lapses so far: renewals sent before the last one no longer count against kMaxInFlight, so
  // those hung on a slow member cannot fill the cap until their call's timeout.
  int lapses_ = 0;
  static constexpr int kMaxInFlight = 3;
  bool last_renewal_failed_ = false;
  bool lapsed_ = false;
  bool stopped_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace npu_run::etcd
