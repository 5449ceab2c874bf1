// The CANN logs of a failed attempt, collected and read (issue 46), with stand-in workers that
// write what CANN would (a plog per process, tests/data/cann_logs): every plog lands in the
// attempt's process_log/ unless the user chose a place, the link at fault is named under the
// rank's row and in the root cause, a broken link counts as the node's fault, and the attempt
// directory has FaultDiag's layout.
#include <catch2/catch.hpp>
#include <filesystem>

#include "support/build_paths.hpp"
#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_cann_logs {

using namespace npu_run::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// Local rank 1 writes `fixture` as its plog where CANN would and fails; rank 0 waits.
std::vector<std::string> failing_link_worker(const std::string& fixture) {
  const std::string plog = std::string(build_paths::kTestData) + "/cann_logs/" + fixture;
  return {"--no-python", "/bin/sh", "-c",
          "dir=\"${ASCEND_PROCESS_LOG_PATH:-$HOME/ascend/log}/debug/plog\"; mkdir -p \"$dir\"; "
          "if [ \"$LOCAL_RANK\" = 1 ]; then cp " +
              plog +
              " \"$dir/plog-$$_20261128100231.log\"; echo 'training step 3'; exit 1; fi; "
              "exec sleep 30"};
}

fs::path only_run_dir(const std::string& logs) {
  return fs::directory_iterator(logs)->path();
}

}  // namespace

TEST_CASE("cann logs: a rank's plog in its attempt names the link at fault and the command",
          "[integration][cann-logs]") {
  TempDir dir;
  std::vector<std::string> args{"--nproc-per-node",   "2",     "--log-dir",
                                dir.path() + "/logs", "--tee", "3"};
  for (const std::string& a : failing_link_worker("link_tls.log")) args.push_back(a);
  NpuRunProcess p(args);
  const Finished f = p.wait(60s);
  INFO(f.err);
  CHECK(f.exit_code == 1);
  const std::string named =
      "rank 1 could not connect to 10.0.1.13:16666, rank 13 (status: time out, TLS status: "
      "mismatch); run `hccn_tool -i 1 -tls -g` on both";
  CHECK_THAT(f.err, Contains("      HCCL's log: " + named));
  // A link the rank could not use is its node's fault: a spare's job, not a restart's.
  CHECK_THAT(f.err, Contains("failure class: infrastructure: rank 1 on node 0 (vm) named a "
                             "fault: " +
                             named));
  // FaultDiag's layout: process_log/ with CANN's own tree, rank-N.txt the training output.
  const fs::path attempt = only_run_dir(dir.path() + "/logs") / "attempt_0";
  size_t plogs = 0;
  for (const auto& entry : fs::directory_iterator(attempt / "process_log" / "debug" / "plog"))
    plogs += entry.path().filename().string().rfind("plog-", 0) == 0 ? 1 : 0;
  CHECK(plogs == 1);
  CHECK(fs::is_symlink(attempt / "rank-1.txt"));
  CHECK_THAT(read_file((attempt / "rank-1.txt").string()), Contains("training step 3"));
  require_no_strays(p);
}

TEST_CASE("cann logs: a place the user chose is kept, and read there", "[integration][cann-logs]") {
  TempDir dir;
  std::vector<std::string> args{"--nproc-per-node", "2", "--log-dir", dir.path() + "/logs"};
  for (const std::string& a : failing_link_worker("notify_wait.log")) args.push_back(a);
  NpuRunProcess p(args, {{"ASCEND_PROCESS_LOG_PATH", dir.path() + "/mine"}});
  const Finished f = p.wait(60s);
  INFO(f.err);
  CHECK(f.exit_code == 1);
  CHECK_THAT(f.err, Contains("HCCL's log: rank 1's AllReduce_10.0.1.2%eth0_60000_0_1732780000 "
                             "waited on remote rank 6"));
  CHECK(fs::exists(dir.path() + "/mine/debug/plog"));
  CHECK_FALSE(fs::exists(only_run_dir(dir.path() + "/logs") / "attempt_0" / "process_log"));
  // A peer that never came is not this node's fault.
  CHECK_THAT(f.err, !Contains("failure class: infrastructure"));
  require_no_strays(p);
}

}  // namespace test_cann_logs
