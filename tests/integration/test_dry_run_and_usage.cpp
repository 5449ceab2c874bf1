// --dry-run shows the plan without starting anything; bad input exits 2 with a clear message.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_dry_run_and_usage {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

TEST_CASE("dry run: text plan, nothing started", "[integration][dry-run]") {
  TempDir dir;
  const std::string witness = dir.file("started");
  const Finished f = run_npu_run({"--nproc-per-node", "2", "--devices", "4,6", "--dry-run",
                                  "--no-python", "/bin/sh", "-c", "touch " + witness, "x y"});
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(witness));
  CHECK_THAT(f.out, Contains("nothing is started") &&
                        Contains("local rank 1 -> rank 1, device 6") &&
                        Contains("command: /bin/sh -c 'touch ") && Contains("'x y'") &&
                        Contains("DEVICE_ID=6") && Contains("WORLD_SIZE=2"));
}

TEST_CASE("dry run: JSON plan for scripts", "[integration][dry-run]") {
  TempDir dir;
  const std::string logs = dir.file("x");
  const Finished f = run_npu_run({"--nproc-per-node", "4", "--dry-run", "--json", "--tee", "3",
                                  "--log-dir", logs, "--no-python", "/bin/true"});
  REQUIRE(f.exit_code == 0);
  const auto plan = nlohmann::json::parse(f.out);
  CHECK(plan["world_size"] == 4);
  REQUIRE(plan["workers"].size() == 4);
  CHECK(plan["workers"][3]["env"]["RANK"] == "3");
  CHECK(plan["workers"][3]["stdout"]["file"] == logs + "/none_XXXXXX/attempt_0/3/stdout.log");
  CHECK(plan["workers"][3]["console_prefix"] == "[default3]:");
  CHECK_FALSE(std::filesystem::exists(logs));  // a dry run creates nothing
}

TEST_CASE("usage errors: exit 2 with the value and the fix, before anything starts",
          "[integration][usage]") {
  TempDir dir;
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--nproc-per-node", "8", "--devices", "0-3", "--no-python", "/bin/true"},
       "--devices 0-3 names 4 devices but --nproc-per-node is 8"},
      {{"--nproc-per-nodes", "8", "train.py"}, "did you mean '--nproc-per-node'?"},
      {{"--nproc-per-node", "2"}, "no training script given"},
      {{"no_such_script.py"}, "training script 'no_such_script.py' not found"},
      {{"--no-python", "no-such-binary-xyz"},
       "'no-such-binary-xyz' is not an executable file on PATH"},
      {{"--tee", "5", "--no-python", "/bin/true"}, "--tee '5': '5' is not a valid stream code"},
      {{"--master-addr", "192.0.2.1", "--no-python", "/bin/true"},
       "'192.0.2.1' is not an address of this host"},
      {{"--log-dir", "/proc/version/logs", "--no-python", "/bin/true"},
       "--log-dir /proc/version/logs: cannot create"},
  };
  for (const Case& c : cases) {
    const Finished f = run_npu_run(c.args, {}, 20s, dir.path());
    INFO("args: " << c.args.front() << "...; stderr: " << f.err);
    CHECK(f.exit_code == 2);
    CHECK_THAT(f.err, Contains("npu_run: error: ") && Contains(c.message));
  }
}

TEST_CASE("usage errors: an unusable TMPDIR is named with the fix", "[integration][usage]") {
  const Finished f = run_npu_run({"--no-python", "/bin/true"}, {{"TMPDIR", "/proc/version"}});
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.err, Contains("cannot create a temporary directory in /proc/version") &&
                        Contains("set TMPDIR"));
}

TEST_CASE("usage errors: a bad PET_ variable is named as such", "[integration][usage]") {
  const Finished f = run_npu_run({"--no-python", "/bin/true"}, {{"PET_NPROC_PER_NODE", "many"}});
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.err, Contains("PET_NPROC_PER_NODE 'many'"));
}

TEST_CASE("usage: too low an open-files limit is named with the fix before anything starts",
          "[integration][usage]") {
  // npu_run under `prlimit --nofile=12`, started as the worker of an outer npu_run so that the
  // test process keeps its own limit; the outer one passes the inner one's exit code on.
  const Finished f =
      run_npu_run({"--no-python", "/usr/bin/prlimit", "--nofile=12", build_paths::kNpuRun,
                   "--nproc-per-node", "2", "--no-python", "/bin/echo", "started"});
  INFO(f.err);
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.err, Contains("the open-files limit (ulimit -n) is 12, but an agent with 2 workers "
                             "needs at least 96 (EMFILE otherwise); raise it: ulimit -n 1024"));
  CHECK(f.out.find("started") == std::string::npos);
  // A soft limit below what is needed is raised when the hard one allows it.
  const Finished raised =
      run_npu_run({"--no-python", "/usr/bin/prlimit", "--nofile=12:4096", build_paths::kNpuRun,
                   "--nproc-per-node", "2", "--no-python", "/bin/sh", "-c", "ulimit -n"});
  INFO(raised.err);
  CHECK(raised.exit_code == 0);
  CHECK_THAT(raised.out, Contains("96"));
}

}  // namespace test_dry_run_and_usage
