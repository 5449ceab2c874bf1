// One worker's process on its own, without the group's policy: spawn, output to its log file,
// the decoding of its end, every way it cannot start, and no process left behind.
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <catch2/catch.hpp>
#include <cerrno>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/temp_dir.hpp"
#include "workers/child_exits.hpp"
#include "workers/worker_process.hpp"

namespace test_worker_process {

using namespace npu_run;
using Catch::Matchers::Contains;
using npu_run::testing::TempDir;
using namespace std::chrono_literals;

namespace {

WorkerSpec shell_worker(const std::string& script, const std::string& log_dir) {
  WorkerSpec spec;
  spec.local_rank = 1;
  spec.global_rank = 5;
  spec.program = "/bin/sh";
  spec.argv = {"-c", script};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  spec.log_dir = log_dir;
  spec.out.sink = StreamSink::kFile;
  spec.out.to_console = false;
  spec.out.file = log_dir + "/stdout.log";
  spec.err.sink = StreamSink::kFile;
  spec.err.to_console = false;
  spec.err.file = log_dir + "/stderr.log";
  return spec;
}

// Spawns `process`, waits for its end through ChildExits and records it.
void run_to_end(boost::asio::io_context& io, WorkerProcess& process) {
  boost::asio::io_context spawn_context;
  REQUIRE(process.spawn(spawn_context, nullptr));
  REQUIRE(process.running());
  ChildExits exits(io);
  bool ended = false;
  exits.watch(process.pid(), [&](boost::system::error_code ec, int status) {
    process.ended(ec, status, false, nullptr);
    ended = true;
  });
  boost::asio::steady_timer deadline(io);
  deadline.expires_after(10s);
  deadline.async_wait([&](boost::system::error_code) { io.stop(); });
  while (!ended && !io.stopped()) io.run_one();
  REQUIRE(ended);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("worker process: runs in its log directory's files and reports its exit code",
          "[integration][workers]") {
  TempDir dir;
  boost::asio::io_context io;
  WorkerProcess process(io, shell_worker("echo out; echo err >&2; exit 3", dir.file("rank1")));
  run_to_end(io, process);
  bool settled = false;
  process.settle([&settled] { settled = true; });
  while (!settled && io.run_one() > 0) {
  }
  REQUIRE(settled);
  const WorkerOutcome& outcome = process.outcome();
  CHECK_FALSE(process.running());
  CHECK(outcome.status.as_exit_code() == 3);
  CHECK(outcome.local_rank == 1);
  CHECK(outcome.global_rank == 5);
  CHECK(outcome.start_error.empty());
  CHECK(read_file(dir.file("rank1/stdout.log")) == "out\n");
  CHECK(read_file(dir.file("rank1/stderr.log")) == "err\n");
}

TEST_CASE("worker process: a log directory it cannot create means it never starts",
          "[integration][workers]") {
  TempDir dir;
  dir.write("plain-file", "not a directory");
  boost::asio::io_context io;
  boost::asio::io_context spawn_context;
  WorkerProcess process(io, shell_worker("exit 0", dir.file("plain-file/rank1")));
  CHECK_FALSE(process.spawn(spawn_context, nullptr));
  CHECK_FALSE(process.running());
  CHECK(process.pid() == -1);
  CHECK_THAT(process.outcome().start_error, Contains("cannot create " + dir.file("plain-file")));
  CHECK(process.outcome().status.describe() == "not started: Not a directory");
  CHECK(process.outcome().status.as_exit_code() == 126);  // could not be run, not missing
}

TEST_CASE("worker process: an exec that fails is read from the exec report",
          "[integration][workers]") {
  TempDir dir;
  const std::string program = dir.write("not-a-program", "\x7f garbage\n", true);
  boost::asio::io_context io;
  WorkerSpec spec = shell_worker("", dir.file("rank1"));
  spec.program = program;
  spec.argv.clear();
  WorkerProcess process(io, std::move(spec));
  run_to_end(io, process);
  CHECK(process.outcome().status.as_exit_code() == 126);
  CHECK(process.outcome().start_error == "cannot execute " + program + ": Exec format error");
}

TEST_CASE("worker process: destroyed while running, it takes its process group along",
          "[integration][workers]") {
  TempDir dir;
  boost::asio::io_context io;
  boost::asio::io_context spawn_context;
  pid_t pid = -1;
  {
    WorkerProcess process(io, shell_worker("sleep 60 & sleep 60", dir.file("rank1")));
    REQUIRE(process.spawn(spawn_context, nullptr));
    pid = process.pid();
  }
  // The group is gone within a moment: kill(-pgid, 0) fails with ESRCH once nobody is left
  // (the zombie leader is reaped here, since no ChildExits watches it).
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    (void)::waitpid(pid, nullptr, WNOHANG);
    gone = ::kill(-pid, 0) != 0 && errno == ESRCH;
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  CHECK(gone);
}

}  // namespace test_worker_process
