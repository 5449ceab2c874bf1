#include "support/etcd_cluster.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <csignal>
#include <optional>

#include "etcd/client.hpp"
#include "support/fixtures.hpp"
#include "support/run_until.hpp"

namespace npu_run::testing {

namespace {

constexpr const char* kEtcd = "/usr/bin/etcd";

}  // namespace

EtcdCluster::EtcdCluster(int members) {
  if (::access(kEtcd, X_OK) != 0)
    FAIL("etcd is not installed (" << kEtcd << "): run scripts/install_deps.sh");
  for (int i = 0; i < members; ++i)
    members_.push_back(Member{fmt::format("e{}", i), unused_port(), unused_port(), 0});
  for (const Member& m : members_) {
    initial_cluster_ += fmt::format("{}{}=http://127.0.0.1:{}", initial_cluster_.empty() ? "" : ",",
                                    m.name, m.peer);
  }
  for (int i = 0; i < members; ++i) start(i);
  wait_until_ready(std::chrono::seconds(30));
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < static_cast<int>(members_.size()); ++i) kill(i);
}

std::string EtcdCluster::endpoints() const {
  std::string out;
  for (const Member& m : members_)
    out += fmt::format("{}127.0.0.1:{}", out.empty() ? "" : ",", m.client);
  return out;
}

std::string EtcdCluster::log(int member) const {
  return read_file(dir_.file(members_.at(static_cast<size_t>(member)).name + ".log"));
}

void EtcdCluster::start(int member) {
  Member& m = members_.at(static_cast<size_t>(member));
  const std::string client = fmt::format("http://127.0.0.1:{}", m.client);
  const std::string peer = fmt::format("http://127.0.0.1:{}", m.peer);
  const std::vector<std::string> args = {kEtcd,
                                         "--name",
                                         m.name,
                                         "--data-dir",
                                         dir_.file(m.name),
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
                                         dir_.path()};
  const std::string log_file = dir_.file(m.name + ".log");
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

// Ready once a write through every member in turn succeeds (a leader is elected).
void EtcdCluster::wait_until_ready(std::chrono::milliseconds limit) const {
  boost::asio::io_context io;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (const Member& m : members_) {
    etcd::Settings settings;
    settings.endpoints = {etcd::Endpoint{"127.0.0.1", static_cast<uint16_t>(m.client), false}};
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
    if (!ready)
      FAIL("etcd member " << m.name << " never took a write; its log:\n"
                          << read_file(dir_.file(m.name + ".log")));
  }
}

}  // namespace npu_run::testing
