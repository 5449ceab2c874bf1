#include "support/etcd_cluster.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <csignal>
#include <optional>
#include <set>

#include "etcd/client.hpp"
#include "etcd/member_probe.hpp"
#include "etcd/tls_context.hpp"
#include "support/fixtures.hpp"
#include "support/run_until.hpp"

namespace npu_run::testing {

namespace {

constexpr const char* kEtcd = "/usr/bin/etcd";

}  // namespace

std::string EtcdCluster::etcd_data_base() {
  return "/dev/shm/npu_run_etcd";
}

EtcdCluster::EtcdCluster(int members, const TestCa* tls) : tls_(tls), dir_(etcd_data_base()) {
  if (::access(kEtcd, X_OK) != 0)
    FAIL("etcd is not installed (" << kEtcd << "): run scripts/install_deps.sh");
  // Ports are picked free and bound by etcd a moment later: another test may take one in
  // between. Such a start is made again, on other ports and with fresh data.
  for (attempt_ = 0;; ++attempt_) {
    members_.clear();
    initial_cluster_.clear();
    // unused_port() may return a port it returned a moment ago: each port of the cluster once.
    std::set<int> taken;
    const auto distinct_port = [&taken] {
      int port = unused_port();
      while (!taken.insert(port).second) port = unused_port();
      return port;
    };
    for (int i = 0; i < members; ++i) {
      const int client = distinct_port();
      members_.push_back(Member{fmt::format("e{}", i), client, distinct_port(), 0});
    }
    for (const Member& m : members_) {
      initial_cluster_ += fmt::format("{}{}=http://127.0.0.1:{}",
                                      initial_cluster_.empty() ? "" : ",", m.name, m.peer);
    }
    for (int i = 0; i < members; ++i) start(i);
    const std::string stuck = wait_until_ready(std::chrono::seconds(30));
    if (stuck.empty()) return;
    for (int i = 0; i < members; ++i) kill(i);
    if (stuck.find("address already in use") == std::string::npos || attempt_ == 2) FAIL(stuck);
  }
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < static_cast<int>(members_.size()); ++i) kill(i);
}

std::string EtcdCluster::endpoints() const {
  std::string out;
  for (const Member& m : members_)
    out +=
        fmt::format("{}{}127.0.0.1:{}", out.empty() ? "" : ",", tls_ ? "https://" : "", m.client);
  return out;
}

etcd::Settings EtcdCluster::client_settings(int member) const {
  etcd::Settings settings;
  for (int i = 0; i < static_cast<int>(members_.size()); ++i) {
    if (member >= 0 && i != member) continue;
    settings.endpoints.push_back(
        etcd::Endpoint{"127.0.0.1", static_cast<uint16_t>(members_[static_cast<size_t>(i)].client),
                       tls_ != nullptr});
  }
  if (tls_) {
    settings.tls = etcd::make_tls_context({tls_->ca(), tls_->client_cert(), tls_->client_key()});
  }
  return settings;
}

std::string EtcdCluster::member_file(const Member& m, const char* suffix) const {
  return dir_.file(fmt::format("{}.{}{}", m.name, attempt_, suffix));
}

std::string EtcdCluster::log(int member) const {
  return read_file(member_file(members_.at(static_cast<size_t>(member)), ".log"));
}

void EtcdCluster::start(int member) {
  Member& m = members_.at(static_cast<size_t>(member));
  const std::string client = fmt::format("{}://127.0.0.1:{}", tls_ ? "https" : "http", m.client);
  const std::string peer = fmt::format("http://127.0.0.1:{}", m.peer);
  std::vector<std::string> args = {kEtcd,
                                   "--name",
                                   m.name,
                                   "--data-dir",
                                   member_file(m, ".data"),
                                   "--listen-client-urls",
                                   client,
                                   "--advertise-client-urls",
                                   client,
                                   "--listen-peer-urls",
                                   peer,
                                   "--initial-advertise-peer-urls",
                                   peer,
                                   "--initial-cluster",
                                   initial_cluster_,
                                   "--initial-cluster-state",
                                   "new",
                                   "--initial-cluster-token",
                                   fmt::format("{}.{}", dir_.path(), attempt_)};
  if (tls_) {
    args.insert(args.end(), {"--cert-file", tls_->server_cert(), "--key-file", tls_->server_key(),
                             "--trusted-ca-file", tls_->ca(), "--client-cert-auth"});
  }
  const std::string log_file = member_file(m, ".log");
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(kEtcd, argv.data());
    ::_exit(127);
  }
  m.pid = pid;
}

void EtcdCluster::kill(int member) {
  Member& m = members_.at(static_cast<size_t>(member));
  if (m.pid <= 0) return;
  ::kill(m.pid, SIGKILL);
  ::waitpid(m.pid, nullptr, 0);
  m.pid = 0;
}

void EtcdCluster::freeze(int member) {
  const Member& m = members_.at(static_cast<size_t>(member));
  if (m.pid > 0) ::kill(m.pid, SIGSTOP);
}

void EtcdCluster::thaw(int member) {
  const Member& m = members_.at(static_cast<size_t>(member));
  if (m.pid > 0) ::kill(m.pid, SIGCONT);
}

// The member whose status names itself as the leader (etcd/member_probe.hpp asks them all).
int EtcdCluster::leader() const {
  const auto probes = etcd::probe_members(client_settings(), std::chrono::seconds(2));
  for (size_t i = 0; i < probes.size(); ++i) {
    if (probes[i].leader) return static_cast<int>(i);
  }
  return -1;
}

// Ready once a write through every member in turn succeeds (a leader is elected): "", else
// which member never took one, with its log.
std::string EtcdCluster::wait_until_ready(std::chrono::milliseconds limit) const {
  boost::asio::io_context io;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int i = 0; i < static_cast<int>(members_.size()); ++i) {
    const Member& m = members_[static_cast<size_t>(i)];
    etcd::Settings settings = client_settings(i);
    settings.timeout = std::chrono::milliseconds(500);
    etcd::Client client(io, settings);
    bool ready = false;
    while (!ready && std::chrono::steady_clock::now() < deadline) {
      std::optional<etcd::Reply> reply;
      client.call("/v3/kv/put", etcd::put_request("/npu_run_test/ready", m.name),
                  [&](etcd::Reply r) { reply = std::move(r); });
      run_until(
          io, [&] { return reply.has_value(); }, std::chrono::seconds(2));
      ready = reply && std::holds_alternative<etcd::Json>(*reply);
      if (!ready) ::usleep(100 * 1000);
    }
    if (!ready) {
      return fmt::format("etcd member {} never took a write; its log:\n{}", m.name,
                         read_file(member_file(m, ".log")));
    }
  }
  return "";
}

}  // namespace npu_run::testing
