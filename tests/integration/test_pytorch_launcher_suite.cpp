// PyTorch's own launcher tests (test/distributed/launcher/run_test.py, with the worker scripts of
// its bin/ and of test/distributed/elastic/multiprocessing/bin/), re-enacted against npu_run:
// the same command lines, torchrun's underscore spellings and `=` included, and the same
// expectations, with workers of our own in tests/data/launcher_suite. Where torch's tests use an
// etcd server, these use the c10d endpoint torchrun recommends instead (npu_run has no etcd
// client; the rendezvous semantics are the same).
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <set>
#include <thread>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_pytorch_launcher_suite {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

std::string worker(const std::string& name) {
  return source_dir() + "/tests/data/launcher_suite/" + name;
}

// run_test.py's check: every global rank left its file, and nothing else is there.
std::set<std::string> touched(const TempDir& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file("touched")))
    names.insert(entry.path().filename().string());
  return names;
}

std::set<std::string> ranks_up_to(int world) {
  std::set<std::string> names;
  for (int r = 0; r < world; ++r) names.insert(std::to_string(r));
  return names;
}

struct Suite {
  TempDir dir;
  EnvOverrides env{{"TEST_SENTINEL_PARENT", "FOOBAR"}};  // must reach every worker
  Suite() { std::filesystem::create_directories(dir.file("touched")); }
  std::string touch_dir() const { return "--touch_file_dir=" + dir.file("touched"); }
  std::string c10d() const { return "--rdzv_endpoint=localhost:" + std::to_string(unused_port()); }
};

}  // namespace

TEST_CASE("launcher suite: user scripts in python and sh, with the caffe2-era options",
          "[integration][launcher-suite]") {
  Suite s;
  const std::string port = "--master_port=" + std::to_string(unused_port());
  Finished f = run_npu_run(
      {"--nnodes=1", "--nproc_per_node=4", "--monitor_interval=1", "--start_method=spawn",
       "--master_addr=localhost", port, "--node_rank=0", worker("touch_rank.py"), s.touch_dir()},
      s.env);
  INFO(f.out << f.err);
  REQUIRE(f.exit_code == 0);
  CHECK(touched(s.dir) == ranks_up_to(4));
  CHECK(count_occurrences(f.out, "TEST_SENTINEL_PARENT = FOOBAR") == 4);
  CHECK(count_occurrences(f.out, "ROLE_NAME = default") == 4);

  // --no_python with --module is refused; without it the sh worker runs, 1 by default.
  TempDir bash;
  std::filesystem::create_directories(bash.file("touched"));
  f = run_npu_run({"--nnodes=1", "--monitor_interval=1", "--start_method=spawn", "--no_python",
                   "--module", worker("touch_rank.sh"), bash.file("touched")});
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.err, Contains("--no-python and --module cannot be combined"));
  f = run_npu_run({"--nnodes=1", "--monitor_interval=1", "--start_method=spawn", "--no_python",
                   worker("touch_rank.sh"), bash.file("touched")});
  REQUIRE(f.exit_code == 0);
  CHECK(touched(bash) == ranks_up_to(1));
}

TEST_CASE("launcher suite: options from PET_ variables, --module refused the same way",
          "[integration][launcher-suite]") {
  Suite s;
  EnvOverrides env{{"PET_NNODES", "1"},           {"PET_NPROC_PER_NODE", "4"},
                   {"PET_MONITOR_INTERVAL", "1"}, {"PET_START_METHOD", "spawn"},
                   {"PET_NO_PYTHON", "1"},        {"PET_MODULE", "1"}};
  Finished f = run_npu_run({worker("touch_rank.sh"), s.dir.file("touched")}, env);
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.err, Contains("cannot be combined"));
  env["PET_MODULE"] = "0";
  f = run_npu_run({worker("touch_rank.sh"), s.dir.file("touched")}, env);
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK(touched(s.dir) == ranks_up_to(4));
}

TEST_CASE("launcher suite: --nproc_per_node as a number, auto (one per CPU) or unknown",
          "[integration][launcher-suite]") {
  for (const auto& [value, expected] :
       {std::pair{std::string("4"), 4},
        std::pair{std::string("auto"), static_cast<int>(std::thread::hardware_concurrency())}}) {
    Suite s;
    const Finished f =
        run_npu_run({"--nnodes=1", "--nproc_per_node=" + value, "--monitor_interval=1",
                     "--no_python", worker("touch_rank.sh"), s.dir.file("touched")});
    INFO(value << f.err);
    REQUIRE(f.exit_code == 0);
    CHECK(touched(s.dir) == ranks_up_to(expected));
  }
  const Finished f =
      run_npu_run({"--nproc_per_node=unknown", "--no_python", worker("touch_rank.sh"), "/tmp"});
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.err, Contains("--nproc_per_node 'unknown'"));
  // parse_min_max_nnodes("2:20:30") raises in torchrun.
  const Finished range = run_npu_run({"--nnodes=2:20:30", "--no_python", "/bin/true"});
  CHECK(range.exit_code == 2);
  CHECK_THAT(range.err, Contains("--nnodes '2:20:30': expected a node count like 4, or a range "
                                 "MIN:MAX like 2:4 (one colon)"));
}

