// Restarts that know the cause (rendezvous/state/failure_class.hpp), through the real binary: a
// script that fails the same way twice stops with 123, one broken at start stops at once, a
// device fault or the OOM killer is the node's (infrastructure), a random crash restarts as it
// always did.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_restart_classes {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// train.py: beats 'step 0'..'step 2' through NPU_RUN_PROGRESS, then runs `then` in step().
std::string train_script(const TempDir& dir, const std::string& then) {
  return dir.write("train.py",
                   "import os, sys, time\n"
                   "sys.path.insert(0, '" +
                       source_dir() +
                       "/python')\n"
                       "import npu_run_progress\n"
                       "attempt = int(os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
                       "def step(i):\n"
                       "    npu_run_progress.beat(f'step {i}')\n"
                       "    if i == 3:\n" +
                       then +
                       "for i in range(4):\n"
                       "    step(i)\n");
}

}  // namespace

TEST_CASE("restart classes: the same ValueError at the same place twice stops with 123",
          "[integration][classify]") {
  TempDir dir;
  const std::string script = train_script(dir, "        raise ValueError(f'bad batch {i}')\n");
  NpuRunProcess p({"--nproc-per-node", "2", "--max-restarts", "5", script});
  const Finished f = p.wait(60s);
  INFO(f.err);
  CHECK(f.exit_code == 123);
  CHECK_THAT(f.err, Contains("restart 1 of 5"));
  CHECK_THAT(f.err, !Contains("restart 2 of 5"));
  CHECK_THAT(f.err, Contains("deterministic: ValueError at train.py:8 in step after beat "
                             "'step 3', twice: not restarting (exit 123"));
  require_no_strays(p);
}

TEST_CASE("restart classes: a ModuleNotFoundError at start stops at once, no restart",
          "[integration][classify]") {
  TempDir dir;
  const std::string script = dir.write("train.py", "import os\nimport no_such_module_here\n");
  NpuRunProcess p({"--nproc-per-node", "2", "--max-restarts", "5", script});
  const Finished f = p.wait(60s);
  INFO(f.err);
  CHECK(f.exit_code == 123);
  CHECK_THAT(f.err, Contains("deterministic: ModuleNotFoundError at train.py:2 in <module> at "
                             "start"));
  CHECK_THAT(f.err, !Contains("restart 1 of 5"));
  // --startup-window 0: the same failure is only "the same twice".
  NpuRunProcess late(
      {"--nproc-per-node", "1", "--max-restarts", "5", "--startup-window", "0", script});
  const Finished g = late.wait(60s);
  INFO(g.err);
  CHECK(g.exit_code == 123);
  CHECK_THAT(g.err, Contains("restart 1 of 5") && !Contains("restart 2 of 5"));
  CHECK_THAT(g.err, Contains("ModuleNotFoundError at train.py:2 in <module>, twice"));
  require_no_strays(p);
  require_no_strays(late);
}

// No traceback: `python -m` names the missing module in one line; a script that fails the same
// way, with the same last line and exit, twice, is as deterministic as a repeated exception.
TEST_CASE("restart classes: failures without a traceback are told by their last line and exit",
          "[integration][classify]") {
  NpuRunProcess module({"--max-restarts", "2", "-m", "no_such_module_xyz"});
  const Finished f = module.wait(60s);
  INFO(f.err);
  CHECK(f.exit_code == 123);
  CHECK_THAT(f.err, Contains("Python found no module 'no_such_module_xyz' at start") &&
                        Contains("PYTHONPATH") && !Contains("restart 1 of 2"));
  NpuRunProcess twice({"--max-restarts", "3", "--startup-window", "0", "--no-python", "/bin/sh",
                       "-c", "echo 'cannot open shard 0' >&2; exit 4"});
  const Finished g = twice.wait(60s);
  INFO(g.err);
  CHECK(g.exit_code == 123);
  CHECK_THAT(g.err, Contains("restart 1 of 3") && !Contains("restart 2 of 3"));
  CHECK_THAT(g.err, Contains("'cannot open shard 0', then exit code 4, twice"));
  require_no_strays(module);
  require_no_strays(twice);
}

