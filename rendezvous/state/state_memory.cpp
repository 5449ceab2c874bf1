// The job's memory (rendezvous/protocol/job_memory.hpp): taken from the state, and given to a new
// one.
#include <algorithm>

#include "rendezvous/state/state.hpp"

namespace npu_run::rdzv {

size_t RendezvousState::clients_reaching_etcd(Clock::time_point since) const {
  size_t n = 0;
  for (const auto& [id, client] : clients_) n += client.etcd_ok_at && *client.etcd_ok_at >= since;
  return n;
}

JobMemory RendezvousState::memory() const {
  JobMemory m;
  m.round = round_;
  m.round_running = phase_ == Phase::kRunning || phase_ == Phase::kStopping;
  m.finished = phase_ == Phase::kFinished;
  m.restart_count = restart_count_;
  m.charged_restarts = charged_restarts_;
  m.no_progress_restarts = no_progress_restarts_;
  m.previous_failure = phase_ == Phase::kJoining ? previous_failure_ : root_cause_;
  m.command = job_command_;
  m.ledgered_hosts = ledgered_hosts_;
  // The round's seats, or between rounds the last round's.
  if (std::max(members_.size(), last_seats_.size()) <= kMaxRememberedSeats) {
    for (const Member& member : members_) {
      m.seats.push_back(
          SeatHolder{member.agent, member.node.host, member.affinity, member.node.nproc});
    }
    if (members_.empty()) {
      for (const SeatMemory& seat : last_seats_)
        m.seats.push_back(SeatHolder{seat.agent, seat.host, seat.affinity, seat.nproc});
    }
  }
  return m;
}

void RendezvousState::resume(const JobMemory& m) {
  round_ = m.round;
  restart_count_ = m.restart_count;
  charged_restarts_ = m.charged_restarts;
  no_progress_restarts_ = m.no_progress_restarts;
  previous_failure_ = m.previous_failure;
  if (!m.command.empty()) job_command_ = m.command;
  ledgered_hosts_.insert(m.ledgered_hosts.begin(), m.ledgered_hosts.end());
  // The seats as the lost leader left them: each goes back to its agent when it joins, and the
  // lost ones' to spares like their holders (best_spare_for).
  last_seats_.clear();
  resumed_seats_.clear();
  for (size_t rank = 0; rank < m.seats.size(); ++rank) {
    const SeatHolder& s = m.seats[rank];
    last_seats_.push_back(SeatMemory{s.host, s.affinity, s.nproc, s.agent});
    if (!s.agent.empty()) resumed_seats_.emplace(s.agent, static_cast<int>(rank));
  }
}

}  // namespace npu_run::rdzv
