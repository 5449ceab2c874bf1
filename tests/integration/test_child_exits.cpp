// ChildExits with real children, through both mechanisms on this kernel: the pidfd of Linux
// 5.3+ and the SIGCHLD + waitpid fallback of older kernels must report the same exits.
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <catch2/catch.hpp>
#include <csignal>
#include <map>

#include "workers/child_exits.hpp"

namespace test_child_exits {

using npu_run::ChildExits;
using namespace std::chrono_literals;

namespace {

// A child that exits with `code`, or raises `sig`, once `delay` has passed.
pid_t spawn_child(int code, int sig = 0, std::chrono::milliseconds delay = 0ms) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (delay > 0ms) ::usleep(static_cast<useconds_t>(delay.count() * 1000));
    if (sig != 0) {
      (void)::signal(sig, SIG_DFL);
      (void)::raise(sig);
    }
    ::_exit(code);
  }
  return pid;
}

// Runs the io_context until `done` or 10 s; fails the test on the deadline.
template <typename Done>
void run_until(boost::asio::io_context& io, Done done) {
  boost::asio::steady_timer deadline(io);
  deadline.expires_after(10s);
  deadline.async_wait([&](boost::system::error_code ec) {
    if (!ec) io.stop();
  });
  while (!done() && !io.stopped()) io.run_one();
  REQUIRE(done());
}

}  // namespace

TEST_CASE("child exits: exit codes and signals arrive through either mechanism",
          "[integration][child-exits]") {
  const auto mechanism = GENERATE(ChildExits::Mechanism::kPidfd, ChildExits::Mechanism::kSigchld);
  INFO(npu_run::to_string(mechanism));
  boost::asio::io_context io;
  ChildExits exits(io, mechanism);
  CHECK(exits.mechanism() == mechanism);

  std::map<pid_t, int> statuses;
  const pid_t three = spawn_child(3, 0, 50ms);
  const pid_t killed = spawn_child(0, SIGKILL, 20ms);
  const pid_t zero = spawn_child(0);
  for (pid_t pid : {three, killed, zero}) {
    exits.watch(pid, [&statuses, pid](boost::system::error_code ec, int status) {
      CHECK_FALSE(ec);
      CHECK(statuses.count(pid) == 0);  // once only
      statuses[pid] = status;
    });
  }
  run_until(io, [&] { return statuses.size() == 3; });
  CHECK(WIFEXITED(statuses[three]));
  CHECK(WEXITSTATUS(statuses[three]) == 3);
  CHECK(WIFSIGNALED(statuses[killed]));
  CHECK(WTERMSIG(statuses[killed]) == SIGKILL);
  CHECK(WIFEXITED(statuses[zero]));
  CHECK(WEXITSTATUS(statuses[zero]) == 0);
  // Reaped: nothing of them is left to wait for.
  CHECK(::waitpid(three, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}

TEST_CASE("child exits: simultaneous exits and one already over are all reported",
          "[integration][child-exits]") {
  const auto mechanism = GENERATE(ChildExits::Mechanism::kPidfd, ChildExits::Mechanism::kSigchld);
  INFO(npu_run::to_string(mechanism));
  boost::asio::io_context io;
  ChildExits exits(io, mechanism);

  // Exited (a zombie) before anyone watched: its SIGCHLD went to nobody.
  const pid_t early = spawn_child(7);
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(early), &info, WEXITED | WNOWAIT) == 0);

  // Many exits at once: SIGCHLDs merge, every child must still be reaped.
  std::map<pid_t, int> statuses;
  std::vector<pid_t> pids = {early};
  for (int i = 0; i < 32; ++i) pids.push_back(spawn_child(i, 0, 30ms));
  for (pid_t pid : pids) {
    exits.watch(pid, [&statuses, pid](boost::system::error_code ec, int status) {
      CHECK_FALSE(ec);
      statuses[pid] = status;
    });
  }
  run_until(io, [&] { return statuses.size() == pids.size(); });
  CHECK(WEXITSTATUS(statuses[early]) == 7);
  for (int i = 0; i < 32; ++i) CHECK(WEXITSTATUS(statuses[pids[static_cast<size_t>(i) + 1]]) == i);
}

TEST_CASE("child exits: a forgotten child is not reaped and its handler never runs",
          "[integration][child-exits]") {
  const auto mechanism = GENERATE(ChildExits::Mechanism::kPidfd, ChildExits::Mechanism::kSigchld);
  INFO(npu_run::to_string(mechanism));
  boost::asio::io_context io;
  ChildExits exits(io, mechanism);
  bool forgotten_reported = false;
  bool other_reported = false;
  const pid_t forgotten = spawn_child(5, 0, 20ms);
  const pid_t other = spawn_child(0, 0, 60ms);
  exits.watch(forgotten, [&](boost::system::error_code, int) { forgotten_reported = true; });
  exits.watch(other, [&](boost::system::error_code, int) { other_reported = true; });
  exits.forget(forgotten);
  run_until(io, [&] { return other_reported; });
  CHECK_FALSE(forgotten_reported);
  int status = 0;
  CHECK(::waitpid(forgotten, &status, 0) == forgotten);  // still ours to reap
  CHECK(WEXITSTATUS(status) == 5);
}

}  // namespace test_child_exits
