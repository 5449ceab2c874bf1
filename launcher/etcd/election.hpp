// The job's leader, elected through etcd: whoever creates the leader key first (a transaction
// that puts it only if it is absent, tied to the candidate's lease) leads, and the key's create
// revision is the leader's **epoch**, a fencing token every write and message of that leader
// carries (etcd/requests.hpp guarded_txn_request). The others follow the leader the key names
// and watch it; when it goes (its lease lapsed: the leader died or was cut off; or revoked: a
// clean exit) they campaign again, and one of them leads with a higher epoch. Non-blocking: no
// request is held open for a campaign (etcd's own /v3/election/campaign would).
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "etcd/client.hpp"
#include "etcd/watch.hpp"

namespace npu_run::etcd {

// A handler may destroy the Election (a rendezvous that steps down does): it touches nothing of
// itself after a handler that did, and no handler runs once it is gone.
class Election {
 public:
  struct Handlers {
    std::function<void(int64_t epoch)> elected;  // this candidate leads
    // Another leads: what its key holds (its address) and its epoch. Also when it changes.
    std::function<void(const std::string& leader, int64_t epoch)> following;
    std::function<void(const std::string& why)> trouble;  // a campaign call failed; retried
  };

  // `key` is watched as a prefix: no other key of the job may start with it.
  Election(boost::asio::io_context& io, Client& client, std::string key, std::string value,
           int64_t lease, Handlers handlers);
  ~Election();
  Election(const Election&) = delete;
  Election& operator=(const Election&) = delete;

  void campaign();
  // Deletes the leader key if this candidate still holds it with `epoch` (a clean hand-over).
  void resign(int64_t epoch, std::function<void()> done);

 private:
  void follow(const KeyValue& leader, int64_t revision);

  boost::asio::io_context& io_;
  Client& client_;
  std::string key_;
  std::string value_;
  int64_t lease_;
  Handlers handlers_;
  std::unique_ptr<Watch> watch_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace npu_run::etcd
