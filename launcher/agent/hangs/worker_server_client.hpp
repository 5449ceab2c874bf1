// Asking the workers what they are doing without stopping them: torch's worker server (torch 2.5
// and later; torch.distributed.elastic.control_plane), which npu_run's sitecustomize starts in
// every Python worker at the path in NPU_RUN_WORKER_SERVER (agent/rooms/python_hooks_room.cpp),
// answers HTTP over a Unix socket from a thread of its own, so it answers while the main thread is
// stuck in a collective. Its handlers take POST: `fr_trace_json` (the flight recorder's entries and
// each process group's sequence numbers) and `dump_traceback` (faulthandler's text of every
// thread). A worker without the server (torch 1.13, not Python) refuses the connection at once;
// one that is stuck entirely is cut off at the deadline. REFERENCE.md section 13.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace npu_run {

// The variable that tells a worker where to serve.
inline constexpr const char* kWorkerServerVariable = "NPU_RUN_WORKER_SERVER";

// <directory>/ws<local rank>: in the agent's private directory, short enough for sun_path.
std::string worker_server_path(const std::string& directory, int local_rank);

// What one worker's server answered; a text is empty when that handler did not answer.
struct WorkerAnswer {
  int local_rank = 0;
  std::string fr_trace_json;
  std::string traceback;
  std::string error;  // why not everything answered ("Connection refused", "no answer in 3000 ms")
  bool connected = false;  // a server took the connection (it exists, answering or not)
  bool answered() const { return !traceback.empty(); }
};

struct WorkerServerAsk {
  int local_rank = 0;
  std::string path;
};

// Bounds on what a worker may send: a full recorder of 2,000 entries with their frames is a few
// megabytes; more is a misbehaving worker, whose connection is closed.
inline constexpr size_t kMaxWorkerAnswer = size_t{32} * 1024 * 1024;

// Asks every worker at once, each first for its recorder's entries and then its stacks, and calls
// `done` once with every answer (in the order asked) when all have answered or at `deadline`,
// whichever comes first. Safe if the caller is gone by then: the asking owns itself, and `done`
// is the caller's to guard.
void ask_worker_servers(boost::asio::io_context& io, const std::vector<WorkerServerAsk>& workers,
                        std::chrono::milliseconds deadline,
                        std::function<void(std::vector<WorkerAnswer>)> done);

// As ask_worker_servers, for each recorder's entries only: the straggler watch's samples
// (agent/rooms/straggler_room.cpp), which need no stacks.
void ask_worker_recorders(boost::asio::io_context& io, const std::vector<WorkerServerAsk>& workers,
                          std::chrono::milliseconds deadline,
                          std::function<void(std::vector<WorkerAnswer>)> done);

}  // namespace npu_run
