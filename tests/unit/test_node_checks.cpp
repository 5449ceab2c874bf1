// The node checks' plan and judges: which calls a node makes and what each answer means, driven
// with canned answers (no process is started).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <deque>
#include <functional>
#include <nlohmann/json.hpp>

#include "health/node_checks.hpp"
#include "health/tool_paths.hpp"

namespace test_node_checks {

using namespace npu_run;
using Catch::Matchers::Contains;

namespace {

ToolRun answer(std::string out, int code = 0, std::string err = {}) {
  ToolRun run;
  run.end = ToolRun::End::kExited;
  run.code = code;
  run.out = std::move(out);
  run.err = std::move(err);
  return run;
}

// `npu-smi info` on an A2 node: chips 0-7 OK unless `health` says otherwise ("" leaves the
// chip out), then `processes` (rows of the process table).
std::string table(const std::map<int, std::string>& health = {},
                  const std::string& processes = "") {
  std::string text = "| NPU Name | Health | x |\n| Chip | Bus-Id | y |\n";
  for (int npu = 0; npu < 8; ++npu) {
    const auto special = health.find(npu);
    const std::string state = special == health.end() ? "OK" : special->second;
    if (state.empty()) continue;
    text += fmt::format("| {} 910B3 | {} | 1 |\n| 0 | 0000:C{}:00.0 | 0 |\n", npu, state, npu);
  }
  return text + "| NPU Chip | Process id | Process name | Process memory(MB) |\n" + processes;
}

// A healthy A2 node's answers, unless `special` answers first.
ToolRun healthy(const PlannedCall& call) {
  const std::string d = std::to_string(call.device);
  if (call.check == "npu_map") {
    std::string map = "NPU ID  Chip ID  Chip Logic ID  Chip Name\n";
    for (int i = 0; i < 8; ++i) map += fmt::format("{0} 0 {0} Ascend 910B3\n", i);
    return answer(map);
  }
  if (call.check == "npu_processes") return answer(table());
  if (call.check == "npu_health") return answer("Health Status : OK\nError Code : NA\n");
  if (call.check == "link") return answer("link status: UP\n");
  if (call.check == "net_health") return answer("net health status: Success\n");
  if (call.check == "ip") return answer("ipaddr:10.0.0." + d + "\nnetmask:255.255.255.0\n");
  if (call.check == "tls") return answer("dev_id:" + d + ", tls switch[0](0:disable, 1:enable)\n");
  if (call.check == "optical") return answer("optical info:\npresent : present\n");
  if (call.check == "link_stat") {
    return answer(
        "[devid 0]current time : Tue Oct 28 21:46:46 2025\n"
        "[devid 0]    Sun Oct  5 10:13:51 2025    LINK UP\n");
  }
  return answer("");
}

NodeVerdict run_plan(NodeCheckSettings settings,
                     const std::function<std::optional<ToolRun>(const PlannedCall&)>& special,
                     std::vector<PlannedCall>* made = nullptr) {
  NodeCheckPlan plan(std::move(settings));
  std::deque<PlannedCall> calls;
  for (auto& call : plan.first_calls()) calls.push_back(call);
  while (!calls.empty()) {
    const PlannedCall call = calls.front();
    calls.pop_front();
    if (made) made->push_back(call);
    ToolRun run = special(call).value_or(healthy(call));
    run.argv = call.argv;
    for (auto& more : plan.record(call, run)) calls.push_back(more);
  }
  return plan.verdict();
}

NodeCheckSettings ascend(std::vector<int> devices) {
  NodeCheckSettings settings;
  settings.host = "host-c";
  settings.kind = NodeCheckSettings::Devices::kAscend;
  settings.devices = std::move(devices);
  settings.tools = {"/usr/local/bin/npu-smi", "/usr/local/Ascend/driver/tools/hccn_tool", ""};
  return settings;
}

std::vector<HealthFinding> failures(const NodeVerdict& verdict) {
  return verdict.with_status(HealthStatus::kFail);
}

}  // namespace

TEST_CASE("node checks: a healthy node passes every check of every device", "[health]") {
  std::vector<PlannedCall> made;
  const NodeVerdict verdict = run_plan(
      ascend({4, 5}), [](const PlannedCall&) { return std::nullopt; }, &made);
  CHECK_FALSE(verdict.failed());
  // npu-smi: the map and the table (its chips are OK: no health query); hccn_tool: 6 per device.
  CHECK(made.size() == 2 + 12);
  CHECK(verdict.with_status(HealthStatus::kPass).size() == verdict.findings.size());
  CHECK(verdict.tls_switch == std::map<int, int>{{4, 0}, {5, 0}});
  int chip_health_passes = 0;
  for (const auto& f : verdict.findings) chip_health_passes += f.check == "npu_health" ? 1 : 0;
  CHECK(chip_health_passes == 2);
}

TEST_CASE("node checks: npu-smi is asked about a chip only when its table row is not OK",
          "[health]") {
  const auto health_calls = [](const std::optional<ToolRun>& table_answer) {
    std::vector<PlannedCall> made;
    run_plan(
        ascend({4, 5, 6}),
        [&](const PlannedCall& call) -> std::optional<ToolRun> {
          if (call.check == "npu_processes") return table_answer;
          return std::nullopt;
        },
        &made);
    std::vector<std::vector<std::string>> asked;
    for (const auto& call : made) {
      if (call.check == "npu_health") asked.push_back(call.argv);
    }
    return asked;
  };
  const auto query = [](int npu) {
    return std::vector<std::string>{"/usr/local/bin/npu-smi", "info", "-t", "health", "-i",
                                    std::to_string(npu),      "-c",   "0"};
  };
  // 4 OK: not asked; 5 Warning: asked, for its codes; 6 missing from the table: asked.
  CHECK(health_calls(answer(table({{5, "Warning"}, {6, ""}}))) ==
        std::vector<std::vector<std::string>>{query(5), query(6)});
  // No table (npu-smi info failed, timed out): every chip is asked.
  ToolRun timed_out = answer("");
  timed_out.end = ToolRun::End::kTimedOut;
  CHECK(health_calls(timed_out) ==
        std::vector<std::vector<std::string>>{query(4), query(5), query(6)});
  CHECK(health_calls(answer("npu-smi: dcmi module initialize failed\n", 255)).size() == 3);
}

TEST_CASE("node checks: a link DOWN, an Alarm and a foreign process fail, naming the device",
          "[health]") {
  const NodeVerdict verdict =
      run_plan(ascend({2, 5}), [](const PlannedCall& call) -> std::optional<ToolRun> {
        if (call.check == "link" && call.device == 5) return answer("link status: DOWN\n");
        if (call.check == "npu_health" && call.device == 2)
          return answer("Health Status : Alarm\nError Code : 80E18402 80E18401\n");
        if (call.check == "npu_processes")
          return answer(table({{2, "Alarm"}}, "| 2       0   | 31337   |      | 600 |\n"));
        return std::nullopt;
      });
  const auto failed = failures(verdict);
  REQUIRE(failed.size() == 3);
  CHECK(failed[0].check == "npu_health");
  CHECK(failed[0].detail == "health Alarm, error codes 80E18402 80E18401");
  CHECK_THAT(failed[0].fix, Contains("npu-smi info -t health -i 2 -c 0"));
  CHECK(failed[1].check == "npu_processes");
  CHECK(failed[1].device == 2);
  CHECK_THAT(failed[1].detail, Contains("device 2 is held by pid 31337"));
  CHECK(failed[2].check == "link");
  CHECK(failed[2].device == 5);
  CHECK(failed[2].detail == "link status: DOWN");
  CHECK_THAT(format_verdict_text(verdict), Contains("fail    link device 5: link status: DOWN"));
}

TEST_CASE("node checks: the container case names the process through /proc", "[health]") {
  auto settings = ascend({0});
  settings.command_of = [](long pid) { return pid == 77 ? std::string("python3 old.py") : ""; };
  const NodeVerdict verdict =
      run_plan(settings, [](const PlannedCall& call) -> std::optional<ToolRun> {
        if (call.check != "npu_processes") return std::nullopt;
        return answer(
            "| 0 910B3 | OK | 1 |\n| 0 | 0000:C1:00.0 | 0 |\n| NPU Chip | Process id |\n"
            "| 0 0 | 77 |  | 600 |\n");
      });
  REQUIRE(failures(verdict).size() == 1);
  CHECK(failures(verdict)[0].detail == "device 0 is held by pid 77 (python3 old.py)");
}

TEST_CASE("node checks: no address, mixed families, a bad net health fail", "[health]") {
  const NodeVerdict verdict =
      run_plan(ascend({0, 1, 2}), [](const PlannedCall& call) -> std::optional<ToolRun> {
        if (call.check == "ip" && call.device == 0)
          return answer("", 13, "Get ipconf failed, because no ip was preset there!\n");
        if (call.check == "ip" && call.device == 2)
          return answer("ipaddr:fd00::2\nnetmask:ffff::\n");
        if (call.check == "net_health" && call.device == 1)
          return answer("net health status: Receive timeout\n");
        return std::nullopt;
      });
  const auto failed = failures(verdict);
  REQUIRE(failed.size() == 3);
  CHECK(failed[0].device == -1);
  CHECK(failed[0].detail == "devices mix address families: IPv4 on [1], IPv6 on [2]");
  CHECK(failed[1].detail ==
        "no address set on device 0 (exit 13: Get ipconf failed, because no ip was preset "
        "there!)");
  CHECK_THAT(failed[1].fix, Contains("hccn_tool -i 0 -ip -s address"));
  CHECK(failed[2].check == "net_health");
  CHECK(failed[2].detail == "net health status: Receive timeout");
}

TEST_CASE("node checks: warnings never fail (Warning health, optics, a recent flap)", "[health]") {
  const NodeVerdict verdict =
      run_plan(ascend({0, 1}), [](const PlannedCall& call) -> std::optional<ToolRun> {
        if (call.check == "npu_processes") return answer(table({{0, "Warning"}}));
        if (call.check == "npu_health" && call.device == 0)
          return answer("Health Status : Warning\nError Code : 80E18008\n");
        if (call.check == "optical" && call.device == 1)
          return answer("optical info:\npresent : not present\nTx Power0 : NA\n");
        if (call.check == "link_stat" && call.device == 0) {
          return answer(
              "[devid 0]current time : Tue Oct 28 21:46:46 2025\n"
              "[devid 0]link down count : 4\n"
              "[devid 0]    Tue Oct 28 21:43:40 2025    LINK UP\n"
              "[devid 0]    Tue Oct 28 21:43:30 2025    LINK DOWN\n");
        }
        return std::nullopt;
      });
  CHECK_FALSE(verdict.failed());
  const auto warned = verdict.with_status(HealthStatus::kWarn);
  REQUIRE(warned.size() == 3);
  CHECK(warned[0].detail == "health Warning, error codes 80E18008");
  CHECK(warned[1].detail ==
        "the link went down 3 min ago (Tue Oct 28 21:43:30 2025 LINK DOWN); link down count "
        "since boot: 4");
  CHECK(warned[2].detail ==
        "no optical module present (expected unless the board uses backplane links)");
}

TEST_CASE("node checks: a call that does not answer is not run, never a pass", "[health]") {
  const NodeVerdict verdict =
      run_plan(ascend({3}), [](const PlannedCall& call) -> std::optional<ToolRun> {
        if (call.check == "link") {
          ToolRun run;
          run.end = ToolRun::End::kTimedOut;
          run.elapsed_ms = 2000;
          return run;
        }
        if (call.check == "net_health") {
          ToolRun busy = answer("hccn_tool is busy, please try again.\n", 11);
          busy.attempts = 5;
          return busy;
        }
        if (call.check == "tls") return answer("", 14, "No certificate found, please set certs!\n");
        return std::nullopt;
      });
  CHECK_FALSE(verdict.failed());
  const auto not_run = verdict.with_status(HealthStatus::kNotRun);
  REQUIRE(not_run.size() == 2);
  CHECK(not_run[0].detail == "hccn_tool -i 3 -link -g: no answer within 2.0 s (stopped)");
  CHECK(not_run[1].detail == "hccn_tool -i 3 -net_health -g: still busy after 5 tries");
  const auto skipped = verdict.with_status(HealthStatus::kSkipped);
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0].check == "tls");
  CHECK(verdict.tls_switch.empty());  // unknown, so the job check leaves it out
}

