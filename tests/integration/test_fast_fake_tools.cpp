// The compiled fakes the health gate's benchmark uses (tests/tools/fast_fake_tools.cpp) print
// what the bash fakes print for a healthy node, call by call, and pass the node's checks; so a
// benchmark run with them measures the same gate.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <regex>

#include "support/build_paths.hpp"
#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_fast_fake_tools {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// A tool's exit code and output, its link_stat dates masked (they follow the clock).
std::pair<int, std::string> answer(const std::string& tool, const std::string& args,
                                   const std::string& scenario) {
  auto [code, out] = shell("NPU_RUN_FAKE_SCENARIO='" + scenario + "' '" + tool + "' " + args);
  static const std::regex date(R"(\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})");
  return {code, std::regex_replace(out, date, "DATE")};
}

}  // namespace

TEST_CASE("fast fake tools: a healthy node's answers are the bash fakes' answers",
          "[integration][health]") {
  TempDir dir;
  dir.write("scenario", "delay 0\n");
  const std::string scenario = dir.file("scenario");
  const std::string fast = build_paths::kFastFakeTools;
  const std::string bash = source_dir() + "/tests/tools/fake_tools";
  for (const char* args : {"-i 3 -link -g", "-i 3 -net_health -g", "-i 3 -ip -g", "-i 3 -tls -g",
                           "-i 3 -optical -g", "-i 3 -link_stat -g", "-i 0 -lldp -g",
                           "-i 3 -ping -g address 10.0.1.13", "-i 9 -link -g"}) {
    INFO("hccn_tool " << args);
    CHECK(answer(fast + "/hccn_tool", args, scenario) ==
          answer(bash + "/hccn_tool", args, scenario));
  }
  for (const char* args :
       {"info", "info -m", "info -t health -i 2 -c 0", "info -t spod-info -i 0 -c 0"}) {
    INFO("npu-smi " << args);
    CHECK(answer(fast + "/npu-smi", args, scenario) == answer(bash + "/npu-smi", args, scenario));
  }
  // A fact it cannot play is refused, not ignored.
  dir.write("faulty", "link_down 3\n");
  CHECK(answer(fast + "/hccn_tool", "-i 3 -link -g", dir.file("faulty")).first == 2);
}

TEST_CASE("fast fake tools: a node's checks pass, and a device refuses a second call",
          "[integration][health]") {
  TempDir dir;
  for (int i = 0; i < 8; ++i) dir.write("dev/davinci" + std::to_string(i), "");
  dir.write("scenario", "delay 0.3\n");
  const std::string fast = build_paths::kFastFakeTools;
  NpuRunProcess doctor({"doctor", "--devices"}, {{"NPU_RUN_DEV_ROOT", dir.file("dev")},
                                                 {"NPU_RUN_FAKE_SCENARIO", dir.file("scenario")},
                                                 {"PATH", fast + ":" + std::getenv("PATH")}});
  const Finished f = doctor.wait(60s);
  require_no_strays(doctor);
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("64 of 64 checks passed"));
  CHECK(::access(dir.file("scenario.collisions").c_str(), F_OK) != 0);
  // Two calls to device 2 at once from one shell (one parent), each holding the device for a
  // second: whichever takes it first answers, the other is refused (no sleep decides which).
  dir.write("slow", "delay 1\n");
  const std::string call = "'" + fast + "/hccn_tool' -i 2 -link -g";
  const auto [code, out] = shell("export NPU_RUN_FAKE_SCENARIO=" + dir.file("slow") + " && { " +
                                 call + " & " + call + " & wait; }");
  CHECK(count_occurrences(out, "hccn_tool is busy, please try again.") == 1);
  CHECK(count_occurrences(out, "link status: UP") == 1);
  CHECK_THAT(read_file(dir.file("slow.collisions")), Contains(" 2 -link"));
}

}  // namespace test_fast_fake_tools