TEST_CASE("restart classes: a usage error of the script stops at once", "[integration][classify]") {
  TempDir dir;
  const std::string script = dir.write("train.py",
                                       "import argparse\np = argparse.ArgumentParser()\n"
                                       "p.add_argument('--cfg', required=True)\np.parse_args()\n");
  NpuRunProcess p({"--max-restarts", "3", script, "--cgf", "a.yaml"});
  const Finished f = p.wait(60s);
  INFO(f.err);
  CHECK(f.exit_code == 123);
  CHECK_THAT(f.err, Contains("deterministic: a usage error at start"));
  require_no_strays(p);
}

TEST_CASE("restart classes: a crash somewhere new each time restarts as before",
          "[integration][classify]") {
  TempDir dir;
  // A different place every attempt (the line differs), then success on the third.
  const std::string script = train_script(dir,
                                          "        if attempt == 0: raise RuntimeError('first')\n"
                                          "        if attempt == 1:\n"
                                          "            raise RuntimeError('second')\n");
  NpuRunProcess p({"--nproc-per-node", "2", "--max-restarts", "3", script});
  const Finished f = p.wait(60s);
  INFO(f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.err, Contains("[other: ") && Contains("restart 2 of 3"));
  require_no_strays(p);
}

TEST_CASE("restart classes: an HCCL EI0006 line is the node's fault, named as infrastructure",
          "[integration][classify]") {
  TempDir dir;
  const std::string script = train_script(
      dir,
      "        if attempt == 0:\n"
      "            print('[ERROR] HCCL(42): EI0006: Getting socket times out.', file=sys.stderr)\n"
      "            sys.exit(1)\n");
  // One node and no spare: nothing to replace it with, so the restart is counted.
  NpuRunProcess p({"--nproc-per-node", "2", "--max-restarts", "1", script});
  const Finished f = p.wait(60s);
  INFO(f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.err, Contains("[infrastructure: rank ") &&
                        Contains("named a fault: HCCL could not set up a link to a peer in time "
                                 "(EI0006): [ERROR] HCCL(42): EI0006"));
  CHECK_THAT(f.err, Contains("restart 1 of 1"));
  require_no_strays(p);
}

TEST_CASE("restart classes: a worker the OOM killer killed is the node's fault",
          "[integration][classify]") {
  // The test moves itself into a memory cgroup of its own while it starts npu_run, which with
  // its worker inherits it; cgroup v1 (this machine) or v2.
  namespace fs = std::filesystem;
  const fs::path group = "/sys/fs/cgroup/memory/npu_run_oom_test_" + std::to_string(getpid());
  std::error_code ec;
  fs::create_directory(group, ec);
  if (ec || !fs::exists(group / "memory.limit_in_bytes")) {
    WARN("no writable cgroup v1 memory controller here: " << ec.message());
    return;
  }
  // The agent shares the group: an ASan build's agent holds a quarantine of freed memory, and
  // the kernel would pick it, the largest. The worker offers itself first (oom_score_adj), and
  // the limit leaves the agent room.
  std::ofstream(group / "memory.limit_in_bytes") << (400 << 20);
  TempDir dir;
  const std::string script =
      dir.write("train.py",
                "import os\nif os.environ['TORCHELASTIC_RESTART_COUNT'] == '0':\n"
                "    open('/proc/self/oom_score_adj', 'w').write('1000')\n"
                "    x = bytearray(1 << 30)\n");
  std::ofstream(group / "cgroup.procs") << getpid() << std::flush;
  auto p = std::make_unique<NpuRunProcess>(std::vector<std::string>{"--max-restarts", "1", script});
  std::ofstream("/sys/fs/cgroup/memory/cgroup.procs") << getpid() << std::flush;
  const Finished f = p->wait(60s);
  INFO(f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.err, Contains("was killed by the kernel's OOM killer; no spare (--spares) to take "
                             "its place]"));
  require_no_strays(*p);
  p.reset();
  fs::remove(group, ec);
}

}  // namespace test_restart_classes
