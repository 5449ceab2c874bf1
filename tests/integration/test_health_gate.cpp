// The health gate in launches: nodes on loopback, each with the fake npu-smi, hccn_tool and
// nvidia-smi (tests/tools/fake_tools) and a scenario of its own. A failed gate starts no worker
// anywhere; an elastic job forms without the failed node.
#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <thread>

#include "net/host_address.hpp"
#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace test_health_gate {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// Workers record that they started, then wait for `go` (or end at once without it).
const char* const kWorker =
    "touch \"$OUT/started.$RANK\"; while [ -n \"$WAIT\" ] && [ ! -e \"$OUT/go\" ]; do sleep 0.05; "
    "done";

struct GateNodes {
  TempDir dir;
  int port = unused_port();
  int nproc = 2;
  std::string worker = kWorker;
  std::vector<std::unique_ptr<NpuRunProcess>> nodes;

  GateNodes() {
    for (int i = 0; i < 8; ++i) dir.write("dev/davinci" + std::to_string(i), "");
  }
  // Node `index` with `scenario`, running `nproc` workers on devices 0..nproc-1.
  NpuRunProcess& start(int index, const std::string& nnodes, const std::string& scenario,
                       std::vector<std::string> flags = {}, bool wait = false,
                       const EnvOverrides& extra = {}) {
    const std::string file = dir.write("scenario." + std::to_string(index), scenario);
    std::vector<std::string> args = {"--nnodes",         nnodes,
                                     "--nproc-per-node", std::to_string(nproc),
                                     "--master-port",    std::to_string(port)};
    args.insert(args.end(), kFastHeartbeats.begin(), kFastHeartbeats.end());
    args.insert(args.end(), flags.begin(), flags.end());
    for (const char* a : {"--no-python", "/bin/sh", "-c"}) args.emplace_back(a);
    args.push_back(worker);
    EnvOverrides env = {{"NPU_RUN_DEV_ROOT", dir.path() + "/dev"},
                        {"NPU_RUN_FAKE_SCENARIO", file},
                        {"PATH", source_dir() + "/tests/tools/fake_tools:" + std::getenv("PATH")},
                        {"OUT", dir.path()},
                        {"WAIT", wait ? "1" : ""}};
    for (const auto& [name, value] : extra) env[name] = value;
    nodes.push_back(std::make_unique<NpuRunProcess>(args, env));
    return *nodes.back();
  }
  std::vector<Finished> wait_all() {
    std::vector<NpuRunProcess*> all;
    for (auto& n : nodes) all.push_back(n.get());
    auto done = NpuRunProcess::wait_all(all, 60s);
    for (auto& n : nodes) require_no_strays(*n);
    return done;
  }
  size_t workers_started() const {
    size_t n = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
      n += entry.path().filename().string().rfind("started.", 0) == 0 ? 1 : 0;
    return n;
  }
  Finished status() {
    return run_npu_run(
        {"status", "--master-addr", "127.0.0.1", "--master-port", std::to_string(port)}, {}, 30s);
  }
};

}  // namespace

TEST_CASE(
    "health gate: a link DOWN on node 2 of a static job: no worker starts, every node "
    "exits 122 naming it",
    "[integration][health]") {
  GateNodes job;
  for (int i = 0; i < 4; ++i) {
    job.start(i, "4", i == 2 ? "link_down 1\n" : "", {"--node-rank", std::to_string(i)});
  }
  const auto done = job.wait_all();
  for (const Finished& f : done) {
    INFO(f.err);
    CHECK(f.exit_code == 122);
    CHECK_THAT(f.err, Contains("1 of 4 nodes failed the health gate; no worker started") &&
                          Contains("node 2 (") && Contains("link device 1: link status: DOWN"));
    CHECK(f.seconds < 20);
  }
  CHECK(job.workers_started() == 0);
}

