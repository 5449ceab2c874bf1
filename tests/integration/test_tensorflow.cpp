// TensorFlow on Ascend through npu_run (--framework tensorflow): the TF Adapter's two ways to
// learn the cluster, checked per process. There is no TensorFlow here: each worker prints the
// variables the adapter reads (../shared/design/REFERENCE.md section 10), and node 0's first
// process binds CM_CHIEF_PORT as the adapter's chief would.
#include <catch2/catch.hpp>
#include <regex>
#include <set>

#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_tensorflow {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

const char* const kPrintContract =
    "import os, socket, sys\n"
    "names = ('RANK_TABLE_FILE', 'RANK_ID', 'RANK_SIZE', 'JOB_ID', 'ASCEND_DEVICE_ID', "
    "'DEVICE_ID', 'CM_CHIEF_IP', 'CM_CHIEF_PORT', 'CM_CHIEF_DEVICE', 'CM_WORKER_SIZE', "
    "'CM_WORKER_IP')\n"
    "line = 'rank ' + os.environ['RANK'] + ' ' + ' '.join('%s=%s' % (n, "
    "os.path.basename(os.environ[n]) if n == 'RANK_TABLE_FILE' and n in os.environ else "
    "os.environ.get(n)) for n in names)\n"
    "if os.environ['RANK'] == '0' and 'CM_CHIEF_PORT' in os.environ:\n"
    "    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "    s.bind((os.environ['CM_CHIEF_IP'], int(os.environ['CM_CHIEF_PORT']))); s.listen(1)\n"
    "    line += ' chief-listens'\n"
    "sys.stdout.write(line + '\\n')\n";

std::string eight_npus(const TempDir& dir) {
  for (int i = 0; i < 8; ++i) dir.write("dev/davinci" + std::to_string(i), "");
  return dir.file("dev");
}

}  // namespace

TEST_CASE(
    "tensorflow rank-table mode: RANK_TABLE_FILE, JOB_ID and the logical ASCEND_DEVICE_ID per "
    "process",
    "[integration][tensorflow]") {
  TempDir dir;
  const std::string script = dir.write("contract.py", kPrintContract);
  const std::string data = source_dir() + "/tests/data/rank_table/";
  NpuRunProcess p(
      {"--framework", "tensorflow", "--nproc-per-node", "2", "--devices", "6,7", "--run-id",
       "tf.job-1", "--rank-table", "auto", "--hccn-conf", data + "hccn.conf", "--no-python",
       "/usr/bin/python3", script},
      {{"NPU_RUN_DEV_ROOT", eight_npus(dir)}, {"ASCEND_RT_VISIBLE_DEVICES", "4,5,6,7"}});
  const Finished f = p.wait(60s);
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    CHECK_THAT(f.out, Contains("rank " + std::to_string(rank) +
                               " RANK_TABLE_FILE=rank_table.json RANK_ID=" + std::to_string(rank) +
                               " RANK_SIZE=2 JOB_ID=tf_job-1 "
                               "ASCEND_DEVICE_ID=" +
                               std::to_string(rank + 2) + " DEVICE_ID=" + std::to_string(rank + 6) +
                               " CM_CHIEF_IP=None"));
  }
  require_no_strays(p);
}

TEST_CASE("tensorflow CM_* mode: two nodes, the chief on node 0's held port, no rank variables",
          "[integration][tensorflow]") {
  TempDir dir;
  const std::string script = dir.write("contract.py", kPrintContract);
  const std::string port = std::to_string(unused_port());
  auto node = [&](const char* rank) {
    return std::vector<std::string>{"--framework",
                                    "tensorflow",
                                    "--tf-cluster",
                                    "env",
                                    "--nnodes",
                                    "2",
                                    "--node-rank",
                                    rank,
                                    "--nproc-per-node",
                                    "2",
                                    "--master-port",
                                    port,
                                    "--no-python",
                                    "/usr/bin/python3",
                                    script};
  };
  NpuRunProcess n0(node("0"));
  NpuRunProcess n1(node("1"));
  const std::vector<Finished> f = NpuRunProcess::wait_all({&n0, &n1}, 90s);
  INFO(f[0].out << f[0].err << f[1].out << f[1].err);
  CHECK(f[0].exit_code == 0);
  CHECK(f[1].exit_code == 0);
  const std::string out = f[0].out + f[1].out;
  // Every process: the same chief and size, its node's address, no RANK_* at all.
  const std::regex line(
      "rank ([0-3]) RANK_TABLE_FILE=None RANK_ID=None RANK_SIZE=None JOB_ID=None "
      "ASCEND_DEVICE_ID=([01]) DEVICE_ID=([01]) CM_CHIEF_IP=127\\.0\\.0\\.1 CM_CHIEF_PORT=([0-9]+) "
      "CM_CHIEF_DEVICE=0 CM_WORKER_SIZE=4 CM_WORKER_IP=127\\.0\\.0\\.1( chief-listens)?");
  std::set<std::string> ranks, ports;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it) {
    ranks.insert((*it)[1]);
    ports.insert((*it)[4]);
    CHECK((*it)[2] == (*it)[3]);  // every device visible: logical = physical
  }
  CHECK(ranks == std::set<std::string>{"0", "1", "2", "3"});
  REQUIRE(ports.size() == 1);
  CHECK(*ports.begin() != port);  // not the rendezvous port: one node 0's agent holds
  CHECK_THAT(f[0].out, Contains("chief-listens"));
  require_no_strays(n0);
  require_no_strays(n1);
}

}  // namespace test_tensorflow
