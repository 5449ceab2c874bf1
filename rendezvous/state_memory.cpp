// The job's memory (rendezvous/job_memory.hpp): taken from the state, and given to a new one.
#include "rendezvous/state.hpp"

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
}

}  // namespace npu_run::rdzv