TEST_CASE(
    "health gate: an elastic job runs without the failed node, which status shows "
    "excluded",
    "[integration][health]") {
  GateNodes job;
  std::vector<std::string> flags = {"--rdzv-conf", "last_call_timeout=1", "--health-recheck", "60"};
  for (int i = 0; i < 4; ++i) job.start(i, "3:4", i == 2 ? "link_down 1\n" : "", flags, true);
  Finished status;
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < until) {
    status = job.status();
    if (status.out.find("excluded") != std::string::npos &&
        status.out.find("3 nodes (3..4 wanted)") != std::string::npos)
      break;
    ::usleep(200'000);
  }
  INFO(status.out << status.err);
  CHECK_THAT(status.out, Contains("3 nodes (3..4 wanted)"));
  CHECK_THAT(status.out, Contains("excluded: it failed its health gate, rechecking"));
  CHECK_THAT(status.out, Contains("fail link device 1: link status: DOWN"));
  // 16 node checks and the pings; and a warning where the host name is loopback (as here).
  CHECK_THAT(status.out, Contains(npu_run::net::host_name_address().loopback
                                      ? "health: 17 of 18 checks passed"
                                      : "health: 17 of 17 checks passed"));
  job.dir.write("go", "");
  const auto done = job.wait_all();
  int succeeded = 0;
  for (const Finished& f : done) {
    INFO(f.err);
    succeeded += f.exit_code == 0 ? 1 : 0;
    if (f.exit_code != 0) {
      CHECK(f.exit_code == 122);
      CHECK_THAT(f.err, Contains("the job ended (exit 0) without this node, which failed its "
                                 "health gate: link device 1"));
    }
  }
  CHECK(succeeded == 3);
  CHECK(job.workers_started() == 6);
}

TEST_CASE("health gate: a ping failure between two nodes' device 3 is named on both",
          "[integration][health]") {
  GateNodes job;
  job.nproc = 4;
  job.start(0, "2", "ping_fail 3 10.0.1.13\n", {"--node-rank", "0"});
  job.start(1, "2", "ip_base 10.0.1\n", {"--node-rank", "1"});
  const std::string pair = "device 3 (10.0.0.13) cannot reach node 1 (";
  for (const Finished& f : job.wait_all()) {
    INFO(f.err);
    CHECK(f.exit_code == 122);
    CHECK_THAT(f.err, Contains("2 of 2 nodes failed the health gate; no worker started"));
    CHECK_THAT(f.err, Contains("health check failed: ping device 3: node 0 (") && Contains(pair) &&
                          Contains("device 3 (10.0.1.13): recv time out seq=0"));
    CHECK_THAT(f.err, Contains("fix: hccn_tool -i 3 -ping -g address 10.0.1.13 on node 0"));
  }
  CHECK(job.workers_started() == 0);
}

