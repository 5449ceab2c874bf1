// A rendezvous server and its agents on 127.0.0.1 inside the test's process: the server's
// options and an agent's join that the integration cases of the server, its sessions and its
// pauses share.
#pragma once

#include <chrono>
#include <string>

#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/server/server_options.hpp"

namespace npu_run::testing {

// Any free port on loopback; agents still connected 5 s after the job's end are let go.
inline rdzv::ServerOptions loopback_server() {
  rdzv::ServerOptions o;
  o.bind_addr = "127.0.0.1";
  o.port = 0;
  o.exit_barrier_timeout = std::chrono::seconds(5);
  return o;
}

// A join of one device from `host`, for a job of `nodes`.
inline rdzv::Join loopback_join(const std::string& host, int nodes = 2) {
  rdzv::Join j;
  j.node.host = host;
  j.node.addr = "127.0.0.1";
  j.node.devices = {0};
  j.node.worker_port = 40001;
  j.min_nodes = j.max_nodes = nodes;
  return j;
}

}  // namespace npu_run::testing
