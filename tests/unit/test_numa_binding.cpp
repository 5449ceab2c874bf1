#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "devices/numa_binding.hpp"
#include "support/temp_dir.hpp"

namespace test_numa_binding {

using namespace npu_run;
using Catch::Matchers::Contains;
using npu_run::testing::TempDir;

namespace {

// A two-socket server: socket s holds NUMA nodes 2s and 2s+1; node n has physical cores
// 4n..4n+3 with hyper-thread siblings 16+4n..; two L3 caches per node (cores 0-1, 2-3); NPUs
// 0-7, two per node, plus a GPU and a NIC that must not count.
struct FakeSysfs {
  TempDir dir;
  FakeSysfs() {
    dir.write("devices/system/node/possible", "0-3\n");
    for (int node = 0; node < 4; ++node) {
      dir.write(
          fmt::format("devices/system/node/node{}/cpulist", node),
          fmt::format("{}-{},{}-{}\n", 4 * node, 4 * node + 3, 16 + 4 * node, 16 + 4 * node + 3));
    }
    for (int cpu = 0; cpu < 32; ++cpu) {
      const int core = cpu % 16;
      const int node = core / 4;
      const std::string base = fmt::format("devices/system/cpu/cpu{}/", cpu);
      dir.write(base + "topology/physical_package_id", fmt::format("{}\n", node / 2));
      dir.write(base + "topology/thread_siblings_list", fmt::format("{},{}\n", core, core + 16));
      const int first = 4 * node + (core % 4 < 2 ? 0 : 2);
      dir.write(base + "cache/index0/type", "Data\n");
      dir.write(base + "cache/index0/level", "1\n");
      dir.write(base + "cache/index0/shared_cpu_list", fmt::format("{},{}\n", core, core + 16));
      dir.write(base + "cache/index1/type", "Instruction\n");
      dir.write(base + "cache/index1/level", "1\n");
      dir.write(base + "cache/index1/shared_cpu_list", fmt::format("{}\n", core));
      dir.write(base + "cache/index3/type", "Unified\n");
      dir.write(base + "cache/index3/level", "3\n");
      dir.write(base + "cache/index3/shared_cpu_list",
                fmt::format("{}-{},{}-{}\n", first, first + 1, first + 16, first + 17));
    }
    for (int npu = 0; npu < 8; ++npu) {
      // Addresses sort in device order; node of NPU i is i / 2.
      pci(fmt::format("0000:{:02x}:00.0", 0x10 + 0x10 * npu), "0x19e5", "0x120000", npu / 2);
    }
    pci("0000:05:00.0", "0x10de", "0x030200", 3);  // a GPU: not an NPU
    pci("0000:06:00.0", "0x19e5", "0x020000", 0);  // a Huawei NIC: not an accelerator
  }
  void pci(const std::string& address, const char* vendor, const char* klass, int node) {
    const std::string base = "bus/pci/devices/" + address + "/";
    dir.write(base + "vendor", std::string(vendor) + "\n");
    dir.write(base + "class", std::string(klass) + "\n");
    dir.write(base + "numa_node", fmt::format("{}\n", node));
  }
};

std::set<int> every_cpu() {
  std::set<int> all;
  for (int i = 0; i < 32; ++i) all.insert(i);
  return all;
}

std::vector<int> cpus(std::initializer_list<int> ids) {
  return ids;
}

}  // namespace

TEST_CASE("numa binding: each mode places devices as torch's binding does", "[numa]") {
  FakeSysfs sys;
  const auto plan = [&](NumaMode mode, const std::vector<int>& devices,
                        const std::set<int>& allowed) {
    return plan_numa_binding(mode, DeviceKind::kAscend, devices, sys.dir.path(), allowed);
  };
  SECTION("node: every CPU of the device's node, memory from that node") {
    const auto p = plan(NumaMode::kNode, {0, 3, 7}, every_cpu());
    REQUIRE(p.size() == 3);
    CHECK(p[0].node == 0);
    CHECK(p[0].cpus == cpus({0, 1, 2, 3, 16, 17, 18, 19}));
    CHECK(p[1].node == 1);
    CHECK(p[1].cpus == cpus({4, 5, 6, 7, 20, 21, 22, 23}));
    CHECK(p[2].node == 3);
  }
  SECTION("socket: the CPUs of every node of the device's socket") {
    const auto p = plan(NumaMode::kSocket, {5}, every_cpu());
    CHECK(p[0].node == 2);
    CHECK(p[0].cpus == cpus({8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}));
  }
  SECTION("exclusive: the node's physical cores split between its two devices, threads kept") {
    const auto p = plan(NumaMode::kExclusive, {2, 3}, every_cpu());
    CHECK(p[0].cpus == cpus({4, 5, 20, 21}));
    CHECK(p[1].cpus == cpus({6, 7, 22, 23}));
  }
  SECTION("exclusive: cores that do not divide go to the lower device") {
    std::set<int> allowed = every_cpu();
    allowed.erase(7);  // core 7 and its sibling 23 are not ours
    allowed.erase(23);
    const auto p = plan(NumaMode::kExclusive, {2, 3}, allowed);
    CHECK(p[0].cpus == cpus({4, 5, 20, 21}));
    CHECK(p[1].cpus == cpus({6, 22}));
  }
  SECTION("core-complex: one last-level cache group each") {
    const auto p = plan(NumaMode::kCoreComplex, {0, 1}, every_cpu());
    CHECK(p[0].cpus == cpus({0, 1, 16, 17}));
    CHECK(p[1].cpus == cpus({2, 3, 18, 19}));
  }
  SECTION("only the CPUs the agent may use (a cpuset or taskset)") {
    const auto p = plan(NumaMode::kNode, {0}, {1, 2, 17});
    CHECK(p[0].cpus == cpus({1, 2, 17}));
  }
}

TEST_CASE("numa binding: what sysfs lacks is named", "[numa]") {
  FakeSysfs sys;
  CHECK_THROWS_WITH(
      plan_numa_binding(NumaMode::kNode, DeviceKind::kAscend, {8}, sys.dir.path(), every_cpu()),
      Contains("device 8 has no PCI function") && Contains("8 NPUs found"));
  CHECK_THROWS_WITH(
      plan_numa_binding(NumaMode::kNode, DeviceKind::kAscend, {0}, sys.dir.path(), {31}),
      Contains("NUMA node 0 has no CPU this agent may use"));
  // The only GPU is on node 3.
  const auto gpu =
      plan_numa_binding(NumaMode::kNode, DeviceKind::kNvidia, {0}, sys.dir.path(), every_cpu());
  CHECK(gpu[0].node == 3);
  TempDir empty;
  CHECK_THROWS_WITH(
      plan_numa_binding(NumaMode::kNode, DeviceKind::kAscend, {0}, empty.path(), every_cpu()),
      Contains("0 NPUs found"));
  CHECK(parse_cpu_list("0-2,5\n") == std::set<int>{0, 1, 2, 5});
  CHECK_THROWS_WITH(parse_cpu_list("x"), Contains("'x' is not a CPU list"));
  CHECK(parse_numa_mode("core-complex") == NumaMode::kCoreComplex);
  CHECK_FALSE(parse_numa_mode("numa").has_value());
}

TEST_CASE("numa: msrun's even split of the CPUs where there is no device", "[numa][msrun]") {
  auto cpus = [](const std::vector<NumaPlacement>& places) {
    std::vector<std::vector<int>> out;
    for (const NumaPlacement& p : places) {
      CHECK(p.node == -1);  // no memory node preferred
      out.push_back(p.cpus);
    }
    return out;
  };
  CHECK(cpus(split_cpus_evenly({0, 1, 2, 3, 4, 5, 6}, 3)) ==
        std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5, 6}});
  CHECK(cpus(split_cpus_evenly({2, 3}, 2)) == std::vector<std::vector<int>>{{2}, {3}});
  // Fewer CPUs than workers: shared in turn, never an empty set (which would mean "any").
  CHECK(cpus(split_cpus_evenly({0, 1}, 3)) == std::vector<std::vector<int>>{{0}, {1}, {0}});
}

}  // namespace test_numa_binding
