// `npu_run status` during real runs (issue 18): on a node it asks the agent there; with
// --master-addr/--master-port it asks the rendezvous, proving the job's token. Each test gives
// its agents and its status commands a TMPDIR of their own, where agents keep their sockets,
// so that other tests' agents running meanwhile are not asked.
#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace test_status {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// Rank 0 (of every node) beats every 0.1 s; the others beat three times and stop.
std::string beating_worker(TempDir& dir) {
  const std::string path = dir.file("worker.py");
  std::ofstream(path) << "import os, socket, time\n"
                         "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
                         "local = int(os.environ['LOCAL_RANK'])\n"
                         "for step in range(100000):\n"
                         "    if local != 0 and step == 3:\n"
                         "        time.sleep(3600)\n"
                         "    s.sendto(f'step {step}'.encode(), os.environ['NPU_RUN_PROGRESS'])\n"
                         "    time.sleep(0.1)\n";
  return path;
}

// `npu_run status ARGS` until its output holds every one of `needles` (the beats come within
// a heartbeat or two); the last run.
Finished status_until(const std::vector<std::string>& args, const EnvOverrides& env,
                      const std::vector<std::string>& needles) {
  Finished last;
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < until) {
    std::vector<std::string> full = {"status"};
    full.insert(full.end(), args.begin(), args.end());
    last = run_npu_run(full, env, 30s);
    bool all = last.exit_code == 0;
    for (const auto& needle : needles) all = all && last.out.find(needle) != std::string::npos;
    if (all) return last;
    ::usleep(200'000);
  }
  return last;
}

}  // namespace

