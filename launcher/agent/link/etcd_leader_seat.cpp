#include "agent/link/etcd_leader_seat.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

namespace npu_run {

EtcdLeaderSeat::~EtcdLeaderSeat() = default;

void EtcdLeaderSeat::open(const ElectedHost& at, int64_t epoch) {
  if (server_) retire();
  server_ = host_elected_rendezvous(io_, cfg_, store_, at);
  if (at.resume) {
    spdlog::warn(
        "etcd elected this agent to lead the rendezvous after {} (epoch {}): serving "
        "on {}:{}, the job continues with round {} (restart {})",
        at.resume->leader_host.empty() ? "the last leader" : at.resume->leader_host, epoch, at.addr,
        at.port, at.resume->round, at.resume->restart_count);
  } else {
    spdlog::info("etcd elected this agent to lead the rendezvous (epoch {}): serving on {}:{}",
                 epoch, at.addr, at.port);
  }
  if (job_ended_) server_->on_job_ended(job_ended_);
  if (hosting_) hosting_(*server_);
}

// The agent's run holds the retired server until the next hosted one replaces it there, and its
// handlers may be on the stack: the one retired before it goes, from the loop.
void EtcdLeaderSeat::retire() {
  if (!server_) return;
  server_->stop();
  if (retired_) boost::asio::post(io_, [old = std::shared_ptr(std::move(retired_))] {});
  retired_ = std::move(server_);
}

}  // namespace npu_run
