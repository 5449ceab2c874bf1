// The rendezvous server an agent etcd elected hosts. Opened when it is elected (resuming the
// job's memory when another agent led before), kept when etcd elects it again after etcd was gone
// for everyone, retired when etcd elected another agent while this one's lease had lapsed: it
// stops serving, and its agent follows the new leader as a member.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "agent/link/rendezvous_host.hpp"
#include "rendezvous/server/server.hpp"

namespace npu_run {

class EtcdLeaderSeat {
 public:
  EtcdLeaderSeat(boost::asio::io_context& io, const LaunchConfig& cfg, store::StoreServer& store)
      : io_(io), cfg_(cfg), store_(store) {}
  ~EtcdLeaderSeat();
  EtcdLeaderSeat(const EtcdLeaderSeat&) = delete;
  EtcdLeaderSeat& operator=(const EtcdLeaderSeat&) = delete;

  // Serves the rendezvous as `at` says and says so; throws std::runtime_error when it cannot.
  void open(const ElectedHost& at, int64_t epoch);
  // Stops serving; the server lives on (its agent's run may still hold it) until the next one.
  void retire();
  void stop() {
    if (server_) server_->stop();
  }
  rdzv::RendezvousServer* server() const { return server_.get(); }

  void on_hosting(std::function<void(rdzv::RendezvousServer&)> hosted) {
    hosting_ = std::move(hosted);
  }
  void on_job_ended(std::function<void(const rdzv::RendezvousState&)> ended) {
    job_ended_ = std::move(ended);
  }

 private:
  boost::asio::io_context& io_;
  const LaunchConfig& cfg_;
  store::StoreServer& store_;
  std::unique_ptr<rdzv::RendezvousServer> server_;
  std::unique_ptr<rdzv::RendezvousServer> retired_;  // stopped: the last leadership's
  std::function<void(rdzv::RendezvousServer&)> hosting_;
  std::function<void(const rdzv::RendezvousState&)> job_ended_;  // for each server it hosts
};

}  // namespace npu_run
