// torchrun's documented command lines, run as a torchrun user types them.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_torchrun_parity {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

std::vector<std::string> with_workers(std::vector<std::string> flags, const std::string& script) {
  for (const char* a : {"--no-python", "/bin/sh", "-c"}) flags.emplace_back(a);
  flags.push_back(script);
  return flags;
}

}  // namespace

TEST_CASE("torchrun parity: localhost:0 stacks single-node jobs on free ports",
          "[integration][torchrun]") {
  // torchrun's documented way to run several single-node jobs on one host at once.
  const std::vector<std::string> flags = {"--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0",
                                          "--nnodes=1", "--nproc-per-node=2"};
  NpuRunProcess a(with_workers(flags, "echo port=$MASTER_PORT"));
  NpuRunProcess b(with_workers(flags, "echo port=$MASTER_PORT"));
  const std::vector<Finished> f = NpuRunProcess::wait_all({&a, &b}, 30s);
  INFO(f[0].err << f[1].err);
  REQUIRE(f[0].exit_code == 0);
  REQUIRE(f[1].exit_code == 0);
  CHECK(count_occurrences(f[0].out, "port=") == 2);
  CHECK(f[0].out.find("port=0\n") == std::string::npos);
  require_no_strays(a);
  require_no_strays(b);
}

TEST_CASE("torchrun parity: is_host in --rdzv-conf chooses the agent that hosts",
          "[integration][torchrun][multi-node]") {
  // Node 1 hosts, node 0 joins it: the node rank no longer decides.
  const int port = unused_port();
  auto node = [&](const std::string& rank, const std::string& is_host) {
    return with_workers({"--nnodes", "2", "--node-rank", rank, "--nproc-per-node", "1",
                         "--rdzv-backend", "c10d", "--rdzv-endpoint",
                         "127.0.0.1:" + std::to_string(port), "--rdzv-conf", "is_host=" + is_host},
                        "echo rank=$RANK");
  };
  NpuRunProcess joiner(node("0", "false"));
  NpuRunProcess host(node("1", "true"));
  const std::vector<Finished> f = NpuRunProcess::wait_all({&joiner, &host}, 30s);
  INFO(f[0].err << "\n----\n" << f[1].err);
  CHECK(f[0].exit_code == 0);
  CHECK(f[1].exit_code == 0);
  CHECK_THAT(f[0].out, Contains("rank=0"));
  CHECK_THAT(f[1].out, Contains("rank=1"));
  // Node 0 did not host: its log says it joined, never that it serves.
  CHECK(f[0].err.find("rendezvous server on") == std::string::npos);
  CHECK_THAT(f[1].err, Contains("rendezvous server on"));
  require_no_strays(joiner);
  require_no_strays(host);
}

TEST_CASE("torchrun parity: a directory or a zip with __main__.py runs as python runs it",
          "[integration][torchrun]") {
  TempDir dir;
  // One write per line: python -u's print() writes the text and its newline apart, and the two
  // ranks share the console.
  const std::string main_py =
      "import os, sys\nsys.stdout.write('%s %s\\n' % (WORD, os.environ['RANK']))\n";
  dir.write("app/__main__.py", "WORD = 'dir'\n" + main_py);
  const std::string zip = dir.file("app.zip");
  dir.write("zipped.py", "WORD = 'zip'\n" + main_py);
  const std::string make_zip =
      dir.write("make_zip.py",
                "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'w') as z:\n"
                "    z.write(sys.argv[2], '__main__.py')\n");
  REQUIRE(std::system(
              ("/usr/bin/python3 " + make_zip + " " + zip + " " + dir.file("zipped.py")).c_str()) ==
          0);
  for (const auto& [target, word] :
       {std::pair{dir.file("app"), std::string("dir")}, std::pair{zip, std::string("zip")}}) {
    const Finished f = run_npu_run({"--nproc-per-node", "2", target});
    INFO(f.err);
    CHECK(f.exit_code == 0);
    CHECK(count_occurrences(f.out, word + " 0\n") == 1);
    CHECK(count_occurrences(f.out, word + " 1\n") == 1);
  }
}