TEST_CASE("node checks: missing tools are skipped, said once each", "[health]") {
  auto settings = ascend({0, 1});
  settings.tools = {};
  std::vector<PlannedCall> made;
  const NodeVerdict verdict = run_plan(
      settings, [](const PlannedCall&) { return std::nullopt; }, &made);
  CHECK(made.empty());
  const auto skipped = verdict.with_status(HealthStatus::kSkipped);
  REQUIRE(skipped.size() == 2);
  CHECK_THAT(skipped[0].detail, Contains("npu-smi is not on PATH"));
  CHECK_THAT(skipped[1].detail, Contains("hccn_tool is not on PATH"));
}

TEST_CASE("node checks: GPUs: ECC errors, pending remapping and foreign processes fail",
          "[health]") {
  NodeCheckSettings settings;
  settings.kind = NodeCheckSettings::Devices::kNvidia;
  settings.devices = {0, 1, 2};
  settings.tools.nvidia_smi = "/usr/bin/nvidia-smi";
  const NodeVerdict verdict =
      run_plan(settings, [](const PlannedCall& call) -> std::optional<ToolRun> {
        if (call.check == "gpu_ecc") {
          return answer(
              "0, 00000000:18:00.0, 0\n1, 00000000:19:00.0, 3\n2, 00000000:1A:00.0, "
              "[N/A]\n3, 00000000:1B:00.0, 9\n");
        }
        if (call.check == "gpu_remap") return answer("00000000:1A:00.0, Yes, No\n");
        return answer("4242, 00000000:18:00.0, 1024 MiB\n5151, 00000000:1B:00.0, 9 MiB\n");
      });
  const auto failed = failures(verdict);
  REQUIRE(failed.size() == 3);  // GPU 3 is not this job's
  CHECK(failed[0].detail == "GPU 0 is held by pid 4242");
  CHECK(failed[1].detail == "3 uncorrected volatile ECC errors");
  CHECK(failed[1].device == 1);
  CHECK(failed[2].detail == "a row remapping is pending: the GPU needs a reset");
}