TEST_CASE("health gate: the pings stop a warning-only call in flight, which runs again after",
          "[integration][health]") {
  GateNodes job;
  job.nproc = 8;
  // Slow calls: when the pings are asked for, every device is in its first warning-only call.
  // The workers wait until every device's two warning-only calls are answered (the job would
  // otherwise end, and stop the calls asked again, before a loaded machine answers them all).
  job.start(0, "2", "delay 0.4\nlog_calls\n", {"--node-rank", "0"}, true);
  job.start(1, "2", "delay 0.4\nlog_calls\nip_base 10.0.1\n", {"--node-rank", "1"}, true);
  const auto warn_only = [](const std::string& text) {
    return count_occurrences(text, " -optical\n") + count_occurrences(text, " -link_stat\n");
  };
  const auto answered_on = [&](const char* node) {
    const std::string calls = job.dir.file(std::string("scenario.") + node + ".calls");
    return std::filesystem::exists(calls) ? warn_only(read_file(calls)) : 0;
  };
  for (int i = 0; i < 600 && (answered_on("0") < 16 || answered_on("1") < 16); ++i)
    ::usleep(50'000);
  job.dir.write("go", "");
  for (const Finished& f : job.wait_all()) {
    INFO(f.err);
    CHECK(f.exit_code == 0);
    CHECK_THAT(f.err, Contains("device-plane pings reached"));
    CHECK_THAT(f.err, !Contains("not run"));
  }
  for (const char* node : {"0", "1"}) {
    INFO("node " << node);
    const std::string scenario = job.dir.file(std::string("scenario.") + node);
    CHECK(::access((scenario + ".collisions").c_str(), F_OK) != 0);
    // Each device's two warning-only calls answered; some were started twice, the first time
    // stopped for the pings. A call whose answer crossed the stop on a slow machine (an ASan
    // build as Linux 3.10) is logged as answered and asked again, so answers may exceed 16.
    const size_t answered = warn_only(read_file(scenario + ".calls"));
    const size_t started = warn_only(read_file(scenario + ".started"));
    CHECK(answered >= 16);
    CHECK(answered <= started);
    CHECK(started > 16);
  }
  CHECK(job.workers_started() == 16);
}

namespace {

// FaultDiag's reading of an npu_info file: a "Datetime: " line, then blocks of a command line
// and its output, each ended by two blank lines. Returns the command lines; fails the test where
// the layout is not that.
std::vector<std::string> npu_info_commands(const std::string& text) {
  std::vector<std::string> blocks;
  size_t at = 0;
  for (size_t end; (end = text.find("\n\n\n", at)) != std::string::npos; at = end + 3)
    blocks.push_back(text.substr(at, end - at));
  CHECK(at == text.size());  // nothing after the last block's blank lines
  REQUIRE(!blocks.empty());
  CHECK(std::regex_match(blocks[0],
                         std::regex(R"(Datetime: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6})")));
  std::vector<std::string> commands;
  for (size_t i = 1; i < blocks.size(); ++i)
    commands.push_back(blocks[i].substr(0, blocks[i].find('\n')));
  return commands;
}

}  // namespace

TEST_CASE(
    "health gate: each attempt's npu_info_before.txt and npu_info_after.txt, as FaultDiag "
    "reads them",
    "[integration][health]") {
  GateNodes job;
  const std::string logs = job.dir.path() + "/logs";
  // Fail once, then succeed: two attempts, each with both files.
  job.worker = "if [ ! -e \"$OUT/failed\" ]; then touch \"$OUT/failed\"; exit 1; fi";
  job.start(0, "1", "", {"--log-dir", logs, "--max-restarts", "1"});
  for (const Finished& f : job.wait_all()) {
    INFO(f.err);
    CHECK(f.exit_code == 0);
  }
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(logs)) {
    if (entry.path().filename().string().rfind("npu_info_", 0) == 0)
      files.push_back(entry.path().parent_path().parent_path().filename().string() + "/" +
                      entry.path().parent_path().filename().string() + "/" +
                      entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  CHECK(files == std::vector<std::string>{"attempt_0/environment_check/npu_info_after.txt",
                                          "attempt_0/environment_check/npu_info_before.txt",
                                          "attempt_1/environment_check/npu_info_after.txt",
                                          "attempt_1/environment_check/npu_info_before.txt"});
  std::string text;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(logs)) {
    if (entry.path().filename() == "npu_info_after.txt" &&
        entry.path().parent_path().parent_path().filename() == "attempt_1")
      text = read_file(entry.path().string());
  }
  const std::string smi = "/usr/local/bin/npu-smi";
  const std::string hccn = "/usr/local/Ascend/driver/tools/hccn_tool";
  std::vector<std::string> expected = {smi + " info -m", smi + " info"};
  for (int d : {0, 1}) expected.push_back(fmt::format("{} info -i {} -c 0 -t health", smi, d));
  for (const char* c :
       {"-net_health -g", "-ip -g", "-link_stat -g", "-link -g", "-tls -g | grep switch",
        "-optical -g | grep prese", "-optical -g", "-stat -g", "-fec -g"}) {
    for (int d : {0, 1}) expected.push_back(fmt::format("{} -i {} {}", hccn, d, c));
  }
  for (const char* t : {"ecc", "board", "usages"}) {
    for (int d : {0, 1}) expected.push_back(fmt::format("{} info -i {} -c 0 -t {}", smi, d, t));
  }
  CHECK(npu_info_commands(text) == expected);
  CHECK_THAT(text, Contains(hccn + " -i 1 -link -g\nlink status: UP\n\n\n"));
  CHECK_THAT(text, Contains(hccn + " -i 0 -tls -g | grep switch\ndev_id:0, tls switch[0]"));
  const std::string present = hccn + " -i 0 -optical -g | grep prese\n";
  const size_t at = text.find(present);
  REQUIRE(at != std::string::npos);
  CHECK(std::regex_match(
      text.substr(at + present.size(), text.find("\n\n\n", at) - at - present.size()),
      std::regex("present +: present")));
}

TEST_CASE(
    "health gate: a TLS switch that differs, a foreign process and the user's check are "
    "named",
    "[integration][health]") {
  GateNodes tls;
  for (int i = 0; i < 3; ++i) tls.start(i, "3", i == 1 ? "tls_all 1\n" : "");
  for (const Finished& f : tls.wait_all()) {
    INFO(f.err);
    CHECK(f.exit_code == 122);
    CHECK_THAT(f.err, Contains("tls: the TLS switch is 1 on devices 0,1 of this node but 0 on 4 "
                               "other devices of the job"));
  }
  GateNodes busy;
  busy.start(0, "1", "process 1 31337 python3\n");
  Finished f = busy.wait_all()[0];
  CHECK(f.exit_code == 122);
  CHECK_THAT(f.err, Contains("npu_processes device 1: device 1 is held by pid 31337 (python3)"));
  GateNodes user;
  user.start(0, "1", "", {"--health-check-cmd", "echo fabric port 3 is down; false"});
  f = user.wait_all()[0];
  CHECK(f.exit_code == 122);
  CHECK_THAT(f.err, Contains("user_check: --health-check-cmd exit 1: fabric port 3 is down"));
  CHECK(busy.workers_started() + user.workers_started() + tls.workers_started() == 0);
}

TEST_CASE(
    "health gate: a setting that differs is warned of, and fails with "
    "--strict-consistency",
    "[integration][health]") {
  for (const bool strict : {false, true}) {
    GateNodes job;
    std::vector<std::string> flags;
    if (strict) flags.emplace_back("--strict-consistency");
    for (int i = 0; i < 3; ++i) {
      job.start(i, "3", "", flags, false, {{"HCCL_BUFFSIZE", i == 1 ? "400" : "200"}});
    }
    for (const Finished& f : job.wait_all()) {
      INFO(f.err);
      if (strict) {
        CHECK(f.exit_code == 122);
        CHECK_THAT(f.err, Contains("consistency: HCCL_BUFFSIZE is 400 here but 200 on the other "
                                   "nodes (--strict-consistency)"));
      } else {
        CHECK(f.exit_code == 0);
        CHECK_THAT(f.err, Contains("health gate: HCCL_BUFFSIZE differs between nodes: 200 on 2 of "
                                   "3 nodes; 400 on "));
      }
    }
    CHECK(job.workers_started() == (strict ? 0u : 6u));
  }
}

TEST_CASE("health gate: a hanging tool is stopped at its timeout, and the job starts",
          "[integration][health]") {
  GateNodes job;
  job.start(0, "1", "hang hccn_tool:-link:1\n", {"--health-timeout", "20,1"});
  const Finished f = job.wait_all()[0];
  INFO(f.err);
  CHECK(f.exit_code == 0);
  // Within the 1 s timeout and the stop's own time: 1.1 s on a loaded ASan build.
  CHECK_THAT(f.err, Contains("health check not run: link device 1: hccn_tool -i 1 -link -g: no "
                             "answer within 1.") && Contains(" s (stopped)"));
  CHECK(job.workers_started() == 2);
}

TEST_CASE(
    "health gate: the verdict goes once the checks that can fail are in, before the "
    "warning-only ones end",
    "[integration][health]") {
  GateNodes job;
  // Both devices' optical modules hang for the whole call timeout (2 s each): 4 s that the
  // workers no longer wait for. What the optics said comes later, in the log and in status.
  NpuRunProcess& node =
      job.start(0, "1", "hang hccn_tool:-optical\n", {"--health-timeout", "30,2"}, true);
  const auto launched = std::chrono::steady_clock::now();
  while (job.workers_started() < 2 && std::chrono::steady_clock::now() - launched < 10s)
    std::this_thread::sleep_for(20ms);
  CHECK(job.workers_started() == 2);
  CHECK(std::chrono::steady_clock::now() - launched < 3s);
  node.wait_for_output("health check not run: optical device 1", 1, 15s, true);
  // The single node's status comes from its agent, which asks its own rendezvous.
  const Finished status = run_npu_run({"status", "--pid", std::to_string(node.pid())}, {}, 30s);
  INFO(status.err);
  CHECK_THAT(status.out, Contains("optical device 1: hccn_tool -i 1 -optical -g: no answer"));
  job.dir.write("go", "");
  const Finished f = job.wait_all()[0];
  INFO(f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.err, Contains("(warning-only checks still running)"));
}

TEST_CASE(
    "health gate: a node failing its gate at a restart is taken out and the spare takes "
    "its seat",
    "[integration][health][spares]") {
  GateNodes job;
  job.nproc = 1;
  // Node 1's worker breaks its node's link (the fake hccn_tool reads the scenario on every
  // call) and fails; at the restart node 1's gate fails, and the spare runs node 1's rank.
  job.worker =
      "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && [ \"$GROUP_RANK\" = 1 ]; then "
      "echo 'link_down 0' > \"$NPU_RUN_FAKE_SCENARIO\"; exit 1; fi; "
      "[ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && sleep 1; echo \"ran $(hostname) $GROUP_RANK\"";
  for (int i = 0; i < 3; ++i) {
    job.start(i, "2", "",
              {"--node-rank", std::to_string(i), "--spares", "1", "--max-restarts", "1", "--ledger",
               job.dir.file("ledger.jsonl")},
              false, {{kHostNameVariable, "gate-host-" + std::to_string(i)}});
  }
  const auto done = job.wait_all();
  INFO(done[0].err << "\n---- node 1 ----\n" << done[1].err);
  for (const Finished& f : done) CHECK(f.exit_code == 0);
  CHECK_THAT(done[1].err, Contains("is taken out of the job: it failed its health gate") &&
                              Contains("link device 0: link status: DOWN"));
  CHECK_THAT(done[2].out, Contains("ran gate-host-2 1"));
  CHECK_THAT(
      read_file(job.dir.file("ledger.jsonl")),
      Contains("\"host\":\"gate-host-1\"") && Contains("\"reason\":\"failed its health gate\""));
}

}  // namespace test_health_gate
