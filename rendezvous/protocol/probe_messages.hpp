// The pre-flight probe on the wire (--preflight; rendezvous/state/probe_run.hpp decides): before a
// round forms, the rendezvous asks each node for its part of a step (ProbeRequest) and waits for
// every asked node's answer (ProbeReport). Figures travel as whole microseconds.
#pragma once

#include <cstdint>
#include <string>

namespace npu_run::rdzv {

// This node's part of one step of the probe: its devices' matmul (the first step only) and an
// all_gather with the other nodes of its group, each node one process of torch's group.
struct ProbeRequest {
  uint64_t run = 0;   // answers to an older run, which a leaving node cut short, are dropped
  int step = 1;       // 1: neighbours; 2: each suspect with a good node; 3: the whole group
  std::string group;  // unique in the job ("4.2.1": run, step, group): the store's key prefix
  int rank = 0;       // this node's place in the group: 0 hosts torch's store if nobody serves one
  int size = 1;       // nodes in the group
  int asked = 1;      // nodes asked in this step, all groups (they start timing together)
  // The group's first node: its address and held port, where its probe serves torch's store
  // when npu_run serves none (--worker-store torch); the agent uses the job's store otherwise.
  std::string store_addr;
  int store_port = 0;
  bool matmul = false;  // measure the devices' matmul too
  bool full = false;    // --preflight full's sizes
  int timeout_ms = 0;   // the probe's bound: past it, the node answers that it failed
};

struct ProbeReport {
  uint64_t run = 0;       // the ProbeRequest's
  int64_t matmul_us = 0;  // the slowest device's matmul; 0: not measured
  int64_t gather_us = 0;  // the all_gather, per repeat
  bool failed = false;    // it raised, or ran past the bound
  std::string detail;     // why it failed, or what it ran on ("cpu, gloo")
};

}  // namespace npu_run::rdzv
