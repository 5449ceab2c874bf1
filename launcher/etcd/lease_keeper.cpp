#include "etcd/lease_keeper.hpp"

#include <fmt/format.h>

namespace npu_run::etcd {

LeaseKeeper::LeaseKeeper(boost::asio::io_context& io, Client& client, std::chrono::seconds ttl,
                         Handlers handlers)
    : client_(client), ttl_(ttl), handlers_(std::move(handlers)), renewal_(io), deadline_(io) {}

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
                 if (!alive.expired()) schedule_renewal();  // `granted` may have ended it
               });
}

// etcd counts the TTL from no earlier than the moment the renewal (or grant) was sent.
void LeaseKeeper::arm_deadline(Clock::time_point sent) {
  renewed_at_ = sent;
  deadline_.expires_at(sent + ttl_ - margin());
  deadline_.async_wait([this, alive = std::weak_ptr<int>(alive_)](boost::system::error_code e) {
    if (!e && !alive.expired())
      give_up(fmt::format("no renewal of etcd lease {:x} succeeded for {} ms", id_,
                          (ttl_ - margin()).count()));
  });
}

void LeaseKeeper::schedule_renewal() {
  renewal_.expires_after(ttl_ / 3);
  renewal_.async_wait([this, alive = std::weak_ptr<int>(alive_)](boost::system::error_code e) {
    if (!e && !alive.expired() && !stopped_) renew();
  });
}

void LeaseKeeper::renew() {
  const Clock::time_point sent = Clock::now();
  client_.call(
      "/v3/lease/keepalive", lease_id_request(id_),
      [this, sent, alive = std::weak_ptr<int>(alive_)](Reply reply) {
        if (alive.expired() || stopped_) return;
        if (const auto* answer = std::get_if<Json>(&reply)) {
          if (lease_result(*answer).ttl == 0)
            return give_up(fmt::format("etcd lease {:x} has expired", id_));
          arm_deadline(sent);
        }
        // A failed renewal is tried again at the next turn; the deadline decides.
        schedule_renewal();
      },
      /*idempotent=*/true);
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
