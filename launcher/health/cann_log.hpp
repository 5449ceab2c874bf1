// What HCCL wrote in a rank's CANN logs (plogs) about a failed collective, read for the link or
// rank at fault. CANN writes each process's host log to
// <ASCEND_PROCESS_LOG_PATH>/debug/plog/plog-<pid>_<timestamp>.log, one line per record:
//   [ERROR] HCCL(<pid>,<process>):YYYY-MM-DD-HH:MM:SS.mmm.uuu [file.cc:line][tid]message
// The signatures (CANN's documentation, MindCluster FaultDiag's knowledge base; REFERENCE.md
// section 13), most telling first:
//  - `wait socket establish timeout, role[R] rank[N] timeout[T]` and its `LINK_ERROR_INFO`
//    table (`dest_ip(user_rank) | dest_port | src_ip | src_port | MyRole | Status | TlsStatus`);
//  - `topo exchange server get socket timeout` with `total connected num is [K]` and the ranks
//    that did connect: the others never reached the root;
//  - a `TaskExceptionHandler` record of a `taskType[Notify Wait]` with its `remote rank:[R]`;
//  - `cqe error status[12] remoteIP:[...]` (RDMA retries exhausted), `status[LOST] by rank`;
//  - `Wait timeout for sockets recv ... firewall is incorrectly configured`;
//  - the error codes EI0002, EI0006, EI0014, EJ0001, EJ0002, EJ0003.
// Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace npu_run {

// Whose log it is.
struct PlogOwner {
  int rank = 0;
  int device = -1;     // its physical device (hccn_tool's -i); -1 unknown
  int world_size = 0;  // ranks in the job, for those the root never heard from
};

struct CannFinding {
  // "rank 12 could not connect to 10.0.1.13:16666 (rank 13; status: time out, TLS status:
  // mismatch); run `hccn_tool -i 5 -tls -g` on both"
  std::string text;
  std::vector<int> blamed;  // the other ranks it names as at fault (missing, remote)
  int weight = 0;           // how telling: the heaviest finding of a failure is its cause
};

// Each signature `text` holds, heaviest first, one finding per link, missing list or code.
std::vector<CannFinding> read_cann_log(std::string_view text, const PlogOwner& owner);

}  // namespace npu_run
