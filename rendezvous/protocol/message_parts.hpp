// The parts that several rendezvous messages share (rendezvous/protocol/messages.hpp): a rank's
// stack at a hang, what an agent says of its node, and a failure with what the node saw of it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "basics/topology_path.hpp"

namespace npu_run::rdzv {

// One collective as a rank's flight recorder held it at a hang
// (rendezvous/state/collective_blame.hpp).
struct RecordedCall {
  int64_t seq = 0;      // its sequence number in its process group, from 1
  std::string op;       // "all_reduce" (the backend's "gloo:" dropped)
  std::string sizes;    // the input sizes: "[[4096]]"
  std::string dtypes;   // "Float"
  int64_t age_ms = -1;  // from its call to the moment the record was taken
  bool completed = false;
};

// What one rank's recorder said of one process group.
struct GroupCalls {
  std::string group;                 // "default_pg", or the group's description or name
  int64_t entered = 0;               // the last collective it called (0: none)
  int64_t completed = 0;             // the last that completed
  std::vector<RecordedCall> last{};  // its last calls, oldest first, at most kMaxRecordedCalls
};

// How a rank's record was taken at a hang.
enum class RankRecord {
  kSignal,  // no worker server: SIGABRT and faulthandler (torch 1.13, not Python)
  kServer,  // its worker server answered (frames and, with a flight recorder, `groups`)
  kSilent,  // it has a worker server that answered nothing in time: stopped, or holding the GIL
};

// Where one rank was when a hang's stacks were dumped (Report::stacks): what the rendezvous
// compares across the job to find the odd one out (rendezvous/state/hang_blame.hpp).
struct RankStack {
  int rank = 0;
  int local_rank = 0;
  int pid = -1;
  // The innermost frames of its signalled thread ("train.py:88 in wait_for_data"), or, for a
  // worker that is not Python, the kernel's ("(kernel) hrtimer_nanosleep"). Never empty.
  std::vector<std::string> frames;
  std::string last_beat;    // the text of its last progress beat; empty if it never beat
  int64_t silence_ms = -1;  // from its last beat to the dump; -1 if it never beat
  RankRecord record = RankRecord::kSignal;
  bool recorder = false;             // a flight recorder answered (even with no group yet)
  std::vector<GroupCalls> groups{};  // at most Limits::kMaxRecordedGroups
};

// What one agent tells the server about its node.
struct NodeInfo {
  std::string host;                     // host name, for people
  std::string addr;                     // address peers use to reach this node
  int nproc = 1;                        // workers on this node
  std::vector<int> devices;             // physical device id per local rank
  std::vector<std::string> device_ips;  // per local rank, for rank tables (may be empty)
  int worker_port = 0;                  // port this agent holds for MASTER_PORT if it is node 0
  TopologyPath topology{};  // where it sits in the network (agent/health/topology_probe.hpp)
};

// What the node saw of a failure beyond its exit, for the restart classification
// (rendezvous/state/failure_class.hpp). Each text is cut to Limits::kMaxEvidenceText.
struct FailureEvidence {
  std::string fault;      // a device or link fault the worker named (health/fault_patterns.hpp)
  std::string exception;  // the Python exception's type: "ValueError"
  std::string frame;      // where it was raised: "train.py:88 in step"
  std::string last_beat;  // the text of the failed rank's last progress beat; empty: none
  // Without a Python exception: the last line the rank printed on stderr ("No module named x"),
  // which tells one failure from another as a traceback does. Empty from agents before it.
  std::string last_line;
  bool early = false;  // it failed within --startup-window of its start
  bool usage = false;  // argparse refused its command line
  bool oom = false;    // the kernel's OOM killer killed it
};

// The first failure of a round, as every node will print it.
struct FailureReport {
  std::string host;
  int node_rank = -1;
  int rank = -1;  // global rank of the worker; -1 when a whole node failed
  int local_rank = -1;
  int pid = -1;
  int exit_code = 1;          // what npu_run exits with because of this failure
  std::string description;    // "exit code 3", "signal SIGKILL (9)", "agent lost: ..."
  std::string error_message;  // from the worker's error file, if any
  int64_t time_ms = 0;        // wall clock (ms since the epoch) when it failed
  // The worker raised, then npu_run stopped it while it was still exiting: exit_code is not its
  // own, and the job keeps the exit code of the failure that was reported first.
  bool stopped_after_error = false;
  // The worker hung (--hang-timeout, --exit-timeout): the other nodes dump their workers'
  // stacks (SIGABRT) as they stop them, so that every rank shows where it was.
  bool hang = false;
  bool lost = false;  // the whole node was lost: its connection closed or its heartbeats stopped
  FailureEvidence evidence{};
};

}  // namespace npu_run::rdzv
