// The value of an etcd rendezvous' leader key (agent/link/etcd_rendezvous.cpp): where the elected
// agent serves the rendezvous, and which agent it is. Written by the leader, read by the
// others; pure.
#pragma once

#include <optional>
#include <string>

namespace npu_run {

struct LeaderAddress {
  std::string addr;
  int port = 0;
};

// {"addr", "port", "host", "pid"} as JSON; `host` and this process' pid name the agent.
std::string leader_value(const LeaderAddress& at, const std::string& host);
// The address in a leader key's value; nothing when it is not one npu_run wrote.
std::optional<LeaderAddress> leader_address(const std::string& value);

}  // namespace npu_run
