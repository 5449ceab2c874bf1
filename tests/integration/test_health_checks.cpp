// The health gate's node checks through the binary (`npu_run doctor --devices`), against the
// fake npu-smi, hccn_tool and nvidia-smi of tests/tools/fake_tools driven by scenario files.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_health_checks {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// A node with `devices` (davinciN, or nvidiaN with `gpu`), the fake tools first on PATH and
// the scenario `lines`.
struct FakeNode {
  explicit FakeNode(const std::string& scenario, bool gpu = false, int devices = 8) {
    for (int i = 0; i < devices; ++i)
      dir.write((gpu ? "dev/nvidia" : "dev/davinci") + std::to_string(i), "");
    dir.write("scenario", scenario);
    env = {{"NPU_RUN_DEV_ROOT", dir.path() + "/dev"},
           {"NPU_RUN_FAKE_SCENARIO", dir.path() + "/scenario"},
           {"PATH", source_dir() + "/tests/tools/fake_tools:" + std::getenv("PATH")}};
  }
  Finished doctor(std::vector<std::string> args) {
    args.insert(args.begin(), {"doctor", "--devices"});
    NpuRunProcess p(args, env);
    Finished f = p.wait(60s);
    require_no_strays(p);
    return f;
  }
  TempDir dir;
  EnvOverrides env;
};

}  // namespace

TEST_CASE("health checks: a healthy node passes every check of its 8 NPUs",
          "[integration][health]") {
  FakeNode node("style wide\n");
  const Finished f = node.doctor({});
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("64 of 64 checks passed"));
}

TEST_CASE("health checks: a link DOWN, an Alarm and a foreign process are named, exit 1",
          "[integration][health]") {
  FakeNode node(
      "link_down 5\nhealth 2 Alarm 80E18402 80E18401\nprocess 3 2698909 python3\n"
      "tls 1 1\nlink_flap 4 3\noptical 6 rx_low\n");
  Finished f = node.doctor({});
  INFO(f.out << f.err);
  CHECK(f.exit_code == 1);
  CHECK_THAT(f.out, Contains("fail    link device 5: link status: DOWN"));
  CHECK_THAT(f.out, Contains("fail    npu_health device 2: health Alarm, error codes 80E18402 "
                             "80E18401"));
  CHECK_THAT(f.out, Contains("device 3 is held by pid 2698909 (python3)"));
  CHECK_THAT(f.out, Contains("warn    link_stat device 4: the link went down 3 min ago"));
  CHECK_THAT(f.out, Contains("warn    optical device 6: Rx power of lane 0 is 0.0012 mW"));
  CHECK_THAT(f.out, Contains("the node fails its health gate"));

  f = node.doctor({"1,5", "--json"});
  CHECK(f.exit_code == 1);
  const auto json = nlohmann::json::parse(f.out);
  CHECK(json["failed"] == true);
  CHECK(json["tls_switch"] == nlohmann::json({{"1", 1}, {"5", 0}}));
}

TEST_CASE("health checks: A3's two dies per NPU are asked as NPU and chip",
          "[integration][health]") {
  FakeNode node("a3\nstyle wide\nhealth 5 Critical 80C98000\n");
  const Finished f = node.doctor({"4,5"});
  INFO(f.out << f.err);
  CHECK(f.exit_code == 1);
  CHECK_THAT(f.out, Contains("npu_health device 5: health Critical, error codes 80C98000") &&
                        Contains("npu-smi info -t health -i 2 -c 1"));
}

TEST_CASE("health checks: a hanging tool is stopped at its timeout and reported as not run",
          "[integration][health]") {
  FakeNode node("hang hccn_tool:-link:5\nbusy_once\n");
  const Finished f = node.doctor({"4,5", "--health-timeout", "20,1"});
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);  // not run is not a failure
  CHECK_THAT(f.out,
             Contains("not run link device 5: hccn_tool -i 5 -link -g: no answer within 1.0 s"));
  CHECK(f.seconds < 10);
  // The first call answered "busy" (exit 11) and was run again.
  CHECK(::access(node.dir.file("scenario.busy-answered").c_str(), F_OK) == 0);
  CHECK_THAT(f.out, Contains("15 of 16 checks passed"));
}