TEST_CASE("torchrun parity: --virtual-local-rank and the torchrun 2.x logging options",
          "[integration][torchrun]") {
  TempDir dev;
  for (int i = 0; i < 4; ++i) dev.write("davinci" + std::to_string(i), "");
  const Finished f = run_npu_run(
      with_workers({"--nproc-per-node", "2", "--devices", "2,3", "--virtual-local-rank",
                    "--event-log-handler", "console", "--logs-specs", "custom"},
                   "echo rank=$RANK local=$LOCAL_RANK visible=$ASCEND_RT_VISIBLE_DEVICES"),
      {{"NPU_RUN_DEV_ROOT", dev.path()}});
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK(count_occurrences(f.out, "rank=0 local=0 visible=2\n") == 1);
  CHECK(count_occurrences(f.out, "rank=1 local=0 visible=3\n") == 1);
  CHECK_THAT(f.err, Contains("--event-log-handler console: npu_run has no event handlers"));
  CHECK_THAT(f.err, Contains("--logs-specs custom: npu_run loads no logging plugins"));
}

TEST_CASE("torchrun parity: --numa-binding runs each worker on the CPUs of its device's node",
          "[integration][torchrun]") {
  // NPUs 0-1 on NUMA node 0 (CPU 0), NPUs 2-3 on node 1 (CPU 1), as sysfs would say.
  TempDir dev;
  TempDir sys;
  for (int i = 0; i < 4; ++i) {
    dev.write("davinci" + std::to_string(i), "");
    const std::string pci = "bus/pci/devices/0000:0" + std::to_string(i + 1) + ":00.0/";
    sys.write(pci + "vendor", "0x19e5\n");
    sys.write(pci + "class", "0x120000\n");
    sys.write(pci + "numa_node", i < 2 ? "0\n" : "1\n");
  }
  sys.write("devices/system/node/node0/cpulist", "0\n");
  sys.write("devices/system/node/node1/cpulist", "1\n");
  sys.write("devices/system/cpu/cpu0/topology/thread_siblings_list", "0\n");
  sys.write("devices/system/cpu/cpu1/topology/thread_siblings_list", "1\n");
  sys.write("devices/system/node/possible", "0-1\n");
  sys.write("devices/system/cpu/cpu0/topology/physical_package_id", "0\n");
  sys.write("devices/system/cpu/cpu1/topology/physical_package_id", "1\n");
  const std::map<std::string, std::optional<std::string>> env{{"NPU_RUN_DEV_ROOT", dev.path()},
                                                              {"NPU_RUN_SYS_ROOT", sys.path()}};
  const std::string report =
      "echo rank=$RANK cpus=$(grep Cpus_allowed_list /proc/self/status | cut -f2) "
      "prefer0=$(grep -c prefer:0 /proc/self/numa_maps)";
  Finished f = run_npu_run(
      with_workers({"--nproc-per-node", "2", "--devices", "1,2", "--numa-binding", "node"}, report),
      env);
  INFO(f.out << f.err);
  REQUIRE(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("rank=0 cpus=0 prefer0="));
  CHECK(f.out.find("rank=0 cpus=0 prefer0=0\n") == std::string::npos);  // memory from node 0
  CHECK_THAT(f.out, Contains("rank=1 cpus=1 prefer0=0\n"));
  f = run_npu_run(with_workers({"--nproc-per-node", "2", "--devices", "1,2", "--numa_binding",
                                "socket", "--dry-run"},
                               "true"),
                  env);
  CHECK_THAT(f.out, Contains("numa: CPUs 0, memory preferred from node 0") &&
                        Contains("numa: CPUs 1, memory preferred from node 1"));

  // What cannot work is refused before any worker starts, saying why.
  f = run_npu_run(with_workers({"--numa-binding", "nodes"}, "true"), env);
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.err, Contains("--numa-binding 'nodes' is not a binding mode; use one of "
                             "{node,socket,exclusive,core-complex}"));
  f = run_npu_run(with_workers({"--numa-binding", "node"}, "true"),
                  {{"NPU_RUN_DEV_ROOT", sys.path()}});
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.err, Contains("--numa-binding node: it binds workers near their NPU or GPU, and "
                             "this host has none"));
  f = run_npu_run(with_workers({"--nproc-per-node", "4", "--numa-binding", "exclusive"}, "true"),
                  env);
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.err, Contains("cannot place the workers: NUMA node 0 has 1 physical cores for its "
                             "2 devices"));
}

namespace {

// Runs npu_run on a pseudo-terminal, in its foreground as in an interactive shell, typing each
// of `keys` once the output so far contains the text paired with it; prints the whole output,
// then "exit N" (N < 0: killed by signal -N).
const char* const kOnTerminal = R"(
import os, pty, select, sys, time
split = sys.argv.index("--")
pairs, command = sys.argv[1:split], sys.argv[split + 1:]
keys = [(pairs[i], pairs[i + 1].encode().decode("unicode_escape")) for i in range(0, len(pairs), 2)]
pid, fd = pty.fork()
if pid == 0:
    os.execv(command[0], command)
out, deadline = b"", time.time() + 60
while time.time() < deadline:
    if keys and keys[0][0].encode() in out:
        os.write(fd, keys.pop(0)[1].encode())
    ready, _, _ = select.select([fd], [], [], 0.05)
    if ready:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        out += data
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
sys.stdout.write("\nexit %d\n" % (os.waitstatus_to_exitcode(status)))
)";

