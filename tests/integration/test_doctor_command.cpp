// `npu_run doctor` through the binary, against a fake /proc tree.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_doctor_command {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

TEST_CASE("doctor command: text and JSON, exit 1 only when a check fails",
          "[integration][doctor]") {
  TempDir proc;
  proc.write("sys/net/core/somaxconn", "128\n");
  proc.write("sys/net/ipv4/tcp_max_syn_backlog", "128\n");
  proc.write("sys/net/ipv4/ip_local_reserved_ports", "\n");
  proc.write("sys/net/ipv4/ip_local_port_range", "32768\t60999\n");
  proc.write("self/limits",
             "Max open files            1024                 4096                 files\n");
  const EnvOverrides env = {{"NPU_RUN_PROC_ROOT", proc.path()}};
  const int port = unused_port();

  Finished f = run_npu_run({"doctor", "--master-port", std::to_string(port)}, env);
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);  // warnings only
  CHECK_THAT(f.out, Contains("[warn] net.ipv4.ip_local_reserved_ports") &&
                        Contains("fix: sysctl -w net.ipv4.ip_local_reserved_ports=60000-60031"));

  f = run_npu_run({"doctor", "--nnodes", "2:5000", "--json", "--master-port", std::to_string(port)},
                  env);
  CHECK(f.exit_code == 1);  // 5000 nodes need more than 4096 descriptors
  const auto json = nlohmann::json::parse(f.out);
  CHECK(json["nnodes"] == 5000);
  CHECK(json["failures"] == 1);
  bool somaxconn_fix = false;
  for (const auto& check : json["checks"]) {
    somaxconn_fix = somaxconn_fix || check["fix"] == "sysctl -w net.core.somaxconn=65535";
  }
  CHECK(somaxconn_fix);

  f = run_npu_run({"doctor", "--nnodes", "0"}, env);
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.err, Contains("--nnodes '0'") && Contains("npu_run doctor"));
}

}  // namespace test_doctor_command