TEST_CASE("health checks: the budget cuts off what has not answered, said as not run",
          "[integration][health]") {
  FakeNode node("delay 0.3\n");
  const Finished f = node.doctor({"0-3", "--health-timeout", "1"});
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("not run: the health checks' budget of 1.0 s ran out"));
  CHECK(f.seconds < 8);
}

TEST_CASE("health checks: GPUs' ECC errors and foreign processes fail", "[integration][health]") {
  FakeNode node("devices 0 1\necc 1 3\ngpu_process 0 4242\n", /*gpu=*/true, 2);
  const Finished f = node.doctor({});
  INFO(f.out << f.err);
  CHECK(f.exit_code == 1);
  CHECK_THAT(f.out, Contains("fail    gpu_ecc device 1: 3 uncorrected volatile ECC errors"));
  CHECK_THAT(f.out, Contains("fail    gpu_processes device 0: GPU 0 is held by pid 4242"));
}

TEST_CASE("health checks: no tools: the checks are skipped and said once, the user's runs",
          "[integration][health]") {
  FakeNode node("");
  node.env["PATH"] = "/usr/bin:/bin";
  const Finished f = node.doctor({"--health-check-cmd", "echo checking; echo port 3 down; false"});
  INFO(f.out << f.err);
  CHECK(f.exit_code == 1);
  CHECK_THAT(f.out, Contains("skipped npu-smi: npu-smi is not on PATH"));
  CHECK_THAT(f.out, Contains("skipped hccn_tool: hccn_tool is not on PATH"));
  CHECK_THAT(f.out, Contains("fail    user_check: --health-check-cmd exit 1: port 3 down"));
}

namespace {

// One line of SCENARIO.calls (the fakes' `log_calls`).
struct LoggedCall {
  double start = 0;
  double end = 0;
  std::string tool;
  std::string device;
};

std::vector<LoggedCall> logged_calls(const std::string& path) {
  std::vector<LoggedCall> calls;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    LoggedCall call;
    std::string parent;
    if (fields >> call.start >> call.end >> parent >> call.tool >> call.device)
      calls.push_back(call);
  }
  return calls;
}

// The most calls of `tool` that ran at one moment.
size_t most_at_once(const std::vector<LoggedCall>& calls, const std::string& tool) {
  size_t most = 0;
  for (const LoggedCall& at : calls) {
    if (at.tool != tool) continue;
    const auto running = std::count_if(calls.begin(), calls.end(), [&](const LoggedCall& c) {
      return c.tool == tool && c.start <= at.start && at.start < c.end;
    });
    most = std::max(most, static_cast<size_t>(running));
  }
  return most;
}

}  // namespace

TEST_CASE("health checks: hccn_tool's devices are asked side by side, each one call at a time",
          "[integration][health]") {
  FakeNode node("delay 0.2\nlog_calls\n");
  const Finished f = node.doctor({});
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("64 of 64 checks passed"));
  // The fake answers "busy" to a second call on a device while one runs there.
  CHECK(::access(node.dir.file("scenario.collisions").c_str(), F_OK) != 0);
  const std::vector<LoggedCall> calls = logged_calls(node.dir.file("scenario.calls"));
  std::map<std::string, std::vector<LoggedCall>> by_device;
  size_t npu_smi = 0;
  for (const LoggedCall& call : calls) {
    if (call.tool == "hccn_tool") by_device[call.device].push_back(call);
    npu_smi += call.tool == "npu-smi" ? 1 : 0;
  }
  REQUIRE(by_device.size() == 8);
  for (const auto& [device, mine] : by_device) {
    INFO("device " << device);
    CHECK(mine.size() == 6);
    CHECK(most_at_once(mine, "hccn_tool") == 1);
  }
  CHECK(most_at_once(calls, "hccn_tool") > 1);
  // The table shows every chip OK: no chip is asked about on its own.
  CHECK(npu_smi == 2);
  CHECK(most_at_once(calls, "npu-smi") == 1);
}

}  // namespace test_health_checks
