// One agent's part in an etcd election, for the etcd layer's tests: its client, its lease kept
// by a LeaseKeeper (2 s, the smallest TTL npu_run accepts), what the keeper said, and a
// candidacy once run_for() is called.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "etcd/client.hpp"
#include "etcd/election.hpp"
#include "etcd/lease_keeper.hpp"

namespace npu_run::testing {

using namespace std::chrono_literals;

struct Candidate {
  // The default timeout is under a third of the TTL: a renewal outlives a dead member. The
  // agents' own is 3 s (etcd::Settings), longer than the TTL.
  Candidate(boost::asio::io_context& io, const std::string& endpoints,
            std::chrono::milliseconds timeout = 700ms)
      : client(io,
               [&] {
                 etcd::Settings s;
                 s.endpoints = etcd::parse_endpoints(endpoints);
                 s.timeout = timeout;
                 return s;
               }()),
        keeper(
            io, client, 2s,
            {[this](int64_t) { granted = true; },
             [this](const std::string& why) {
               lapsing = why;
               ++lapses;
             },
             [this] { ++renewals_after_lapse; }, [this](const std::string& why) { lost = why; }}) {
    keeper.start();
  }
  void run_for(boost::asio::io_context& io, const std::string& name) {
    election = std::make_unique<etcd::Election>(
        io, client, "/job/leader", name, keeper.id(),
        etcd::Election::Handlers{[this](int64_t epoch) { leads = epoch; },
                                 [this](const std::string& who, int64_t epoch) {
                                   follows = who;
                                   followed_epoch = epoch;
                                   ++followed;
                                   if (on_following) on_following();
                                 },
                                 nullptr});
    election->campaign();
  }
  etcd::Client client;
  etcd::LeaseKeeper keeper;
  std::unique_ptr<etcd::Election> election;
  bool granted = false;
  std::optional<std::string> lapsing;
  int lapses = 0;
  int renewals_after_lapse = 0;
  std::optional<std::string> lost;
  int64_t leads = 0;
  std::string follows;
  int64_t followed_epoch = 0;
  int followed = 0;
  std::function<void()> on_following;  // after each call of the `following` handler
};

}  // namespace npu_run::testing
