// `npu_run status`'s side of the conversation: ask the rendezvous for the job's status on a
// connection of its own (hello, the token's challenge, welcome, "status"), as an agent does
// but without joining; or ask the agent on this host through its status socket. Both wait at
// most `timeout` and say why there is no status instead of throwing.
#pragma once

#include <chrono>
#include <string>
#include <variant>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run::rdzv {

// The status, or why there is none ("cannot connect to 10.0.0.1:29500: Connection refused").
using StatusResult = std::variant<JobStatus, std::string>;

// `dump`: with every running rank's records (rendezvous/protocol/dump_messages.hpp).
StatusResult query_rendezvous_status(const std::string& host, int port, const std::string& run_id,
                                     const std::string& token, std::chrono::milliseconds timeout,
                                     bool dump = false);

// The agent's answer on the Unix socket at `path` (one frame, then EOF).
StatusResult query_agent_status(const std::string& path, std::chrono::milliseconds timeout);

}  // namespace npu_run::rdzv