TEST_CASE("launcher suite: standalone, run_path, and an elastic range with one node",
          "[integration][launcher-suite]") {
  for (const std::vector<std::string>& how :
       {std::vector<std::string>{"--nnodes=1", "--standalone"},
        std::vector<std::string>{"--run_path", "--nnodes=1"}}) {
    Suite s;
    std::vector<std::string> args = how;
    for (const char* a : {"--nproc_per_node=4", "--monitor_interval=1", "--start_method=spawn"})
      args.emplace_back(a);
    args.push_back(worker("touch_rank.py"));
    args.push_back(s.touch_dir());
    const Finished f = run_npu_run(args, s.env);
    INFO(how.back() << f.err);
    REQUIRE(f.exit_code == 0);
    CHECK(touched(s.dir) == ranks_up_to(4));
  }
  // --nnodes=1:2 with one node: it starts alone once the last call is over (1 s here; the
  // torch test waits for the default).
  Suite s;
  const Finished f =
      run_npu_run({"--nnodes=1:2", "--nproc_per_node=4", "--rdzv_backend=c10d", s.c10d(),
                   "--rdzv_id=suite1", "--rdzv_conf=last_call_timeout=1", "--monitor_interval=1",
                   "--start_method=spawn", worker("touch_rank.py"), s.touch_dir()},
                  s.env);
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK(touched(s.dir) == ranks_up_to(4));
}

TEST_CASE("launcher suite: two elastic agents form one job of 8 ranks",
          "[integration][launcher-suite]") {
  Suite s;
  const std::vector<std::string> args{"--nnodes=1:2",          "--nproc_per_node=4",
                                      "--rdzv_backend=c10d",   s.c10d(),
                                      "--rdzv_id=suite2",      "--rdzv_conf=last_call_timeout=5",
                                      "--monitor_interval=1",  "--start_method=spawn",
                                      worker("touch_rank.py"), s.touch_dir()};
  NpuRunProcess first(args, s.env);
  NpuRunProcess second(args, s.env);
  const auto done = NpuRunProcess::wait_all({&first, &second}, 120s);
  INFO(done[0].err << done[1].err);
  CHECK(done[0].exit_code == 0);
  CHECK(done[1].exit_code == 0);
  CHECK(touched(s.dir) == ranks_up_to(8));
  require_no_strays(first);
  require_no_strays(second);
}

TEST_CASE("launcher suite: a worker that raises fails the launch with its exception",
          "[integration][launcher-suite]") {
  Suite s;
  const Finished f =
      run_npu_run({"--nnodes=1:2", "--nproc_per_node=4", "--rdzv_backend=c10d", s.c10d(),
                   "--rdzv_id=suite3", "--rdzv_conf=last_call_timeout=1", "--monitor_interval=1",
                   "--max_restarts=0", "--start_method=spawn", worker("touch_rank.py"), "--fail"},
                  s.env);
  CHECK(f.exit_code == 1);
  // Only the message: under python -u (as torchrun runs workers) a traceback's last line is
  // three writes ("RuntimeError", ": ", the message), and four ranks raising at once on one
  // inherited stderr may interleave them; the message itself is one write.
  CHECK_THAT(f.err, Contains("raising exception since --fail flag was set"));
}

TEST_CASE(
    "launcher suite: the elastic multiprocessing workers: redirects, exit codes, a "
    "segfault and a worker that never ends",
    "[integration][launcher-suite]") {
  Suite s;
  Finished f = run_npu_run({"--nproc_per_node=2", "--redirects=3",
                            "--log_dir=" + s.dir.file("logs"), worker("echo.py"), "hello"});
  REQUIRE(f.exit_code == 0);
  CHECK(f.out.empty());  // all of it in the files
  const std::string attempt = run_dir(s.dir.file("logs")) + "/attempt_0/";
  CHECK(read_file(attempt + "1/stdout.log") == "hello stdout from 1\n");
  CHECK(read_file(attempt + "0/stderr.log") == "hello stderr from 0\n");

  f = run_npu_run({"--nproc_per_node=2", worker("echo.py"), "--exitcode", "3", "bye"});
  CHECK(f.exit_code == 3);
  CHECK_THAT(f.err, Contains("exit 3 from 0") || Contains("exit 3 from 1"));

  f = run_npu_run({"--nproc_per_node=1", worker("echo.py"), "--segfault", "x"});
  CHECK(f.exit_code == 128 + 11);
  CHECK_THAT(f.err, Contains("SIGSEGV"));

  // zombie_test.py: a worker that would sleep 600 s; SIGTERM ends the job, nothing remains.
  const std::string sleeper =
      s.dir.write("sleep_600.py", "import time\nprint('working', flush=True)\ntime.sleep(600)\n");
  NpuRunProcess p({"--nproc_per_node=2", sleeper});
  p.wait_for_output("working", 2, 30s);
  p.send_signal(SIGTERM);
  f = p.wait(60s);
  CHECK(f.exit_code == 143);
  require_no_strays(p);
}

TEST_CASE("launcher suite: is_torchelastic_launched and both init methods under the launcher",
          "[integration][launcher-suite][pytorch]") {
  Suite s;
  Finished f =
      run_npu_run({"--run_path", "--nnodes=1", "--nproc_per_node=1", "--monitor_interval=1",
                   worker("is_launched.py"), "--out_file=" + s.dir.file("out")});
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK(read_file(s.dir.file("out")) == "True");
  const std::string port = std::to_string(unused_port());
  for (const std::string& init : {"tcp://localhost:" + port, std::string("env://")}) {
    f = run_npu_run({"--run_path", "--nnodes=1", "--nproc_per_node=4", "--master_addr=localhost",
                     "--master_port=" + port, "--monitor_interval=1", worker("init_method.py"),
                     "--init_method=" + init},
                    {}, 120s);
    INFO(init << f.err);
    CHECK(f.exit_code == 0);
    CHECK(count_occurrences(f.out, "Done ") == 4);
  }
}

}  // namespace test_pytorch_launcher_suite
