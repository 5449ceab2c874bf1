#include <catch2/catch.hpp>

#include "devices/device_discovery.hpp"
#include "support/temp_dir.hpp"

namespace test_device_discovery {

using namespace npu_run;
using npu_run::testing::TempDir;

namespace {

EnvMap dev_root(const TempDir& dir, EnvMap extra = {}) {
  extra["NPU_RUN_DEV_ROOT"] = dir.path();
  return extra;
}

}  // namespace

TEST_CASE("discovery counts davinciN nodes only, in numeric order", "[discovery]") {
  TempDir dev;
  for (const char* name : {"davinci0", "davinci1", "davinci10", "davinci2", "davinci_manager",
                           "davinciX", "hisi_hdc"}) {
    dev.write(name, "");
  }
  const auto found = discover_devices(dev_root(dev));
  CHECK(found.kind == DeviceKind::kAscend);
  CHECK(found.physical_ids == std::vector<int>{0, 1, 2, 10});
  CHECK(found.description == "4 Ascend NPUs in " + dev.path());
}

TEST_CASE("ASCEND_RT_VISIBLE_DEVICES restricts and orders the devices", "[discovery]") {
  TempDir dev;
  for (int i = 0; i < 8; ++i) dev.write("davinci" + std::to_string(i), "");
  CHECK(discover_devices(dev_root(dev, {{"ASCEND_RT_VISIBLE_DEVICES", "4,5,6,7"}})).physical_ids ==
        std::vector<int>{4, 5, 6, 7});
  CHECK(discover_devices(dev_root(dev, {{"ASCEND_RT_VISIBLE_DEVICES", "6,2"}})).physical_ids ==
        std::vector<int>{6, 2});
  // Ids without a device node are not visible; "-1" ends the list as in the runtimes.
  CHECK(discover_devices(dev_root(dev, {{"ASCEND_RT_VISIBLE_DEVICES", "1,9"}})).physical_ids ==
        std::vector<int>{1});
  CHECK(discover_devices(dev_root(dev, {{"ASCEND_RT_VISIBLE_DEVICES", "0,-1,3"}})).physical_ids ==
        std::vector<int>{0});
  CHECK(discover_devices(dev_root(dev, {{"ASCEND_RT_VISIBLE_DEVICES", ""}})).physical_ids.empty());
}

TEST_CASE("NVIDIA GPUs are the fallback, nvidiactl does not count", "[discovery]") {
  TempDir dev;
  for (const char* name : {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"}) dev.write(name, "");
  auto found = discover_devices(dev_root(dev));
  CHECK(found.kind == DeviceKind::kNvidia);
  CHECK(found.physical_ids == std::vector<int>{0, 1});
  found = discover_devices(dev_root(dev, {{"CUDA_VISIBLE_DEVICES", "1"}}));
  CHECK(found.physical_ids == std::vector<int>{1});
  // UUIDs cannot be mapped to device numbers: the count is what matters.
  found = discover_devices(dev_root(dev, {{"CUDA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb"}}));
  CHECK(found.physical_ids == std::vector<int>{0, 1});
}

TEST_CASE("no devices at all is reported as such", "[discovery]") {
  TempDir dev;
  const auto found = discover_devices(dev_root(dev));
  CHECK(found.kind == DeviceKind::kNone);
  CHECK(found.physical_ids.empty());
  CHECK(found.description == "no Ascend or NVIDIA devices in " + dev.path());
}

}  // namespace test_device_discovery
