#include "rendezvous/protocol/job_memory.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "rendezvous/protocol/json_fields.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/protocol/wire_parts.hpp"

namespace npu_run::rdzv {

namespace {

// The hosts a job took out are few; a memory naming more is not one this job wrote.
constexpr size_t kMaxLedgeredHosts = 65'536;

}  // namespace

json to_json(const JobMemory& m) {
  json j{{"round", m.round},
         {"round_running", m.round_running},
         {"finished", m.finished},
         {"restart_count", m.restart_count},
         {"charged_restarts", m.charged_restarts},
         {"no_progress_restarts", m.no_progress_restarts},
         {"command", m.command},
         {"ledgered_hosts", m.ledgered_hosts},
         {"leader_host", m.leader_host}};
  if (m.previous_failure) j["previous_failure"] = to_json(*m.previous_failure);
  json seats = json::array();
  for (const SeatHolder& s : m.seats) {
    seats.push_back(
        {{"agent", s.agent}, {"host", s.host}, {"affinity", s.affinity}, {"nproc", s.nproc}});
  }
  j["seats"] = std::move(seats);
  return j;
}

JobMemory memory_from(const json& j) {
  try {
    const Fields f(j, "the job's memory");
    JobMemory m;
    m.round = static_cast<uint64_t>(f.integer("round", 0, INT64_MAX));
    m.round_running = f.boolean("round_running");
    m.finished = f.boolean("finished");
    m.restart_count = static_cast<int>(f.integer("restart_count", 0, INT32_MAX));
    m.charged_restarts = static_cast<int>(f.integer("charged_restarts", 0, INT32_MAX));
    m.no_progress_restarts = static_cast<int>(f.integer("no_progress_restarts", 0, INT32_MAX));
    m.command = f.text("command", Limits::kMaxText, false);
    for (const json& host : f.array("ledgered_hosts", kMaxLedgeredHosts, false)) {
      if (!host.is_string() || host.get_ref<const std::string&>().size() > Limits::kMaxName)
        f.fail("'ledgered_hosts' holds something other than a host name");
      m.ledgered_hosts.insert(host.get<std::string>());
    }
    m.leader_host = f.text("leader_host", Limits::kMaxName, false);
    if (const json* failure = f.find("previous_failure"))
      m.previous_failure = failure_from(*failure);
    for (const json& seat : f.array("seats", kMaxRememberedSeats, false)) {
      const Fields s(seat, "a seat of the job's memory");
      m.seats.push_back(SeatHolder{s.text("agent", Limits::kMaxName, false),
                                   s.text("host", Limits::kMaxName, false),
                                   s.text("affinity", Limits::kMaxName, false),
                                   static_cast<int>(s.integer("nproc", 1, INT32_MAX))});
    }
    return m;
  } catch (const BadMessage& e) {
    throw std::invalid_argument(e.message);
  } catch (const json::exception& e) {
    throw std::invalid_argument(fmt::format("the job's memory: {}", e.what()));
  }
}

JobMemory successor_memory(JobMemory memory, int64_t wall_ms) {
  if (!memory.round_running) return memory;
  ++memory.round;
  ++memory.restart_count;  // a lost node's restart: the job goes on without it, or a spare
  memory.round_running = false;
  FailureReport lost;
  lost.host = memory.leader_host;
  lost.node_rank = 0;
  lost.exit_code = 125;
  lost.lost = true;
  lost.time_ms = wall_ms;
  lost.description = fmt::format("the rendezvous leader on {} was lost", memory.leader_host);
  memory.previous_failure = lost;
  return memory;
}

}  // namespace npu_run::rdzv
