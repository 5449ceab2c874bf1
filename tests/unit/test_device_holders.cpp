// Who holds a device (workers/device_holders.hpp), read from a /proc of our own making: each
// process a directory with its fd links, environ, cmdline and stat, as the kernel shows them.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "support/temp_dir.hpp"
#include "workers/device_holders.hpp"

namespace test_device_holders {

using namespace npu_run;
using npu_run::testing::TempDir;

namespace {

// /proc/<pid> with a command line, an environment, a parent and the files it holds open.
void fake_process(const TempDir& proc, int pid, int parent, const std::string& environ,
                  const std::vector<std::string>& open_files) {
  const std::string dir = proc.file(std::to_string(pid));
  proc.write(std::to_string(pid) + "/cmdline", std::string("python3\0old.py\0", 15));
  proc.write(std::to_string(pid) + "/environ", environ);
  proc.write(std::to_string(pid) + "/stat",
             std::to_string(pid) + " (python3) S " + std::to_string(parent) + " 7 7 0");
  std::filesystem::create_directories(dir + "/fd");
  int fd = 3;
  for (const std::string& file : open_files)
    std::filesystem::create_symlink(file, dir + "/fd/" + std::to_string(fd++));
}

}  // namespace

TEST_CASE("device holders: the fd links name a device's holders, the job's marked as ours",
          "[devices]") {
  TempDir proc;
  fake_process(proc, 100, 1, std::string("HOME=/\0", 7), {"/dev/davinci0", "/dev/davinci_manager"});
  fake_process(proc, 200, 1, std::string("NPU_RUN_AGENT_MARK=m1\0", 22), {"/dev/davinci1"});
  fake_process(proc, 300, 50, "", {"/dev/davinci1", "/dev/davinci1"});  // the agent's child
  fake_process(proc, 400, 1, "", {"/dev/davinci2"});                    // not this job's device
  HolderSearch search{{"/dev/davinci0", "/dev/davinci1"}, "NPU_RUN_AGENT_MARK=m1", 50, proc.path()};
  auto holders = find_device_holders(search);
  std::sort(holders.begin(), holders.end(),
            [](const DeviceHolder& a, const DeviceHolder& b) { return a.pid < b.pid; });
  REQUIRE(holders.size() == 3);  // the shared control node is never asked about
  CHECK(holders[0].pid == 100);
  CHECK_FALSE(holders[0].ours);
  CHECK(holders[0].command == "python3 old.py");
  CHECK(describe(holders[0]) == "device /dev/davinci0 is held by pid 100 (python3 old.py)");
  CHECK(holders[1].ours);  // by the mark
  CHECK(holders[2].ours);  // by its parent; each device once
  CHECK(describe(holders[2]) ==
        "device /dev/davinci1 is held by pid 300 (python3 old.py), a leftover of this job");
}

TEST_CASE("device holders: a pid npu-smi names is judged as the fd links' are", "[devices]") {
  TempDir proc;
  fake_process(proc, 200, 1, std::string("NPU_RUN_AGENT_MARK=m1\0", 22), {});
  const HolderSearch search{{}, "NPU_RUN_AGENT_MARK=m1", 50, proc.path()};
  const DeviceHolder ours = reported_holder(search, 200, "/dev/davinci3", "python3");
  CHECK(ours.ours);
  CHECK(ours.command == "python3 old.py");  // /proc's, whole
  // Another container's process: no /proc entry here, npu-smi's name or none.
  const DeviceHolder foreign = reported_holder(search, 4190000, "/dev/davinci3", "python3");
  CHECK_FALSE(foreign.ours);
  CHECK(describe(foreign) == "device /dev/davinci3 is held by pid 4190000 (python3)");
  CHECK(reported_holder(search, 4190000, "/dev/davinci3", "").command == "not visible here");
  CHECK_FALSE(reported_holder(search, 50, "/dev/davinci3", "").ours);  // the agent itself
}

}  // namespace test_device_holders
