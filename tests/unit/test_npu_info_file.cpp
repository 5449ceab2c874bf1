// FaultDiag's npu_info files: the collector's order of commands, its command lines (the tools'
// standard paths, whatever ran), and its layout of output and blank lines.
#include <stdlib.h>

#include <catch2/catch.hpp>

#include "health/npu_info_file.hpp"

namespace test_npu_info_file {

using namespace npu_run;

namespace {

std::vector<std::string> labels(const std::vector<NpuInfoEntry>& entries) {
  std::vector<std::string> out;
  for (const NpuInfoEntry& e : entries) out.push_back(e.label);
  return out;
}

}  // namespace

TEST_CASE("npu_info file: the collector's order, with the standard paths in the command lines",
          "[health][faultdiag]") {
  const HealthToolPaths tools{"/opt/bin/npu-smi", "/opt/tools/hccn_tool", ""};
  CHECK(labels(npu_info_first(tools)) ==
        std::vector<std::string>{"/usr/local/bin/npu-smi info -m"});
  CHECK(npu_info_first(tools)[0].argv ==
        std::vector<std::string>{"/opt/bin/npu-smi", "info", "-m"});
  const std::vector<ChipMapRow> chips = {{3, 1, 7, "Ascend 910"}};
  const auto rest = npu_info_rest(tools, chips, {7}, {"/usr/local/Ascend/driver/version.info"});
  CHECK(labels(rest) ==
        std::vector<std::string>{
            "/usr/local/bin/npu-smi info", "cat /usr/local/Ascend/driver/version.info",
            "/usr/local/bin/npu-smi info -i 3 -c 1 -t health",
            "/usr/local/Ascend/driver/tools/hccn_tool -i 7 -net_health -g",
            "/usr/local/Ascend/driver/tools/hccn_tool -i 7 -ip -g",
            "/usr/local/Ascend/driver/tools/hccn_tool -i 7 -link_stat -g",
            "/usr/local/Ascend/driver/tools/hccn_tool -i 7 -link -g",
            "/usr/local/Ascend/driver/tools/hccn_tool -i 7 -tls -g | grep switch",
            "/usr/local/Ascend/driver/tools/hccn_tool -i 7 -optical -g | grep prese",
            "/usr/local/Ascend/driver/tools/hccn_tool -i 7 -optical -g",
            "/usr/local/Ascend/driver/tools/hccn_tool -i 7 -stat -g",
            "/usr/local/Ascend/driver/tools/hccn_tool -i 7 -fec -g",
            "/usr/local/bin/npu-smi info -i 3 -c 1 -t ecc",
            "/usr/local/bin/npu-smi info -i 3 -c 1 -t board",
            "/usr/local/bin/npu-smi info -i 3 -c 1 -t usages"});
  CHECK(rest[1].argv.empty());
  CHECK(rest[1].file == "/usr/local/Ascend/driver/version.info");
  CHECK(rest[3].argv ==
        std::vector<std::string>{"/opt/tools/hccn_tool", "-i", "7", "-net_health", "-g"});
  // Without npu-smi: hccn_tool's entries only; without either: nothing.
  const auto hccn_only = npu_info_rest({"", "/opt/tools/hccn_tool", ""}, {}, {0, 1}, {});
  CHECK(hccn_only.size() == 18);
  CHECK(hccn_only[1].label == "/usr/local/Ascend/driver/tools/hccn_tool -i 1 -net_health -g");
  CHECK(npu_info_rest({}, {}, {0}, {}).empty());
  CHECK(npu_info_first({}).empty());
}

TEST_CASE("npu_info file: a Datetime line, then each command, its output and two blank lines",
          "[health][faultdiag]") {
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  CHECK(npu_info_header(int64_t{1'764'121'683} * 1'000'000 + 42) ==
        "Datetime: 2025-11-26 01:48:03.000042\n\n\n");
  NpuInfoEntry tls{"hccn_tool -i 0 -tls -g | grep switch", {"x"}, "", "switch"};
  CHECK(npu_info_block(tls, "dev_id:0, tls switch[0](0:disable, 1:enable)\ncert info\n") ==
        "hccn_tool -i 0 -tls -g | grep switch\ndev_id:0, tls switch[0](0:disable, 1:enable)\n\n\n");
  NpuInfoEntry link{"hccn_tool -i 0 -link -g", {"x"}, "", ""};
  CHECK(npu_info_block(link, "link status: UP") ==
        "hccn_tool -i 0 -link -g\nlink status: UP\n\n\n");
  CHECK(npu_info_block(link, "") == "hccn_tool -i 0 -link -g\n\n\n");
}

}  // namespace test_npu_info_file
