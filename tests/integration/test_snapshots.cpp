// Snapshots in the agents' memory with real torch DDP on CPU (issue 47):
// examples/train_snapshots.py snapshots every 5 steps through npu_run_checkpoint and trains
// deterministically, so a run that failed and resumed must end with the weights of one that did
// not, bit for bit. Each failure is restored from the step the rendezvous chose; the files on
// storage load with plain torch.load; no segment outlives its agent, even a SIGKILLed one.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace test_snapshots {

using namespace npu_run::testing;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string trainer() {
  return source_dir() + "/examples/train_snapshots.py";
}

// The trainer's arguments: snapshots under `dir`/ckpt, its result in `dir`/`out`.
std::vector<std::string> training(TempDir& dir, const std::string& out,
                                  std::vector<std::string> more = {}) {
  fs::create_directories(dir.file("ckpt_" + out));
  std::vector<std::string> args = {trainer(), "--path",
                                   dir.file("ckpt_" + out) + "/rank{rank}_step{step}.pt", "--out",
                                   dir.file(out)};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

nlohmann::json result(TempDir& dir, const std::string& out) {
  std::ifstream in(dir.file(out));
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

// The digest of an uninterrupted run's final weights: what every interrupted one must reach.
std::string run_uninterrupted(TempDir& dir, const std::vector<std::string>& more) {
  std::vector<std::string> args = {"--nproc-per-node", "2"};
  for (const std::string& a : training(dir, "clean.json", more)) args.push_back(a);
  const Finished f = run_npu_run(args, {}, 120s);
  INFO(f.out << f.err);
  REQUIRE(f.exit_code == 0);
  const auto r = result(dir, "clean.json");
  CHECK(r["start"] == 1);
  CHECK(r["loaded"].is_null());
  return r["digest"].get<std::string>();
}

// Training is deterministic: the cases that train the same steps with the same torch share one
// uninterrupted run per build tree (two torch processes each fewer), kept under the tree's
// Testing/ by the first case that needs it while the others wait on its lock. The key holds
// what the weights depend on: the trainer, the snapshots' module, the arguments and the torch.
std::string uninterrupted(TempDir& dir, const std::vector<std::string>& more = {}) {
  const auto [major, minor] = torch_version();
  std::string key = fmt::format("{}|{}.{}|{}|{}", test_python(), major, minor, read_file(trainer()),
                                read_file(source_dir() + "/python/npu_run_checkpoint.py"));
  for (const std::string& a : more) key += "|" + a;
  const fs::path cache =
      fs::path(build_paths::kNpuRun).parent_path() / "Testing" / "snapshot_digests";
  fs::create_directories(cache);
  const fs::path entry = cache / std::to_string(std::hash<std::string>{}(key));
  const int lock = ::open((entry.string() + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  REQUIRE(lock >= 0);
  ::flock(lock, LOCK_EX);
  std::string digest = fs::exists(entry) ? read_file(entry.string()) : "";
  if (digest.empty()) {
    digest = run_uninterrupted(dir, more);
    std::ofstream(entry.string() + ".new") << digest;
    fs::rename(entry.string() + ".new", entry);
  }
  ::close(lock);  // and with it the lock
  return digest;
}

// The agent `pid`'s segment directories still in /dev/shm.
size_t segments_left(pid_t pid) {
  size_t n = 0;
  const std::string prefix = "npu_run_snapshots_" + std::to_string(pid) + "-";
  for (const auto& e : fs::directory_iterator("/dev/shm"))
    n += e.path().filename().string().rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

// `python -c code` under the test's torch, outside npu_run.
Finished python(const std::string& code, const std::string& cwd) {
  return run_npu_run({"--no-python", test_python(), "-c", code}, {}, 60s, cwd);
}

}  // namespace

TEST_CASE("snapshots: a worker SIGKILLed at step 37 resumes at 35 from memory, as if never hit",
          "[integration][snapshots][pytorch]") {
  TempDir dir;
  const std::string clean = uninterrupted(dir);
  std::vector<std::string> args = {
      "--nproc-per-node", "2", "--max-restarts", "1", "--log-dir", dir.file("logs"), "--report"};
  for (const std::string& a : training(dir, "hit.json", {"--kill-rank", "1", "--kill-step", "37"}))
    args.push_back(a);
  NpuRunProcess job(args);
  const Finished f = job.wait(120s);
  INFO(f.out << f.err);
  REQUIRE(f.exit_code == 0);
  CHECK_THAT(f.err, Contains("this round restores step 35 from memory: every rank holds step 35 "
                             "in memory"));
  // Both ranks reached step 37 (rank 0's 38th waits for rank 1's gradients): 36 and 37 are redone.
  CHECK_THAT(f.err, Contains("every rank of this node (2) restored step 35 from memory in ") &&
                        Contains(" s; 2 steps redone (the round before reached 37)"));
  // The timeline and the report say so too.
  const fs::path run = fs::directory_iterator(dir.file("logs"))->path();
  std::ifstream timeline(run / "timeline.json");
  const auto events = nlohmann::json::parse(timeline)["events"];
  size_t restores = 0;
  for (const auto& e : events) {
    if (e["phase"] != "restore") continue;
    ++restores;
    CHECK(e["round"] == 1);
    CHECK(e["step"] == 35);
    CHECK_THAT(e["detail"].get<std::string>(), Contains("from memory in "));
  }
  CHECK(restores == 1);
  std::ifstream page(run / "report.html");
  const std::string html((std::istreambuf_iterator<char>(page)), {});
  CHECK_THAT(html, Contains("Round 1 restored:</p><ul><li>node 0 (") &&
                       Contains("): step 35 from memory in "));
  const auto r = result(dir, "hit.json");
  CHECK(r["start"] == 36);
  CHECK(r["loaded"]["source"] == "memory");
  CHECK(r["loaded"]["step"] == 35);
  CHECK(r["digest"] == clean);
  // Every snapshot was written to storage in the background, and plain torch reads it.
  const Finished plain = python("import torch; s = torch.load('" + dir.file("ckpt_hit.json") +
                                    "/rank1_step50.pt'); print('step', s['step'], sorted(s))",
                                dir.path());
  INFO(plain.err);
  CHECK_THAT(plain.out, Contains("step 50 ['model', 'optimizer', 'step']"));
  CHECK(segments_left(job.pid()) == 0);
  require_no_strays(job);
}

TEST_CASE("snapshots: a rank killed in the middle of a save restores the step every rank has",
          "[integration][snapshots][pytorch]") {
  TempDir dir;
  const std::string clean = uninterrupted(dir);
  std::vector<std::string> args = {"--nproc-per-node", "2", "--max-restarts", "1"};
  for (const std::string& a :
       training(dir, "mid.json", {"--kill-rank", "1", "--kill-step", "40", "--kill-in-save"}))
    args.push_back(a);
  NpuRunProcess job(args);
  const Finished f = job.wait(120s);
  INFO(f.out << f.err);
  REQUIRE(f.exit_code == 0);
  // Rank 0 completed step 40, rank 1 died writing it: 35 is the newest both hold.
  CHECK_THAT(f.err, Contains("this round restores step 35 from memory"));
  const auto r = result(dir, "mid.json");
  CHECK(r["loaded"]["step"] == 35);
  CHECK(r["digest"] == clean);
  require_no_strays(job);
}

TEST_CASE(
    "snapshots: a budget too small for one goes to storage with a message, and a failure "
    "restores from storage",
    "[integration][snapshots][pytorch]") {
  TempDir dir;
  const std::string clean = uninterrupted(dir);
  std::vector<std::string> args = {"--nproc-per-node",    "2", "--max-restarts", "1",
                                   "--checkpoint-memory", "1K"};
  for (const std::string& a :
       training(dir, "small.json", {"--kill-rank", "0", "--kill-step", "37"}))
    args.push_back(a);
  NpuRunProcess job(args);
  const Finished f = job.wait(120s);
  INFO(f.out << f.err);
  REQUIRE(f.exit_code == 0);
  CHECK_THAT(f.err, Contains("npu_run_checkpoint: the snapshot of local rank 0 at step 5 needs "
                             "about") &&
                        Contains("free of 1.0 kB (--checkpoint-memory): step 5 and later ones go "
                                 "to " +
                                 dir.file("ckpt_small.json") + "/rank0_step5.pt"));
  // The saves went to storage from the workers themselves, so no agent says it wrote them: the
  // files are the script's own, and load reads the newest on disk.
  CHECK_THAT(f.err, !Contains("this round restores"));
  const auto r = result(dir, "small.json");
  CHECK(r["loaded"]["source"] == "file");
  CHECK(r["loaded"]["step"] == 35);
  CHECK(r["digest"] == clean);
  require_no_strays(job);
}

TEST_CASE("snapshots: two nodes, a worker lost on node 1, both restore from memory",
          "[integration][snapshots][pytorch][multi-node]") {
  TempDir dir;
  const std::string clean = uninterrupted(dir);
  const int port = unused_port();
  std::string command = "exec " + test_python();
  for (const std::string& a : training(dir, "two.json", {"--kill-rank", "1", "--kill-step", "37"}))
    command += " '" + a + "'";
  auto n0 = start_node(port, 2, 1, command, {"--node-rank", "0", "--max-restarts", "1"});
  auto n1 = start_node(port, 2, 1, command, {"--node-rank", "1", "--max-restarts", "1"});
  const auto done = NpuRunProcess::wait_all({n0.get(), n1.get()}, 180s);
  for (const Finished& f : done) {
    INFO(f.out << f.err);
    CHECK(f.exit_code == 0);
    CHECK_THAT(f.err, Contains("this round restores step 35 from memory"));
    CHECK_THAT(f.err, Contains("every rank of this node (1) restored step 35 from memory"));
  }
  const auto r = result(dir, "two.json");
  CHECK(r["loaded"]["step"] == 35);
  CHECK(r["digest"] == clean);
  require_no_strays(*n0);
  require_no_strays(*n1);
}

TEST_CASE("snapshots: a node lost, the spare in its seat restores its rank from the copy",
          "[integration][snapshots][pytorch][multi-node][spares]") {
  TempDir dir;
  // Slow steps, so that the copy of a snapshot is on node 0 well before the next one begins.
  const std::vector<std::string> pace = {"--steps", "40", "--step-seconds", "0.2"};
  const std::string clean = uninterrupted(dir, {"--steps", "40"});
  const int port = unused_port();
  std::string command = "exec " + test_python();
  for (const std::string& a : training(dir, "spare.json", pace)) command += " '" + a + "'";
  const auto node = [&](int rank, const std::string& host) {
    // A TMPDIR of its own: `npu_run status` asks node 0's agent only.
    const std::string tmp = dir.file("tmp" + std::to_string(rank));
    fs::create_directories(tmp);
    return start_node(port, 2, 1, command,
                      {"--node-rank", std::to_string(rank), "--spares", "1", "--max-restarts", "0"},
                      {{kHostNameVariable, host}, {"TMPDIR", tmp}});
  };
  auto n0 = node(0, "host-a");
  n0->wait_for_output("rendezvous server on", 1, 20s, true);
  auto n1 = node(1, "host-b");
  auto spare = node(2, "host-c");
  spare->wait_for_output("standing by as a spare", 1, 30s, true);
  const std::string written = dir.file("ckpt_spare.json") + "/rank1_step10.pt";
  for (const auto until = std::chrono::steady_clock::now() + 60s;
       !fs::exists(written) && std::chrono::steady_clock::now() < until;)
    ::usleep(20'000);
  REQUIRE(fs::exists(written));
  // Node 0's status: its rank's snapshot is on node 1 too.
  const Finished status = run_npu_run({"status", "--json"}, {{"TMPDIR", dir.file("tmp0")}}, 30s);
  INFO(status.out << status.err);
  const auto ranks = nlohmann::json::parse(status.out)["nodes"][0]["ranks"];
  REQUIRE(ranks.size() == 1);
  CHECK(ranks[0]["snapshot"]["copied"].get<int64_t>() >= 5);
  n1->send_signal(SIGKILL);  // its worker dies with it; its memory is gone
  const auto done = NpuRunProcess::wait_all({n0.get(), spare.get()}, 120s);
  INFO(done[0].err << "\n---- spare ----\n" << done[1].err);
  for (const Finished& f : done) CHECK(f.exit_code == 0);
  CHECK_THAT(done[1].err, Contains("local rank 0 fetches step 10 from the copy on host-a"));
  CHECK_THAT(done[1].err, Contains("every rank of this node (1) restored step 10 from memory") &&
                              Contains("after 1 rank fetched from another node's copy in "));
  CHECK_THAT(done[0].err, Contains("this round restores step 10 from memory: every rank holds "
                                   "step 10 in memory, 1 of them as a copy on another node"));
  const auto r = result(dir, "spare.json");
  CHECK(r["loaded"]["source"] == "memory");
  CHECK(r["loaded"]["step"] == 10);
  CHECK(r["digest"] == clean);
  require_no_strays(*n0);
  require_no_strays(*spare);
}

TEST_CASE(
    "snapshots: npu_run status shows each rank's, and an agent SIGKILLed leaves no segment "
    "in /dev/shm",
    "[integration][snapshots][status][pytorch]") {
  TempDir dir;
  std::vector<std::string> args = {"--nproc-per-node", "2"};
  for (const std::string& a :
       training(dir, "killed.json", {"--steps", "100000", "--step-seconds", "0.02"}))
    args.push_back(a);
  fs::create_directory(dir.file("tmp"));
  const EnvOverrides env{{"TMPDIR", dir.file("tmp")}};  // status asks this job's agent only
  NpuRunProcess job(args, env);
  const std::string written = dir.file("ckpt_killed.json") + "/rank1_step10.pt";
  for (const auto until = std::chrono::steady_clock::now() + 60s;
       !fs::exists(written) && std::chrono::steady_clock::now() < until;)
    ::usleep(100'000);
  REQUIRE(fs::exists(written));
  CHECK(segments_left(job.pid()) == 1);  // holding the ranks' snapshots
  const Finished status = run_npu_run({"status"}, env, 30s);
  INFO(status.out << status.err);
  CHECK_THAT(status.out, Contains("    rank 1  local 1  ") && Contains("; snapshot: step ") &&
                             Contains(" in memory, ") && Contains(" on storage"));
  const Finished json = run_npu_run({"status", "--json"}, env, 30s);
  const auto ranks = nlohmann::json::parse(json.out)["nodes"][0]["ranks"];
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[1]["snapshot"]["memory"].get<int64_t>() >= 10);
  CHECK(ranks[1]["snapshot"]["stored"].get<int64_t>() >= 10);
  job.send_signal(SIGKILL);
  job.wait(30s);
  for (const auto until = std::chrono::steady_clock::now() + 5s;
       segments_left(job.pid()) > 0 && std::chrono::steady_clock::now() < until;)
    ::usleep(50'000);
  CHECK(segments_left(job.pid()) == 0);
  require_no_strays(job);
}

TEST_CASE("snapshots: outside npu_run the module saves and loads the path itself",
          "[integration][snapshots][pytorch]") {
  TempDir dir;
  const std::string module = source_dir() + "/python";
  const Finished f =
      python("import sys, os; sys.path.insert(0, '" + module +
                 "'); import torch, npu_run_checkpoint as c\n"
                 "os.environ.pop('NPU_RUN_CHECKPOINT')  # run by npu_run, to be without it\n"
                 "os.environ['RANK'] = '3'\n"
                 "assert c.load('ck/r{rank}_s{step}.pt') is None\n"
                 "os.mkdir('ck')\n"
                 "for step in (5, 10, 15): c.save({'w': torch.ones(3) * step, 'step': step}, step, "
                 "'ck/r{rank}_s{step}.pt')\n"
                 "s = c.load('ck/r{rank}_s{step}.pt')\n"
                 "print('loaded', s['step'], c.last_loaded(), sorted(os.listdir('ck')))\n"
                 "try:\n"
                 "    c.save({}, 1, 'nowhere/x.pt')\n"
                 "except FileNotFoundError as e:\n"
                 "    print('refused:', e)\n"
                 "class Cell: pass\n"
                 "Cell.__module__ = 'mindspore.nn.cell'\n"
                 "try:\n"
                 "    c.save(Cell(), 1, 'ck/ms.pt')\n"
                 "except TypeError as e:\n"
                 "    print('mindspore:', e)\n",
             dir.path());
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("loaded 15 {'source': 'file', 'step': 15} ['r3_s10.pt', "
                             "'r3_s15.pt', 'r3_s5.pt']"));
  CHECK_THAT(f.out, Contains("refused: [Errno 2] no such directory for the checkpoint: "));
  CHECK_THAT(f.out, Contains("mindspore: npu_run_checkpoint keeps torch states only"));
}

}  // namespace test_snapshots
