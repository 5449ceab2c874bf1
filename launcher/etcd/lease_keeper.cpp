#include "etcd/lease_keeper.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace npu_run::etcd {

LeaseKeeper::LeaseKeeper(boost::asio::io_context& io, Client& client, std::chrono::seconds ttl,
                         Handlers handlers)
    : client_(client),
      ttl_(ttl),
      handlers_(std::move(handlers)),
      renewal_(io),
      deadline_(io),
      try_limit_(io) {}

LeaseKeeper::~LeaseKeeper() {
  abandon();
}

void LeaseKeeper::start() {
  const Clock::time_point sent = Clock::now();
  client_.call("/v3/lease/grant",
               lease_grant_request(std::chrono::duration_cast<std::chrono::seconds>(ttl_).count()),
               [this, sent, alive = std::weak_ptr<int>(alive_)](Reply reply) {
                 if (alive.expired() || stopped_) return;
                 if (auto* f = std::get_if<Failure>(&reply))
                   return give_up("etcd granted no lease: " + f->what);
                 const Lease lease = lease_result(std::get<Json>(reply));
                 if (lease.id == 0) return give_up("etcd granted no lease (no ID in its answer)");
                 id_ = lease.id;
                 arm_deadline(sent);
                 if (handlers_.granted) handlers_.granted(id_);
                 if (!alive.expired() && !stopped_) schedule_renewal(next_renewal_after(sent));
               });
}

// Renewals go a third of the TTL after the last that took was sent: one that has not taken a
// twelfth of the TTL after that has failed or hangs.
bool LeaseKeeper::healthy() const {
  if (stopped_ || lapsed_ || last_renewal_failed_ || id_ == 0) return false;
  return Clock::now() - renewed_at_ <= ttl_ / 3 + ttl_ / 12;
}

// etcd counts the TTL from no earlier than the moment the renewal (or grant) was sent.
void LeaseKeeper::arm_deadline(Clock::time_point sent) {
  renewed_at_ = sent;
  deadline_.expires_at(sent + ttl_ - margin());
  deadline_.async_wait([this, alive = std::weak_ptr<int>(alive_)](boost::system::error_code e) {
    if (e || alive.expired() || stopped_ || lapsed_) return;
    lapsed_ = true;
    renew_through_every_member();
    if (handlers_.lapsing)
      handlers_.lapsing(fmt::format("no renewal of etcd lease {:x} succeeded for {} ms", id_,
                                    (ttl_ - margin()).count()));
  });
}

// A third of the TTL after the last one that took was sent, not after its answer: a grant or a
// renewal that waited out etcd's election would otherwise leave the next to go just as the
// deadline falls.
std::chrono::milliseconds LeaseKeeper::next_renewal_after(Clock::time_point sent) const {
  const auto next =
      std::chrono::duration_cast<std::chrono::milliseconds>(sent + ttl_ / 3 - Clock::now());
  return std::max(next, std::chrono::milliseconds(0));
}

void LeaseKeeper::schedule_renewal(std::chrono::milliseconds after) {
  renewal_.expires_after(after);
  renewal_.async_wait([this, alive = std::weak_ptr<int>(alive_)](boost::system::error_code e) {
    if (!e && !alive.expired() && !stopped_) renew();
  });
}

// A renewal that hangs (a member waiting for etcd's new leader until the call's timeout) does
// not hold up the next: another goes after a sixth of the TTL, up to kMaxInFlight at once, so
// the first member to answer after etcd's election renews the lease, as it does for the agents
// whose renewals did not hang.
void LeaseKeeper::renew() {
  schedule_renewal(ttl_ / 6);
  if (in_flight_ >= kMaxInFlight) return;
  ++in_flight_;
  const Clock::time_point sent = Clock::now();
  client_.call(
      "/v3/lease/keepalive", lease_id_request(id_),
      [this, sent, lapses = lapses_, alive = std::weak_ptr<int>(alive_)](const Reply& reply) {
        if (alive.expired() || stopped_) return;
        if (lapses == lapses_) --in_flight_;
        on_renewal(sent, reply);
      },
      /*idempotent=*/true);
}

// Outside the cap, which it releases: whichever member answers first renews the lease.
void LeaseKeeper::renew_through_every_member() {
  ++lapses_;
  in_flight_ = 0;
  const Clock::time_point sent = Clock::now();
  client_.call_every_member("/v3/lease/keepalive", lease_id_request(id_),
                            [this, sent, alive = std::weak_ptr<int>(alive_)](const Reply& reply) {
                              if (!alive.expired() && !stopped_) on_renewal(sent, reply);
                            });
}

void LeaseKeeper::try_now(std::chrono::milliseconds limit, std::function<void(bool)> done) {
  if (stopped_) return done(false);
  if (tried_) {  // the try under way answers this caller too
    tried_ = [first = std::move(tried_), then = std::move(done)](bool renewed) {
      first(renewed);
      then(renewed);
    };
    return;
  }
  tried_ = std::move(done);
  const Clock::time_point sent = Clock::now();
  client_.call_every_member("/v3/lease/keepalive", lease_id_request(id_),
                            [this, sent, alive = std::weak_ptr<int>(alive_)](const Reply& reply) {
                              if (alive.expired() || stopped_) return;
                              on_renewal(sent, reply);
                              if (!alive.expired()) end_try(!stopped_ && !lapsed_);
                            });
  try_limit_.expires_after(limit);
  try_limit_.async_wait([this, alive = std::weak_ptr<int>(alive_)](boost::system::error_code e) {
    if (!e && !alive.expired()) end_try(!stopped_ && !lapsed_);
  });
}

// A handler of try_now() may stop the keeper or destroy its owner's state: nothing of the
// keeper is touched after it.
void LeaseKeeper::end_try(bool renewed) {
  if (!tried_) return;
  try_limit_.cancel();
  std::exchange(tried_, nullptr)(renewed);
}

void LeaseKeeper::on_renewal(Clock::time_point sent, const Reply& reply) {
  const auto* answer = std::get_if<Json>(&reply);
  if (sent < renewed_at_) return;  // a later one took already
  last_renewal_failed_ = answer == nullptr;
  if (answer == nullptr) {
    // Tried again soon: etcd may be electing its leader, and the first renewal it takes
    // afterwards keeps the lease.
    return schedule_renewal(ttl_ / 12);
  }
  if (lease_result(*answer).ttl == 0)
    return give_up(fmt::format("etcd says lease {:x} has expired", id_));
  arm_deadline(sent);
  schedule_renewal(next_renewal_after(sent));
  if (lapsed_) {
    lapsed_ = false;
    if (handlers_.renewed) handlers_.renewed();
  }
}

void LeaseKeeper::give_up(const std::string& why) {
  if (stopped_) return;
  abandon();
  if (handlers_.lost) handlers_.lost(why);
}

void LeaseKeeper::abandon() {
  stopped_ = true;
  renewal_.cancel();
  deadline_.cancel();
  try_limit_.cancel();
}

void LeaseKeeper::revoke(std::function<void()> done) {
  abandon();
  if (id_ == 0) return done();
  client_.call("/v3/lease/revoke", lease_id_request(id_),
               [done = std::move(done), alive = std::weak_ptr<int>(alive_)](const Reply&) {
                 if (!alive.expired()) done();
               });
}

}  // namespace npu_run::etcd