std::string on_terminal(const TempDir& dir, const std::vector<std::string>& keys,
                        const std::vector<std::string>& npu_run_args) {
  std::string command = "/usr/bin/python3 " + dir.file("on_terminal.py");
  for (const auto& k : keys) command += " '" + k + "'";
  command += " -- " + npu_run_binary();
  for (const auto& a : npu_run_args) command += " '" + a + "'";
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

}  // namespace

TEST_CASE(
    "torchrun parity: breakpoint() in local rank 0 reads the terminal and Ctrl-C stays "
    "the agent's",
    "[integration][torchrun]") {
  TempDir dir;
  dir.write("on_terminal.py", kOnTerminal);
  const std::string script =
      dir.write("debug_me.py",
                "import os\nx = 41\nif os.environ['LOCAL_RANK'] == '0':\n    breakpoint()\n"
                // One write: under -u (npu_run's, as torchrun's) print() writes each piece on
                // its own, and rank 1's could straddle rank 0's pdb prompt on the shared console.
                "import sys\nsys.stdout.write(f\"rank {os.environ['RANK']} done {x}\\n\")\n");
  const std::string marker = "pdb-" + std::to_string(::getpid());
  ScopedEnv env({{kMarkerVariable, marker}, {"PYTHON_EXEC", "/usr/bin/python3"}});
  // pdb stops rank 0; what is typed changes x and continues.
  std::string out = on_terminal(dir, {"(Pdb) ", "x = 42\\n", "(Pdb) ", "c\\n"},
                                {"--nproc-per-node", "2", script});
  INFO(out);
  CHECK_THAT(out,
             Contains("rank 0 done 42") && Contains("rank 1 done 41") && Contains("\nexit 0\n"));

  // Ctrl-C at the pdb prompt stops the whole job, as the agent's: 130, nothing left. pdb
  // catches the forwarded SIGINT and prompts again, so rank 0 goes at the end of the grace.
  out = on_terminal(dir, {"(Pdb) ", "\\x03"},
                    {"--nproc-per-node", "2", "--term-timeout", "2", script});
  CHECK_THAT(out, Contains("\nexit 130\n"));
  CHECK(out.find("rank 0 done") == std::string::npos);
  const auto left = wait_until_no_marker_processes(marker, 10s);
  INFO(describe_processes(left));
  CHECK(left.empty());

  // Not a terminal: local rank 0 inherits the agent's stdin, the others read nothing.
  const std::string reader =
      dir.write("read_one.sh", "read line; echo \"rank $RANK read '$line'\"\n");
  FILE* pipe = ::popen(("printf 'piped text\\n' | " + npu_run_binary() +
                        " --nproc-per-node 2 --no-python /bin/sh " + reader + " 2>/dev/null")
                           .c_str(),
                       "r");
  REQUIRE(pipe != nullptr);
  std::string piped;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) piped.append(buffer, n);
  CHECK(::pclose(pipe) == 0);
  CHECK_THAT(piped, Contains("rank 0 read 'piped text'") && Contains("rank 1 read ''"));
  // Standard descriptors npu_run was started without are /dev/null for every rank, never a
  // pipe or an eventfd the agent opened later under that number. Reported on stderr: stdout is
  // the closed one.
  pipe = ::popen(("exec 0<&- 2>&1 1>&-; " + npu_run_binary() +
                  " --nproc-per-node 2 --no-python /bin/sh -c 'echo \"rank $RANK stdin "
                  "$(readlink /proc/$$/fd/0) stdout $(readlink /proc/$$/fd/1)\" >&2'")
                     .c_str(),
                 "r");
  REQUIRE(pipe != nullptr);
  std::string closed;
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) closed.append(buffer, n);
  CHECK(::pclose(pipe) == 0);
  INFO(closed);
  CHECK_THAT(closed, Contains("rank 0 stdin /dev/null stdout /dev/null\n") &&
                         Contains("rank 1 stdin /dev/null stdout /dev/null\n"));
  const auto after_pipe = wait_until_no_marker_processes(marker, 10s);
  INFO(describe_processes(after_pipe));
  CHECK(after_pipe.empty());
}

}  // namespace test_torchrun_parity
