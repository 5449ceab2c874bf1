// Whether each etcd member answers, asked all at once with one deadline: what `--dry-run` and
// `npu_run doctor` say before a job relies on etcd. Any HTTP answer counts (a member that
// refuses the request still answers); the status call also says which member is etcd's leader.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "etcd/client.hpp"

namespace npu_run::etcd {

struct MemberProbe {
  std::string member;  // "host:port"
  bool answers = false;
  bool leader = false;  // the member raft elected
  std::string detail;   // "etcd 3.4.23", what it answered, or why it did not
};

// On an io_context of its own; returns within `timeout` and a little.
std::vector<MemberProbe> probe_members(const Settings& settings, std::chrono::milliseconds timeout);

// "127.0.0.1:2379 answers (etcd 3.4.23, its leader), 127.0.0.1:2381 does not (Connection refused)"
std::string describe_probes(const std::vector<MemberProbe>& probes);

}  // namespace npu_run::etcd
