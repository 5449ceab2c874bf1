// Reading what a worker's server answered at a hang (agent/hangs/worker_server_client.hpp): the
// flight recorder's JSON (torch's `fr_trace_json`, version 2.x: `entries` with `collective_seq_id`,
// `profiling_name`, sizes, dtypes and `time_created_ns`; `pg_status` with each group's
// `last_enqueued_collective` and `last_completed_collective`) into what the rendezvous compares
// across ranks (rendezvous/state/collective_blame.hpp). Pure: tested on torch 2.14's own answers.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "rendezvous/protocol/message_parts.hpp"
#include "rendezvous/protocol/straggler_messages.hpp"

namespace npu_run {

// Each process group the recorder saw a collective of, the default group first, at most
// rdzv::Limits::kMaxRecordedGroups, each with its last rdzv::Limits::kMaxRecordedCalls calls
// aged against `now_ns` (the wall clock, as torch stamps its entries). nullopt: not a recorder's
// answer (torch without one answers an error, or JSON of another shape).
std::optional<std::vector<rdzv::GroupCalls>> recorded_groups(std::string_view fr_trace_json,
                                                             int64_t now_ns);

// The straggler watch's sample (agent/rooms/straggler_room.cpp): the collectives (not p2p) the
// recorder saw entered after `after_ns` (torch's time_created_ns, the wall clock), oldest first,
// each keyed by its group's pg_id and sequence number, as every rank of the group has them.
// nullopt: not a recorder's answer.
struct EnteredCalls {
  std::vector<rdzv::EnteredCall> calls;
  int64_t latest_ns = 0;  // the newest entry's time: the next sample's `after_ns`
};
std::optional<EnteredCalls> entered_calls(std::string_view fr_trace_json, int64_t after_ns);

}  // namespace npu_run
