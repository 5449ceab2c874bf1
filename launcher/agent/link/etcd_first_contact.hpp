// The etcd rendezvous' first call, before anything else: whether etcd answers this agent at all.
// An answer that refuses npu_run (a wrong password, no such user, a certificate) is final and
// named at once. No answer (a typo in the endpoint, etcd not up yet) is said at once too, each
// member with its error, and again every half minute while the call is repeated every second,
// until the owner's join timeout ends it: a user with a wrong endpoint reads why in a second,
// not after the quarter of an hour the join timeout may be.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "etcd/client.hpp"

namespace npu_run {

class EtcdFirstContact {
 public:
  struct Handlers {
    std::function<void()> answered;                          // etcd answers: go on
    std::function<void(const std::string& why)> refused;     // final
    std::function<void(const std::string& why)> unanswered;  // each failed try (for the timeout)
  };

  EtcdFirstContact(boost::asio::io_context& io, etcd::Client& client, std::string endpoints);
  EtcdFirstContact(const EtcdFirstContact&) = delete;
  EtcdFirstContact& operator=(const EtcdFirstContact&) = delete;

  void start(Handlers handlers);
  void stop();

 private:
  void call();
  void warn(const std::string& why);

  etcd::Client& client_;
  std::string endpoints_;
  Handlers handlers_;
  boost::asio::steady_timer retry_;
  std::chrono::steady_clock::time_point next_warning_{};
  int tries_ = 0;
  bool stopped_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace npu_run
