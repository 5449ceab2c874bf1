// Before an attempt a node's devices must be free (agent/health/device_release.hpp): a leftover of
// the job that holds one is gone before the next attempt starts, and another program's hold is
// named and waited for, then counts as the node's failure. The devices are files under a fake
// device root (NPU_RUN_DEV_ROOT), held open as a process holds /dev/davinciN.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_device_release {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

std::string fake_devices(const TempDir& dir) {
  const std::string root = dir.file("dev");
  std::filesystem::create_directories(root);
  for (const char* name : {"davinci0", "davinci1", "davinci_manager"})
    std::ofstream(root + "/" + name) << "";
  return root;
}

bool alive(pid_t pid) {
  return ::kill(pid, 0) == 0;
}

}  // namespace

TEST_CASE(
    "device release: a grandchild of the job that cleared its environment and holds a "
    "device is gone before the next attempt",
    "[integration][devices]") {
  TempDir dir;
  const std::string root = fake_devices(dir);
  // Attempt 0: a setsid'd grandchild with an empty environment keeps davinci0 open and writes
  // its pid; the worker fails. Attempt 1 checks the device is free (fuser's way) and exits 0.
  const std::string script =
      "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && [ \"$LOCAL_RANK\" = 0 ]; then "
      "setsid env -i /bin/sh -c 'exec 3<\"$0\"; echo $$ > \"$1\"; exec sleep 60' "
      "\"$NPU_RUN_DEV_ROOT/davinci0\" \"$OUT/holder\" & "
      "while [ ! -s \"$OUT/holder\" ]; do sleep 0.05; done; exit 1; fi; "
      "[ \"$TORCHELASTIC_RESTART_COUNT\" = 1 ] && echo \"attempt 1 ran\"; exit 0";
  NpuRunProcess p(
      {"--nproc-per-node", "2", "--max-restarts", "1", "--no-python", "/bin/sh", "-c", script},
      {{"NPU_RUN_DEV_ROOT", root}, {"OUT", dir.path()}});
  const Finished f = p.wait(60s);
  INFO(f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("attempt 1 ran"));
  const pid_t holder = std::stoi(read_file(dir.file("holder")));
  CHECK_FALSE(alive(holder));
  // Named, by the sweep of escaped processes or by the device check, whichever came first.
  CHECK_THAT(f.err, Contains("pid " + std::to_string(holder)));
  require_no_strays(p);
}

TEST_CASE(
    "device release: another program holding a device is named, waited for, then the "
    "node's failure",
    "[integration][devices]") {
  TempDir dir;
  const std::string root = fake_devices(dir);
  // Not a process of the job: started here, it holds davinci1 until killed.
  const std::string ready = dir.file("holding");
  const pid_t holder = ::fork();
  REQUIRE(holder >= 0);
  if (holder == 0) {
    const std::string device = root + "/davinci1";
    ::execl("/bin/sh", "sh", "-c", "exec 3<\"$0\"; : > \"$1\"; exec sleep 60", device.c_str(),
            ready.c_str(), nullptr);
    ::_exit(127);
  }
  // It holds the device once it says so (the file appears after the open).
  for (int i = 0; i < 200 && !std::filesystem::exists(ready); ++i) ::usleep(10'000);
  REQUIRE(std::filesystem::exists(ready));
  NpuRunProcess p(
      {"--nproc-per-node", "2", "--device-release-timeout", "1", "--no-python", "/bin/true"},
      {{"NPU_RUN_DEV_ROOT", root}});
  const Finished f = p.wait(60s);
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  INFO(f.err);
  CHECK(f.exit_code == 122);
  CHECK_THAT(f.err, Contains("davinci1 is held by pid " + std::to_string(holder) +
                             " (sleep 60), not a process of this job: waiting up to 1 s"));
  CHECK_THAT(f.err,
             Contains("[infrastructure: ") || Contains("failure class: infrastructure: node 0 ("));
  CHECK_THAT(f.err, Contains("a device is still held: device "));
  CHECK_THAT(f.err, !Contains("davinci_manager"));
  require_no_strays(p);
}

namespace {

// npu-smi's stand-in first on PATH, with this scenario.
EnvOverrides npu_smi_env(const TempDir& dir, const std::string& root, const std::string& scenario) {
  return {{"NPU_RUN_DEV_ROOT", root},
          {"NPU_RUN_FAKE_SCENARIO", dir.write("scenario", scenario)},
          {"PATH", source_dir() + "/tests/tools/fake_tools:" + std::getenv("PATH")}};
}

}  // namespace

TEST_CASE(
    "device release: a holder only npu-smi sees (another container's process) is named "
    "and waited for",
    "[integration][devices]") {
  TempDir dir;
  const std::string root = fake_devices(dir);
  // The gate off: it would name the process first; the release is checked on its own.
  NpuRunProcess p({"--nproc-per-node", "2", "--health-check", "off", "--device-release-timeout",
                   "1", "--no-python", "/bin/true"},
                  npu_smi_env(dir, root, "devices 0 1\nprocess 1 4190000 python3\n"));
  const Finished f = p.wait(60s);
  INFO(f.err);
  CHECK(f.exit_code == 122);
  const std::string device = std::filesystem::canonical(root).string() + "/davinci1";
  CHECK_THAT(f.err, Contains("device " + device +
                             " is held by pid 4190000 (python3), not a process of this job: "
                             "waiting up to 1 s"));
  CHECK_THAT(f.err, Contains("a device is still held: device " + device));
  require_no_strays(p);
}

TEST_CASE("device release: npu-smi is asked again while it names a holder, which lets go in time",
          "[integration][devices]") {
  TempDir dir;
  const std::string root = fake_devices(dir);
  const pid_t holder = ::fork();
  REQUIRE(holder >= 0);
  if (holder == 0) {
    ::execl("/bin/sleep", "sleep", "60", nullptr);
    ::_exit(127);
  }
  NpuRunProcess p(
      {"--nproc-per-node", "2", "--health-check", "off", "--device-release-timeout", "30",
       "--no-python", "/bin/sh", "-c", "echo attempt ran"},
      npu_smi_env(dir, root, "devices 0 1\nholder 0 " + std::to_string(holder) + " python3\n"));
  p.wait_for_output("not a process of this job: waiting up to 30 s", 1, 30s, true);
  ::kill(holder, SIGKILL);  // the fake lists it no more once it is gone
  ::waitpid(holder, nullptr, 0);
  const Finished f = p.wait(60s);
  INFO(f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.err, Contains("held by pid " + std::to_string(holder) + " (sleep 60)"));
  CHECK_THAT(f.err, Contains("this node's devices are free"));
  CHECK_THAT(f.out, Contains("attempt ran"));
  require_no_strays(p);
}

}  // namespace test_device_release
