// npu_run on kernels older than 5.3 (CentOS 7, Ubuntu 18.04, EulerOS, Kylin V10, openEuler
// 20.03), made here by tests/tools/as_old_kernel: a seccomp filter that fails the newer system
// calls with ENOSYS. The whole suite also runs behind it ("linux 3.10:" tests); these cases
// check that the fallbacks are really the ones taken.
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>

#include "support/build_paths.hpp"
#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_old_kernel {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// A drop-in for the npu_run binary that runs it behind as_old_kernel with `filter`.
std::string old_kernel_binary(const TempDir& dir, const std::string& filter) {
  return dir.write("npu_run-old",
                   "#!/bin/sh\nexec '" + std::string(build_paths::kAsOldKernel) + "' " + filter +
                       " '" + build_paths::kNpuRun + "' \"$@\"\n",
                   true);
}

const char* const kFilters[] = {"--linux 3.10", "--linux 4.19", "--deny pidfd_open,clone3"};

}  // namespace

TEST_CASE("old kernel: --version names the calls the kernel lacks", "[integration][old-kernel]") {
  TempDir dir;
  ScopedEnv binary({{"NPU_RUN_UNDER_TEST", old_kernel_binary(dir, "--linux 3.10")}});
  const Finished f = run_npu_run({"--version"});
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("pidfd_open no, clone3 no, close_range no, getrandom no"));
}

TEST_CASE("old kernel: worker exits are seen through SIGCHLD and keep their codes",
          "[integration][old-kernel]") {
  const std::string filter = GENERATE(kFilters[0], kFilters[1], kFilters[2]);
  INFO(filter);
  TempDir dir;
  ScopedEnv binary({{"NPU_RUN_UNDER_TEST", old_kernel_binary(dir, filter)}});
  NpuRunProcess p({"--nproc-per-node", "3", "--log-level", "debug", "--no-python", "/bin/sh", "-c",
                   "if [ $LOCAL_RANK = 1 ]; then exit 7; fi; exec sleep 60"});
  const Finished f = p.wait(20s);
  INFO(f.err);
  CHECK(f.exit_code == 7);
  CHECK_THAT(f.err, Contains("worker exits observed through SIGCHLD"));
  CHECK_THAT(f.err, Contains("local rank 1 (rank 1, pid") && Contains("failed with exit code 7"));
  require_no_strays(p);
}

TEST_CASE("old kernel: descriptors npu_run inherited never reach a worker",
          "[integration][old-kernel]") {
  // Under torchrun, subprocesses close everything but stdio; npu_run marks what it inherited
  // close-on-exec at start, with close_range (5.11) or by walking /proc/self/fd.
  const std::string filter = GENERATE(std::string(), std::string("--linux 3.10"));
  INFO(filter);
  TempDir dir;
  const std::string binary = filter.empty() ? npu_run_binary() : old_kernel_binary(dir, filter);
  // The shell opens descriptor 7 (not close-on-exec) and becomes npu_run with it.
  const std::string launcher = dir.write(
      "with-fd-7", "#!/bin/sh\nexec 7<" + dir.path() + "\nexec '" + binary + "' \"$@\"\n", true);
  ScopedEnv use({{"NPU_RUN_UNDER_TEST", launcher}});
  const Finished f =
      run_npu_run({"--nproc-per-node", "2", "--no-python", "/bin/sh", "-c",
                   "if [ -e /proc/self/fd/7 ]; then echo leaked; exit 1; fi; echo clean"});
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK(count_occurrences(f.out, "clean") == 2);
}

TEST_CASE("old kernel: the parent watch outlives the thread that started npu_run",
          "[integration][old-kernel]") {
  // PR_SET_PDEATHSIG fires when the parent *thread* exits. A launcher that starts npu_run from a
  // thread which then ends (a Python thread here) must not stop the job: only the end of the
  // whole parent process does.
  TempDir dir;
  const std::string log = dir.file("agent.log");
  const std::string witness = dir.file("worker-started");
  const std::string marker = "thread-parent-" + std::to_string(getpid());
  const std::string script = dir.write("parent.py", R"(
import os, subprocess, sys, threading, time
binary, log, witness, port = sys.argv[1:5]
env = dict(os.environ, SLURM_JOB_ID="78", SLURM_STEP_ID="0", SLURM_JOB_NODELIST="localhost",
           SLURM_STEP_NODELIST="localhost", SLURM_NNODES="1", SLURM_STEP_NUM_NODES="1",
           SLURM_NODEID="0", SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_NTASKS="1",
           SLURM_TASKS_PER_NODE="1", SLURM_STEP_TASKS_PER_NODE="1")
deadline = time.time() + 20
def wait_logged(text):
    while time.time() < deadline:
        with open(log) as f:
            if text in f.read():
                return True
        time.sleep(0.02)
    return False
agent = []
def start():
    agent.append(subprocess.Popen(
        [binary, "--log-level", "debug", "--master-port", port, "--no-python", "/bin/sh", "-c",
         "touch " + witness + "; exec sleep 1000"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(log, "w")))
    wait_logged("through PR_SET_PDEATHSIG")  # the thread ends only once the watch is armed
thread = threading.Thread(target=start)
thread.start()
thread.join()  # the thread that forked npu_run is gone; this process is not
def wait_exists(path):
    while time.time() < deadline:
        if os.path.exists(path):
            return True
        time.sleep(0.02)
    return False
# The worker runs its own "touch" some time after the agent logs its start: wait for both.
seen = wait_logged("the process runs on") and wait_exists(witness)
print("thread exit seen:", seen, "agent running:", agent[0].poll() is None, flush=True)
os._exit(0)  # without waiting for npu_run: its parent is gone now
)");
  ScopedEnv env({{kMarkerVariable, marker}});
  const std::string command = "/usr/bin/python3 " + script + " " +
                              old_kernel_binary(dir, "--linux 3.10") + " " + log + " " + witness +
                              " " + std::to_string(unused_port());
  FILE* out = ::popen(command.c_str(), "r");
  REQUIRE(out != nullptr);
  char line[256] = {};
  const bool got = std::fgets(line, sizeof(line), out) != nullptr;
  ::pclose(out);
  const auto left = wait_until_no_marker_processes(marker, 10s);
  for (pid_t pid : left) ::kill(pid, SIGKILL);
  const std::string text = read_file(log);
  INFO(text);
  REQUIRE(got);
  CHECK(std::string(line) == "thread exit seen: True agent running: True\n");
  CHECK_THAT(text, Contains("through PR_SET_PDEATHSIG") &&
                       Contains("which started npu_run, exited without stopping it") &&
                       Contains("exit status 143"));
  INFO(describe_processes(left));
  CHECK(left.empty());
}

}  // namespace test_old_kernel
