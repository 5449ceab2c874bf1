// Calls a real etcd from a test: one request at a time, the loop run until the answer is in.
#pragma once

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "etcd/client.hpp"
#include "etcd/requests.hpp"
#include "support/run_until.hpp"

namespace npu_run::testing {

using namespace std::chrono_literals;

class EtcdCaller {
 public:
  explicit EtcdCaller(const std::string& endpoints, std::chrono::milliseconds timeout = 2s,
                      std::string user = "", std::string password = "") {
    etcd::Settings settings;
    settings.endpoints = etcd::parse_endpoints(endpoints);
    settings.timeout = timeout;
    settings.user = std::move(user);
    settings.password = std::move(password);
    client_ = std::make_unique<etcd::Client>(io_, settings);
  }
  // Any settings: TLS (EtcdCluster::client_settings), a login.
  explicit EtcdCaller(etcd::Settings settings)
      : client_(std::make_unique<etcd::Client>(io_, std::move(settings))) {}

  etcd::Reply call(const std::string& path, const etcd::Json& body) {
    std::optional<etcd::Reply> reply;
    client_->call(path, body, [&](etcd::Reply r) { reply = std::move(r); });
    REQUIRE(run_until(
        io_, [&] { return reply.has_value(); }, 30s));
    return std::move(*reply);
  }
  etcd::Json ok(const std::string& path, const etcd::Json& body) {
    etcd::Reply reply = call(path, body);
    if (auto* f = std::get_if<etcd::Failure>(&reply)) FAIL(f->what);
    return std::get<etcd::Json>(reply);
  }
  std::string failure(const std::string& path, const etcd::Json& body) {
    etcd::Reply reply = call(path, body);
    REQUIRE(std::holds_alternative<etcd::Failure>(reply));
    return std::get<etcd::Failure>(reply).what;
  }
  std::vector<etcd::KeyValue> range(const std::string& key, bool prefix) {
    return etcd::range_kvs(ok("/v3/kv/range", etcd::range_request(key, prefix)));
  }
  etcd::Client& client() { return *client_; }

 private:
  boost::asio::io_context io_;
  std::unique_ptr<etcd::Client> client_;
};

}  // namespace npu_run::testing
