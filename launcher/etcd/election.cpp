#include "etcd/election.hpp"

#include <boost/asio/steady_timer.hpp>

namespace npu_run::etcd {

Election::Election(boost::asio::io_context& io, Client& client, std::string key, std::string value,
                   int64_t lease, Handlers handlers)
    : io_(io),
      client_(client),
      key_(std::move(key)),
      value_(std::move(value)),
      lease_(lease),
      handlers_(std::move(handlers)) {}

Election::~Election() = default;

void Election::campaign() {
  watch_.reset();
  client_.call("/v3/kv/txn", create_if_absent_request(key_, value_, lease_),
               [this, alive = std::weak_ptr<int>(alive_)](Reply reply) {
                 if (alive.expired()) return;
                 if (auto* f = std::get_if<Failure>(&reply)) {
                   if (handlers_.trouble) handlers_.trouble(f->what);
                   // Again in a second: etcd may be electing its own leader.
                   auto timer = std::make_shared<boost::asio::steady_timer>(io_);
                   timer->expires_after(std::chrono::seconds(1));
                   timer->async_wait([this, timer, alive](boost::system::error_code e) {
                     if (!e && !alive.expired()) campaign();
                   });
                   return;
                 }
                 const TxnResult txn = txn_result(std::get<Json>(reply));
                 if (txn.succeeded) return handlers_.elected(txn.revision);
                 if (txn.read.empty()) return campaign();  // gone in between: once more
                 follow(txn.read.front(), txn.revision);
               });
}

// A handler may end this election (a deposed leader's rendezvous resets it from `following`):
// after each one, nothing of `this` is touched unless it still exists.
void Election::follow(const KeyValue& leader, int64_t revision) {
  const std::weak_ptr<int> alive = alive_;
  handlers_.following(leader.value, leader.create_revision);
  if (alive.expired()) return;
  WatchHandlers on;
  on.events = [this, alive](const std::vector<WatchEvent>& events, int64_t) {
    for (const WatchEvent& e : events) {
      if (alive.expired()) return;
      if (e.kv.key != key_) continue;
      if (e.deleted) return campaign();  // the leader is gone: a new election
      handlers_.following(e.kv.value, e.kv.create_revision);
    }
  };
  on.end = [this, alive](const std::string&) {
    if (!alive.expired()) campaign();  // read afresh
  };
  watch_ = std::make_unique<Watch>(io_, client_, key_, revision + 1, std::move(on));
}

void Election::resign(int64_t epoch, std::function<void()> done) {
  client_.call("/v3/kv/txn", guarded_txn_request(key_, epoch, {}, {key_}),
               [done = std::move(done), alive = std::weak_ptr<int>(alive_)](const Reply&) {
                 if (!alive.expired()) done();
               });
}

}  // namespace npu_run::etcd