TEST_CASE("node checks: --health-check-cmd passes on 0, else its last line is the reason",
          "[health]") {
  NodeCheckSettings settings;
  settings.user_check = "check_fabric --quick";
  std::vector<PlannedCall> made;
  const NodeVerdict verdict = run_plan(
      settings, [](const PlannedCall&) { return answer("checking\nfabric port 3 is down\n", 1); },
      &made);
  REQUIRE(made.size() == 1);
  CHECK(made[0].argv == std::vector<std::string>{"/bin/sh", "-c", "check_fabric --quick"});
  REQUIRE(failures(verdict).size() == 1);
  CHECK(failures(verdict)[0].detail == "--health-check-cmd exit 1: fabric port 3 is down");
}

TEST_CASE("health tools: PATH first, then the standard Ascend places", "[health]") {
  const auto found = locate_health_tools("/opt/bin::/usr/bin", [](const std::string& path) {
    return path == "/opt/bin/npu-smi" || path == "/usr/local/bin/npu-smi" ||
           path == "/usr/local/Ascend/driver/tools/hccn_tool" || path == "hccn_tool";
  });
  CHECK(found.npu_smi == "/opt/bin/npu-smi");
  CHECK(found.hccn_tool == "/usr/local/Ascend/driver/tools/hccn_tool");
  CHECK(found.nvidia_smi.empty());
}

TEST_CASE("health verdict: JSON both ways", "[health]") {
  NodeVerdict verdict;
  verdict.host = "host-c";
  verdict.findings = {{"link", 5, HealthStatus::kFail, "link status: DOWN", "fix it"},
                      {"tls", 5, HealthStatus::kNotRun, "x", ""}};
  verdict.tls_switch = {{5, 1}};
  verdict.settings = {{"HCCL_BUFFSIZE", "200"}};
  const nlohmann::json json = verdict;
  CHECK(json["failed"] == true);
  const auto back = json.get<NodeVerdict>();
  CHECK(back.findings.size() == 2);
  CHECK(back.findings[1].status == HealthStatus::kNotRun);
  CHECK(back.tls_switch == verdict.tls_switch);
  CHECK(back.settings == verdict.settings);
  CHECK(first_failure_line(back) == "link device 5: link status: DOWN (fix: fix it)");
}

}  // namespace test_node_checks
