// npu_run doctor against fake /proc trees.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "doctor/doctor.hpp"
#include "support/temp_dir.hpp"

namespace test_doctor {

using namespace npu_run;
using Catch::Matchers::Contains;
using npu_run::testing::TempDir;
using Status = CheckResult::Status;

namespace {

struct FakeHost {
  TempDir proc;
  TempDir dev;
  TempDir etc;

  FakeHost(const std::string& somaxconn, const std::string& syn_backlog,
           const std::string& reserved, const std::string& port_range,
           const std::string& limits_line) {
    proc.write("sys/net/core/somaxconn", somaxconn + "\n");
    proc.write("sys/net/ipv4/tcp_max_syn_backlog", syn_backlog + "\n");
    proc.write("sys/net/ipv4/ip_local_reserved_ports", reserved + "\n");
    proc.write("sys/net/ipv4/ip_local_port_range", port_range + "\n");
    proc.write(
        "self/limits",
        "Limit                     Soft Limit           Hard Limit           Units\n" +
            limits_line +
            "\nMax processes             1000                 1000                 processes\n");
  }

  DoctorSettings settings(int nnodes) const {
    DoctorSettings s;
    s.nnodes = nnodes;
    s.proc_root = proc.path();
    s.hccn_conf = etc.file("hccn.conf");
    s.env = {{"NPU_RUN_DEV_ROOT", dev.path()}};
    s.master_port = 1;  // checked separately below; port 1 is never free for a test
    return s;
  }
};

CheckResult find(const std::vector<CheckResult>& results, const std::string& prefix) {
  for (const auto& r : results) {
    if (r.name.rfind(prefix, 0) == 0) return r;
  }
  FAIL("no check named " << prefix);
  return results.front();
}

const std::string kOpenFiles =
    "Max open files            1024                 1048576              files";

}  // namespace

TEST_CASE("doctor: a host ready for a big job passes", "[doctor]") {
  FakeHost host("65535", "65535", "60000-60031", "32768\t60999", kOpenFiles);
  for (int i = 0; i < 8; ++i) host.dev.write("davinci" + std::to_string(i), "");
  std::string conf;
  for (int i = 0; i < 8; ++i)
    conf += "address_" + std::to_string(i) + "=192.168.1." + std::to_string(i) + "\n";
  host.etc.write("hccn.conf", conf);
  const auto results = run_doctor(host.settings(1000));
  CHECK(find(results, "net.core.somaxconn").status == Status::kOk);
  CHECK(find(results, "net.ipv4.tcp_max_syn_backlog").status == Status::kOk);
  CHECK(find(results, "net.ipv4.ip_local_reserved_ports").status == Status::kOk);
  CHECK(find(results, "open files").status == Status::kOk);
  CHECK(find(results, "devices").status == Status::kOk);
  CHECK_THAT(find(results, "devices").detail, Contains("8 Ascend NPUs") && Contains("0-7"));
  CHECK(find(results, "hccn.conf").status == Status::kOk);
}

TEST_CASE("doctor: small kernel queues are scaled to --nnodes with the sysctl line", "[doctor]") {
  FakeHost host("4096", "2048", "", "32768\t60999", kOpenFiles);
  auto results = run_doctor(host.settings(3000));
  CHECK(find(results, "net.core.somaxconn").status == Status::kOk);
  CHECK(find(results, "net.ipv4.tcp_max_syn_backlog").status == Status::kWarn);
  results = run_doctor(host.settings(100000));
  const auto q = find(results, "net.core.somaxconn");
  CHECK(q.status == Status::kWarn);
  CHECK_THAT(q.detail, Contains("4096, fewer than the 100000 nodes"));
  CHECK(q.fix == "sysctl -w net.core.somaxconn=100000");
  CHECK(find(results, "net.ipv4.tcp_max_syn_backlog").fix ==
        "sysctl -w net.ipv4.tcp_max_syn_backlog=100000");
}

TEST_CASE("doctor: HCCL's ports must be reserved when the ephemeral range covers them",
          "[doctor]") {
  SECTION("not reserved") {
    FakeHost host("4096", "4096", "", "32768\t60999", kOpenFiles);
    const auto r = find(run_doctor(host.settings(1)), "net.ipv4.ip_local_reserved_ports");
    CHECK(r.status == Status::kWarn);
    CHECK_THAT(r.detail,
               Contains("60000-60031 are not reserved and lie in the ephemeral range 32768-60999"));
    CHECK(r.fix == "sysctl -w net.ipv4.ip_local_reserved_ports=60000-60031");
  }
  SECTION("only the 16 ports of older CANN, other reservations kept in the fix") {
    FakeHost host("4096", "4096", "8080,60000-60015", "32768\t60999", kOpenFiles);
    const auto r = find(run_doctor(host.settings(1)), "net.ipv4.ip_local_reserved_ports");
    CHECK(r.status == Status::kWarn);
    CHECK_THAT(r.detail, Contains("only 60000-60015") && Contains("32 ports"));
    CHECK(r.fix == "sysctl -w net.ipv4.ip_local_reserved_ports=8080,60000-60015,60000-60031");
  }
  SECTION("HCCL_IF_BASE_PORT outside the ephemeral range needs nothing") {
    FakeHost host("4096", "4096", "", "32768\t60999", kOpenFiles);
    DoctorSettings s = host.settings(1);
    s.env["HCCL_IF_BASE_PORT"] = "20000";
    const auto r = find(run_doctor(s), "net.ipv4.ip_local_reserved_ports");
    CHECK(r.status == Status::kOk);
    CHECK_THAT(r.detail, Contains("20000-20031 lie outside the ephemeral range"));
  }
}

TEST_CASE("doctor: the open-files limit must hold one connection per node", "[doctor]") {
  FakeHost host("65535", "65535", "", "32768\t60999",
                "Max open files            1024                 4096                 files");
  CHECK(find(run_doctor(host.settings(1000)), "open files").status == Status::kOk);
  const auto warn = find(run_doctor(host.settings(3500)), "open files");
  CHECK(warn.status == Status::kWarn);
  CHECK_THAT(warn.fix, Contains("* hard nofile 65536") && Contains("/etc/security/limits.conf"));
  const auto results = run_doctor(host.settings(10000));
  CHECK(find(results, "open files").status == Status::kFail);
  CHECK(doctor_exit_code(results) == 1);
}

TEST_CASE("doctor: devices and hccn.conf", "[doctor]") {
  FakeHost host("4096", "4096", "60000-60031", "32768\t60999", kOpenFiles);
  SECTION("no accelerators is a warning") {
    CHECK(find(run_doctor(host.settings(1)), "devices").status == Status::kWarn);
    CHECK(find(run_doctor(host.settings(1)), "hccn.conf").status == Status::kOk);
  }
  for (int i = 0; i < 4; ++i) host.dev.write("davinci" + std::to_string(i), "");
  SECTION("a missing hccn.conf is a warning with the tool that writes it") {
    const auto r = find(run_doctor(host.settings(1)), "hccn.conf");
    CHECK(r.status == Status::kWarn);
    CHECK_THAT(r.fix, Contains("hccn_tool -i <device> -ip -s address"));
  }
  SECTION("addresses missing for some NPUs are named") {
    host.etc.write("hccn.conf", "address_0=1.1.1.1\naddress_1=1.1.1.2\n");
    const auto r = find(run_doctor(host.settings(1)), "hccn.conf");
    CHECK(r.status == Status::kWarn);
    CHECK_THAT(r.detail, Contains("lacks address_2, address_3"));
  }
  SECTION("a malformed line fails, naming file and line") {
    host.etc.write("hccn.conf", "address_0=1.1.1.1\naddress_1=nonsense\n");
    const auto results = run_doctor(host.settings(1));
    const auto r = find(results, "hccn.conf");
    CHECK(r.status == Status::kFail);
    CHECK_THAT(r.detail, Contains("hccn.conf:2"));
    CHECK(doctor_exit_code(results) == 1);
  }
}

TEST_CASE("doctor: the master port must be free on a local master", "[doctor]") {
  FakeHost host("4096", "4096", "60000-60031", "32768\t60999", kOpenFiles);
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor taken(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  DoctorSettings s = host.settings(1);
  s.master_port = taken.local_endpoint().port();
  const auto busy = find(run_doctor(s), "master port");
  CHECK(busy.status == Status::kFail);
  CHECK_THAT(busy.fix, Contains("ss -ltnp 'sport = :" + std::to_string(s.master_port) + "'"));
  s.master_addr = "192.0.2.10";  // TEST-NET: never this host
  CHECK_THAT(find(run_doctor(s), "master port").detail, Contains("is not an address of this host"));
}

TEST_CASE("doctor: JSON output and port range parsing", "[doctor]") {
  FakeHost host("4096", "4096", "60000-60031", "32768\t60999", kOpenFiles);
  const DoctorSettings s = host.settings(2);
  const auto json = nlohmann::json::parse(format_doctor_json(s, run_doctor(s)));
  CHECK(json["nnodes"] == 2);
  CHECK(json["checks"].size() == 7);
  CHECK(json["checks"][0]["status"] == "ok");
  CHECK(parse_port_ranges("60000-60031,8080") ==
        std::vector<std::pair<int, int>>{{60000, 60031}, {8080, 8080}});
  CHECK(parse_port_ranges("32768\t60999") ==
        std::vector<std::pair<int, int>>{{32768, 32768}, {60999, 60999}});
  CHECK(parse_port_ranges("").empty());
  CHECK_THAT(format_doctor_text(s, run_doctor(s)), Contains("[ ok ]") && Contains("failure"));
}

}  // namespace test_doctor
