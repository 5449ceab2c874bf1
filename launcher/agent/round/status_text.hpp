// How `npu_run status` prints a job: a few lines per node, one per rank with its last beat and
// its age, what the round still waits for, and the root cause once there is one; or the JSON;
// with --dump, what every rank's records showed.
#pragma once

#include <string>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run {

std::string format_job_status(const rdzv::JobStatus& status);
// `npu_run status --dump`'s part (agent/hangs/dump_text.cpp).
std::string format_job_dump(const rdzv::JobDump& dump);

// The status as one JSON object (the rendezvous' answer without its message fields), with a
// trailing newline.
std::string job_status_json(const rdzv::JobStatus& status);

}  // namespace npu_run
