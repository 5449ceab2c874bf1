// A console that stops reading (a paused `less`, an ssh session that stops draining) must never
// stop the agent: heartbeats, signals and exits are handled at once whatever the console does.
#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_console {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// About 5 MB of stdout per worker: more than the console's queue and the pipe together hold.
const std::string kFlood =
    "seq -f \"line-$RANK-%g-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\" 100000; echo done-$RANK >&2";

std::vector<std::string> with_workers(std::vector<std::string> flags, const std::string& script) {
  for (const char* a : {"--no-python", "/bin/sh", "-c"}) flags.emplace_back(a);
  flags.push_back(script);
  return flags;
}

size_t count_lines(const std::string& path) {
  std::ifstream in(path);
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

}  // namespace

TEST_CASE("console: a stalled console costs only its copy when the logs have everything",
          "[integration][logs][console]") {
  TempDir dir;
  NpuRunProcess p(
      with_workers({"--nproc-per-node", "2", "--tee", "3", "--log-dir", dir.file("logs")}, kFlood));
  p.pause_stdout();
  // The workers finish their 5 MB while nobody reads the console.
  p.wait_for_output("done-", 2, 30s, /*in_stderr=*/true);
  p.resume_stdout();
  const Finished f = p.wait(30s);
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  for (int r = 0; r < 2; ++r) {
    const std::string n = std::to_string(r);
    CHECK(count_lines(run_dir(dir.file("logs")) + "/attempt_0/" + n + "/stdout.log") == 100000);
    // Lines that reached the console are whole and prefixed.
    CHECK(count_occurrences(f.out, "[default" + n + "]:line-" + n + "-") ==
          count_occurrences(f.out, "line-" + n + "-"));
  }
  CHECK(count_occurrences(f.out, "\n") < 200000);
  CHECK(count_occurrences(f.err, "could not keep up") == 1);
  CHECK_THAT(f.err, Contains("lines of worker output were left out of it"));
  CHECK_THAT(f.err, Contains(run_dir(dir.file("logs")) + "/attempt_0/"));
  require_no_strays(p);
}

TEST_CASE("console: a stalled console holds the workers back but never the agent's signals",
          "[integration][logs][console]") {
  // Prefixed console lines and no files: the console is the only copy, so the workers wait
  // for it as on a terminal, but a signal is handled at once.
  NpuRunProcess p(with_workers({"--nproc-per-node", "2", "--log-line-prefix-template", "<${rank}>"},
                               // 6.9 MB: more than every buffer on the way holds.
                               "seq 1000000; echo flooded-$RANK >&2; sleep 100"));
  p.pause_stdout();
  p.wait_until_stdout_full(30s);
  p.send_signal(SIGTERM);
  // The agent's own lines go to stderr, which is read; stdout still is not.
  p.wait_for_output("received SIGTERM", 1, 5s, /*in_stderr=*/true);
  p.wait_for_output("stopped by npu_run", 2, 10s, /*in_stderr=*/true);
  p.resume_stdout();
  const Finished f = p.wait(30s);
  CHECK(f.exit_code == 128 + SIGTERM);
  // What got through before the stop, prefixed: the rank that started first fills the console
  // (on a loaded machine the other may not have printed at all by then).
  CHECK_THAT(f.out, Contains("<0>1\n") || Contains("<1>1\n"));
  // Held back by the console: neither got through its output before it was stopped.
  CHECK(f.err.find("flooded-") == std::string::npos);
  require_no_strays(p);
}

TEST_CASE("console: a node whose console stalls still beats its heartbeats",
          "[integration][logs][console][multi-node]") {
  const int port = unused_port();
  TempDir dir;
  auto node = [&](const std::string& rank) {
    return with_workers(
        {"--nnodes", "2", "--node-rank", rank, "--nproc-per-node", "1", "--master-addr",
         "127.0.0.1", "--master-port", std::to_string(port), "--heartbeat-interval", "0.2",
         "--heartbeat-timeout", "1.5", "--tee", "3", "--log-dir", dir.file("logs" + rank)},
        // Quiet long after the flood, while the console is still stalled.
        kFlood + "; sleep 3; echo finished-$RANK >&2");
  };
  NpuRunProcess node0(node("0"));
  NpuRunProcess node1(node("1"));
  node0.pause_stdout();
  node1.pause_stdout();
  node1.wait_for_output("finished-", 1, 30s, /*in_stderr=*/true);
  node0.wait_for_output("finished-", 1, 30s, /*in_stderr=*/true);
  node0.resume_stdout();
  node1.resume_stdout();
  const std::vector<Finished> f = NpuRunProcess::wait_all({&node0, &node1}, 30s);
  INFO(f[0].err << f[1].err);
  CHECK(f[0].exit_code == 0);
  CHECK(f[1].exit_code == 0);
  require_no_strays(node0);
  require_no_strays(node1);
}

}  // namespace test_console
