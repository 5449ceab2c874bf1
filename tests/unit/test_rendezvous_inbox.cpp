// The agent's inbox (agent/link/rendezvous_inbox.hpp): each message of the rendezvous to the
// handlers of its type, in the order they registered, and nowhere else.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "agent/link/rendezvous_inbox.hpp"

namespace npu_run {

TEST_CASE("inbox: a message goes to its type's handlers, in the order they registered",
          "[unit][agent]") {
  Inbox inbox;
  std::vector<std::string> heard;
  inbox.on<rdzv::Decision>([&](const rdzv::Decision& d) {
    heard.push_back("agent decision " + std::to_string(d.round));
  });
  inbox.on<rdzv::Standby>([&](const rdzv::Standby& s) {
    heard.push_back("waiting room standby " + std::to_string(s.spares));
  });
  inbox.on<rdzv::Decision>([&](const rdzv::Decision& d) {
    heard.push_back("room decision " + std::to_string(d.round));
  });
  rdzv::Decision decision;
  decision.round = 3;
  inbox.deliver(decision);
  inbox.deliver(rdzv::Standby{4, 2, 1});
  CHECK(heard ==
        std::vector<std::string>{"agent decision 3", "room decision 3", "waiting room standby 1"});
}

TEST_CASE("inbox: a message nobody registered for is dropped", "[unit][agent]") {
  Inbox inbox;
  int decisions = 0;
  inbox.on<rdzv::Decision>([&](const rdzv::Decision&) { ++decisions; });
  inbox.deliver(rdzv::PingVerdict{});
  inbox.deliver(rdzv::ProbeRequest{});
  CHECK(decisions == 0);
  inbox.deliver(rdzv::Decision{});
  CHECK(decisions == 1);
}

}  // namespace npu_run