TEST_CASE("status: on the node of a running job, every rank's last beat and its age",
          "[integration][status]") {
  TempDir dir;
  const std::string tmp = dir.file("tmp");
  std::filesystem::create_directory(tmp);
  const EnvOverrides env{{"TMPDIR", tmp}};
  NpuRunProcess job({"--nproc-per-node", "2", "--rdzv-id", "status-1", beating_worker(dir)}, env);
  // Rank 0 beats on: wait for rank 1's own third beat, not for any 'step 2'.
  const Finished s =
      status_until({}, env, {"    rank 1  local 1  3 beats, last 'step 2' ", "rank 0  local 0"});
  INFO(s.out << s.err);
  REQUIRE(s.exit_code == 0);
  CHECK_THAT(s.out, Contains("job 'status-1': running, round 0, restart 0 of 0, 1 node of 1"));
  CHECK_THAT(s.out, Contains("ranks 0-1  running"));
  // Rank 1 stopped at step 2: three beats, its age growing; rank 0 keeps beating.
  CHECK_THAT(s.out, Contains("    rank 1  local 1  3 beats, last 'step 2' "));
  // Rank 0 beats on its own schedule: under load it may not have beaten three times yet when
  // rank 1 has. Asked again until it has (20 s at most).
  Finished json;
  nlohmann::json j;
  for (const auto until = std::chrono::steady_clock::now() + 20s;
       std::chrono::steady_clock::now() < until; ::usleep(200'000)) {
    json = run_npu_run({"status", "--json"}, env, 30s);
    REQUIRE(json.exit_code == 0);
    j = nlohmann::json::parse(json.out);
    if (j.value(nlohmann::json::json_pointer("/nodes/0/ranks/0/beats"), 0) >= 3) break;
  }
  INFO(json.out << json.err);
  CHECK(j["run_id"] == "status-1");
  CHECK(j["phase"] == "running");
  REQUIRE(j["nodes"].size() == 1);
  CHECK(j["nodes"][0]["ranks"][1]["beats"] == 3);
  CHECK(j["nodes"][0]["ranks"][1]["age_ms"].get<int64_t>() >= 0);
  CHECK(j["nodes"][0]["ranks"][0]["beats"].get<int>() >= 3);
  // A second job with the same TMPDIR: which one is asked for must be said, by its agent's pid.
  NpuRunProcess second({"--nproc-per-node", "1", "--rdzv-id", "status-2", beating_worker(dir)},
                       env);
  const Finished second_up =
      status_until({"--pid", std::to_string(second.pid())}, env, {"job 'status-2': running"});
  CHECK(second_up.exit_code == 0);
  const Finished both = run_npu_run({"status"}, env, 30s);
  CHECK(both.exit_code == 1);
  CHECK_THAT(both.err, Contains("several jobs run on this host: run id 'status-1' (agent pid " +
                                std::to_string(job.pid()) + "), run id 'status-2' (agent pid " +
                                std::to_string(second.pid()) + "); pick one with --pid"));
  second.send_signal(SIGTERM);
  CHECK(second.wait(30s).exit_code == 143);
  require_no_strays(second);
  // Another agent's pid, and no agent at all, are said so.
  const Finished other = run_npu_run({"status", "--pid", "1"}, env, 30s);
  CHECK(other.exit_code == 1);
  CHECK_THAT(other.err, Contains("no npu_run agent with pid 1 runs on this host"));
  job.send_signal(SIGTERM);
  const Finished ended = job.wait(30s);
  CHECK(ended.exit_code == 143);
  require_no_strays(job);
  const Finished none = run_npu_run({"status"}, env, 30s);
  CHECK(none.exit_code == 1);
  CHECK_THAT(none.err, Contains("no npu_run agent of this user runs on this host") &&
                           Contains("--master-addr"));
}

TEST_CASE("status: a two-node job from a node and from the rendezvous' address, with its token",
          "[integration][status][multi-node]") {
  TempDir dir;
  const std::string tmp = dir.file("tmp");
  std::filesystem::create_directory(tmp);
  const std::string worker = "exec /usr/bin/python3 " + beating_worker(dir);
  const int port = unused_port();
  const EnvOverrides agents{{"TMPDIR", tmp}, {"NPU_RUN_RDZV_TOKEN", "s3cret-token"}};
  auto n0 = start_node(port, 2, 2, worker, {"--node-rank", "0"}, agents);
  auto n1 = start_node(port, 2, 2, worker, {"--node-rank", "1"}, agents);
  // Both agents run here: one job, shown once. Node 1's ranks come with its heartbeats.
  const Finished here = status_until({}, {{"TMPDIR", tmp}},
                                     {"2 nodes of 2", "    rank 3  local 1  3 beats, last 'step 2'",
                                      "    rank 1  local 1  3 beats, last 'step 2'"});
  INFO(here.out << here.err);
  CHECK(here.exit_code == 0);
  CHECK(count_occurrences(here.out, "job 'none'") == 1);
  CHECK_THAT(here.out, Contains("  node 1  "));
  CHECK_THAT(here.out, Contains("ranks 2-3  running"));

  const std::vector<std::string> direct = {"--master-addr", "127.0.0.1", "--master-port",
                                           std::to_string(port)};
  const Finished asked = status_until(direct, {{"NPU_RUN_RDZV_TOKEN", "s3cret-token"}},
                                      {"    rank 3  local 1  3 beats, last 'step 2'"});
  INFO(asked.out << asked.err);
  CHECK(asked.exit_code == 0);
  CHECK_THAT(asked.out, Contains("job 'none': running"));
  // Without the token, with another one, or another run id: refused, by name.
  const Finished no_token =
      run_npu_run({"status", direct[0], direct[1], direct[2], direct[3]}, {}, 30s);
  CHECK(no_token.exit_code == 1);
  CHECK_THAT(no_token.err, Contains("needs the job's rendezvous token"));
  const Finished wrong = run_npu_run({"status", direct[0], direct[1], direct[2], direct[3]},
                                     {{"NPU_RUN_RDZV_TOKEN", "not-it"}}, 30s);
  CHECK(wrong.exit_code == 1);
  CHECK_THAT(wrong.err, Contains("does not know this token"));
  const Finished other_id =
      run_npu_run({"status", direct[0], direct[1], direct[2], direct[3], "--rdzv-id", "x"},
                  {{"NPU_RUN_RDZV_TOKEN", "s3cret-token"}}, 30s);
  CHECK(other_id.exit_code == 1);
  CHECK_THAT(other_id.err, Contains("run id 'x' differs from the job's 'none'"));
  const Finished nobody = run_npu_run(
      {"status", "--master-addr", "127.0.0.1", "--master-port", std::to_string(unused_port())}, {},
      30s);
  CHECK(nobody.exit_code == 1);
  CHECK_THAT(nobody.err, Contains("cannot connect to the rendezvous at 127.0.0.1:"));
  const Finished bad = run_npu_run({"status", "--master-port", "70000"}, {}, 30s);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("--master-port 70000"));

  n0->send_signal(SIGTERM);
  const auto done = NpuRunProcess::wait_all({n0.get(), n1.get()}, 40s);
  for (const Finished& f : done) CHECK(f.exit_code == 143);
  require_no_strays(*n0);
  require_no_strays(*n1);
}

}  // namespace test_status
