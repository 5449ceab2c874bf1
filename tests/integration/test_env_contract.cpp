// The worker environment contract, checked on real workers started by the real binary.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_env_contract {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

std::map<std::string, std::string> read_env_file(const std::string& path) {
  std::map<std::string, std::string> env;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

}  // namespace

TEST_CASE("env contract: four workers get ranks, devices, sizes and a shared held MASTER_PORT",
          "[integration][env]") {
  TempDir dir;
  // Each worker records its environment, then proves MASTER_PORT is held: a plain bind must fail.
  const std::string worker =
      "env > \"$OUT/env.$LOCAL_RANK\"; "
      "/usr/bin/python3 -c 'import os,socket\n"
      "s=socket.socket()\n"
      "try:\n s.bind((\"0.0.0.0\", int(os.environ[\"MASTER_PORT\"]))); print(\"bound\")\n"
      "except OSError as e: print(\"refused\", e.errno)' > \"$OUT/bind.$LOCAL_RANK\"; "
      "echo \"$@\" > \"$OUT/args.$LOCAL_RANK\"";
  const Finished f = run_npu_run(
      {"--nproc-per-node", "4", "--devices", "4-7", "--run-id", "envtest", "--max-restarts", "2",
       "--no-python", "/bin/sh", "-c", worker, "sh", "--ckpt", "c${local_rank}.pt"},
      {{"OUT", dir.path()}, {"OMP_NUM_THREADS", std::nullopt}, {"KEEP_ME", "yes"}});
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK_THAT(f.err, Contains("OMP_NUM_THREADS is unset: setting it to 1"));

  std::set<std::string> ports;
  for (int r = 0; r < 4; ++r) {
    auto env = read_env_file(dir.file("env." + std::to_string(r)));
    CHECK(env["RANK"] == std::to_string(r));
    CHECK(env["RANK_ID"] == std::to_string(r));
    CHECK(env["LOCAL_RANK"] == std::to_string(r));
    CHECK(env["WORLD_SIZE"] == "4");
    CHECK(env["RANK_SIZE"] == "4");
    CHECK(env["LOCAL_WORLD_SIZE"] == "4");
    CHECK(env["GROUP_RANK"] == "0");
    CHECK(env["GROUP_WORLD_SIZE"] == "1");
    CHECK(env["ROLE_RANK"] == std::to_string(r));
    CHECK(env["ROLE_WORLD_SIZE"] == "4");
    CHECK(env["ROLE_NAME"] == "default");
    CHECK(env["DEVICE_ID"] == std::to_string(4 + r));
    CHECK(env["MASTER_ADDR"] == "127.0.0.1");
    CHECK(env["TORCHELASTIC_RESTART_COUNT"] == "0");
    CHECK(env["TORCHELASTIC_MAX_RESTARTS"] == "2");
    CHECK(env["TORCHELASTIC_RUN_ID"] == "envtest");
    CHECK(env["TORCHELASTIC_USE_AGENT_STORE"] == "True");  // the agent serves the store
    CHECK_THAT(env["TORCHELASTIC_ERROR_FILE"],
               Contains("attempt_0/" + std::to_string(r) + "/error.json"));
    CHECK(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1");
    CHECK(env["NCCL_ASYNC_ERROR_HANDLING"] == "1");
    CHECK(env["OMP_NUM_THREADS"] == "1");
    CHECK(env["KEEP_ME"] == "yes");  // the rest of the agent's environment is inherited
    ports.insert(env["MASTER_PORT"]);
    CHECK(read_file(dir.file("bind." + std::to_string(r))) == "refused 98\n");  // EADDRINUSE
    CHECK(read_file(dir.file("args." + std::to_string(r))) ==
          "--ckpt c" + std::to_string(r) + ".pt\n");
  }
  REQUIRE(ports.size() == 1);
  CHECK(*ports.begin() != "29500");  // never the rendezvous port
  CHECK(std::stoi(*ports.begin()) > 0);
}

TEST_CASE(
    "env contract: an exported OMP_NUM_THREADS is respected, PET_ variables configure npu_run",
    "[integration][env]") {
  TempDir dir;
  const Finished f = run_npu_run(
      {"--no-python", "/bin/sh", "-c", "echo \"$OMP_NUM_THREADS $WORLD_SIZE $DEVICE_ID\""},
      {{"OMP_NUM_THREADS", "3"}, {"PET_NPROC_PER_NODE", "2"}, {"PET_DEVICES", "6,7"}});
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK(count_occurrences(f.out, "3 2 6\n") == 1);
  CHECK(count_occurrences(f.out, "3 2 7\n") == 1);
  CHECK(f.err.find("OMP_NUM_THREADS is unset") == std::string::npos);
}

TEST_CASE("env contract: the error-file directory is private and removed at exit",
          "[integration][env]") {
  TempDir tmp;
  const Finished f = run_npu_run(
      {"--nproc-per-node", "2", "--no-python", "/bin/sh", "-c", "echo $TORCHELASTIC_ERROR_FILE"},
      {{"TMPDIR", tmp.path()}});
  REQUIRE(f.exit_code == 0);
  CHECK_THAT(f.out, Contains(tmp.path() + "/npu_run_none_"));
  CHECK(std::filesystem::is_empty(tmp.path()));
}

// Flight recorders (issue 46): torch's and torch_npu's on, each dumping into the rank's directory
// of the attempt, a heartbeat under a short HCCL_EXEC_TIMEOUT; what the user set stays; Python
// workers find npu_run's sitecustomize first on PYTHONPATH, before the user's entries.
TEST_CASE("env contract: flight recorders dump per attempt, and the user's settings stay",
          "[integration][env]") {
  TempDir dir;
  const std::string logs = dir.path() + "/logs";
  const Finished f = run_npu_run({"--nproc-per-node", "2", "--log-dir", logs, "--no-python",
                                  "/bin/sh", "-c", "env > \"$OUT/env.$LOCAL_RANK\""},
                                 {{"OUT", dir.path()},
                                  {"TORCH_HCCL_TRACE_BUFFER_SIZE", "50"},
                                  {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/srv/fr_"},
                                  {"HCCL_EXEC_TIMEOUT", "300"},
                                  {"PYTHONPATH", "/opt/mine"}});
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  const std::string attempt = run_dir(logs) + "/attempt_0/";
  for (int r = 0; r < 2; ++r) {
    auto env = read_env_file(dir.file("env." + std::to_string(r)));
    const std::string rank_dir = attempt + std::to_string(r);
    CHECK(env["TORCH_FR_BUFFER_SIZE"] == "2000");
    CHECK(env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000");
    // The user chose the dump's place by its older name: the newer one, which torch 2.8 and
    // later read first, is not set over it.
    CHECK(env.count("TORCH_FR_DUMP_TEMP_FILE") == 0);
    CHECK(env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == "/srv/fr_");
    CHECK(env["TORCH_HCCL_ENABLE_MONITORING"] == "1");
    CHECK(env["TORCH_HCCL_DUMP_ON_TIMEOUT"] == "1");
    CHECK(env["TORCH_HCCL_DEBUG_INFO_TEMP_FILE"] == rank_dir + "/hccl_trace_rank_");
    CHECK(env["TORCH_HCCL_DEBUG_INFO_PIPE_FILE"] == rank_dir + "/hccl_dump_");
    CHECK(env["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] == rank_dir + "/nccl_dump_");
    CHECK(env["ASCEND_PROCESS_LOG_PATH"] ==
          rank_dir.substr(0, rank_dir.rfind('/')) + "/process_log");
    CHECK(env["TORCH_HCCL_TRACE_BUFFER_SIZE"] == "50");       // the user's
    CHECK(env["TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC"] == "240");  // under HCCL_EXEC_TIMEOUT
    const std::string path = env["PYTHONPATH"];
    CHECK(path.find("/python:/opt/mine") != std::string::npos);
    // Written in the agent's private directory, which goes with the agent.
    CHECK_FALSE(std::filesystem::exists(path.substr(0, path.find(':')) + "/sitecustomize.py"));
  }
}

TEST_CASE("python modes: a script and a module run under PYTHON_EXEC -u with their arguments",
          "[integration][env]") {
  TempDir dir;
  const std::string body =
      "import os, sys\n"
      "print('%s rank=%s argv=%s unbuffered=%s' % (__name__, os.environ['RANK'], sys.argv[1:],\n"
      "      sys.stdout.write_through))\n";  // -u makes stdout write through even to a pipe
  dir.write("job.py", body);
  dir.write("pkg/__init__.py", "");
  dir.write("pkg/train.py", body);
  Finished f = run_npu_run({"--nproc-per-node", "2", "job.py", "--lr", "${local_rank}"}, {}, 60s,
                           dir.path());
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK(count_occurrences(f.out, "__main__ rank=1 argv=['--lr', '1'] unbuffered=True") == 1);
  f = run_npu_run({"--nproc-per-node", "2", "-m", "pkg.train", "x"}, {}, 60s, dir.path());
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK(count_occurrences(f.out, "__main__ rank=0 argv=['x'] unbuffered=True") == 1);
}

}  // namespace test_env_contract
