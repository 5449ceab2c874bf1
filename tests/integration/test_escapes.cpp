// What npu_run leaves to its workers and what they leave behind: no descriptor of npu_run's
// reaches a worker, and processes that left a worker's process group (a daemon's setsid and
// double fork, start_new_session=True, setpgid) go with the job, whether it succeeds, fails or
// its agent is SIGKILLed. Two nodes on loopback, so that node 0 holds the rendezvous listener
// and every agent a rendezvous connection and the held worker port.
#include <sys/types.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <thread>

#include "support/build_paths.hpp"
#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/process_census.hpp"
#include "support/temp_dir.hpp"

namespace test_escapes {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

const std::string kEscape = std::string(build_paths::kTestData) + "/escapes/escape.py";

std::string escape_script(const std::string& dir, const std::string& how) {
  return "exec \"$PYTHON_EXEC\" " + kEscape + " " + dir + "/pids.$RANK " + how;
}

std::vector<pid_t> escaped_pids(const TempDir& dir, int ranks) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < ranks; ++rank) {
    std::ifstream in(dir.file("pids." + std::to_string(rank)));
    for (pid_t pid = 0; in >> pid;) pids.push_back(pid);
  }
  return pids;
}

// A process that is gone, or dead and waiting to be reaped.
bool alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z' &&
         text[close + 2] != 'X';
}

std::vector<pid_t> still_alive(const std::vector<pid_t>& pids, milliseconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  std::vector<pid_t> left;
  do {
    left.clear();
    for (pid_t pid : pids)
      if (alive(pid)) left.push_back(pid);
    if (left.empty()) break;
    std::this_thread::sleep_for(20ms);
  } while (std::chrono::steady_clock::now() < deadline);
  return left;
}

// Every descriptor from 3 up of `pid` is close-on-exec (fdinfo's flags are octal).
std::vector<std::string> inheritable_descriptors(pid_t pid) {
  std::vector<std::string> found;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fdinfo/";
  for (int fd = 3; fd < 1024; ++fd) {
    std::ifstream in(dir + std::to_string(fd));
    if (!in) continue;
    std::string key;
    std::string value;
    while (in >> key >> value) {
      if (key != "flags:") continue;
      if ((std::stoul(value, nullptr, 8) & 02000000) == 0) found.push_back(std::to_string(fd));
      break;
    }
  }
  return found;
}

void require_none_alive(const std::vector<pid_t>& pids) {
  const auto left = still_alive(pids, 5s);
  INFO(describe_processes(left));
  CHECK(left.empty());
}

}  // namespace

TEST_CASE("escapes: workers inherit no descriptor of npu_run and their escapees end with success",
          "[integration][escapes]") {
  TempDir dir;
  const int port = unused_port();
  auto a = start_node(port, 2, 2, escape_script(dir.path(), "0"));
  auto b = start_node(port, 2, 2, escape_script(dir.path(), "0"));
  const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 60s);
  INFO(done[0].err << "\n----\n" << done[1].err);
  REQUIRE(done[0].exit_code == 0);
  REQUIRE(done[1].exit_code == 0);
  const std::string both = done[0].out + done[1].out;
  for (int rank = 0; rank < 4; ++rank)
    CHECK_THAT(both, Contains("rank " + std::to_string(rank) + " inherited: []"));
  const auto pids = escaped_pids(dir, 4);
  CHECK(pids.size() == 16);
  require_none_alive(pids);
  // Each node names what it stopped: two workers' four escapees each.
  CHECK_THAT(done[0].err, Contains("stopped 8 processes that left their worker's process group"));
  CHECK_THAT(done[1].err, Contains("stopped 8 processes that left their worker's process group"));
  CHECK_THAT(done[0].err, Contains("(sleep 601)"));  // found without the mark, as the subreaper
  require_no_strays(*a);
  require_no_strays(*b);
}

TEST_CASE("escapes: a failing worker's escapees end with the job", "[integration][escapes]") {
  TempDir dir;
  const Finished f = run_npu_run(
      {"--nproc-per-node", "2", "--no-python", "/bin/sh", "-c",
       // Rank 1 fails once rank 0 has left all four behind (polling: it is a test's shell).
       "if [ $RANK = 1 ]; then until [ \"$(wc -l < " + dir.file("pids.0") +
           " 2>/dev/null)\" = 4 ]; do sleep 0.05; done; " + escape_script(dir.path(), "3") +
           "; else " + escape_script(dir.path(), "wait") + "; fi"});
  INFO(f.err);
  CHECK(f.exit_code == 3);
  const auto pids = escaped_pids(dir, 2);
  CHECK(pids.size() == 8);
  require_none_alive(pids);
}

TEST_CASE(
    "escapes: every descriptor of a running agent is close-on-exec, and escapees of a "
    "SIGKILLed agent are stopped by its guardian",
    "[integration][escapes]") {
  TempDir dir;
  const int port = unused_port();
  auto a = start_node(port, 2, 1, escape_script(dir.path(), "wait"));
  auto b = start_node(port, 2, 1, escape_script(dir.path(), "wait"));
  a->wait_for_output("escaped", 1, 60s);
  b->wait_for_output("escaped", 1, 60s);
  {
    INFO("node 0's inheritable descriptors: " << inheritable_descriptors(a->pid()).size());
    CHECK(inheritable_descriptors(a->pid()).empty());
    CHECK(inheritable_descriptors(b->pid()).empty());
  }
  const auto pids = escaped_pids(dir, 2);
  REQUIRE(pids.size() == 8);
  // Node 1's agent dies at once: its guardian stops the workers and what carries its mark. The
  // daemon that cleared its environment was the agent's child as its subreaper, and is now
  // init's: nothing can find it any more (a known limit, docs/HARDENING.md); the test removes it.
  b->send_signal(SIGKILL);
  const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 60s);
  INFO(done[0].err);
  CHECK(done[0].exit_code == 125);
  const size_t b_rank = done[1].out.find("rank 1 inherited") != std::string::npos ? 1 : 0;
  const pid_t unmarked = pids[4 * b_rank + 1];  // escape.py's second, of node 1's rank
  ::kill(unmarked, SIGKILL);
  std::vector<pid_t> marked;
  for (pid_t pid : pids)
    if (pid != unmarked) marked.push_back(pid);
  require_none_alive(marked);
  require_no_strays(*a);
  require_no_strays(*b);
}

}  // namespace test_escapes
