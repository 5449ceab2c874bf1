// The readers of npu-smi, hccn_tool and nvidia-smi output, against the texts of
// ../shared/design/HEALTH_TOOLS.md, with their spacing and borders varied.
#include <catch2/catch.hpp>

#include "health/hccn_output.hpp"
#include "health/npu_smi_output.hpp"
#include "health/nvidia_smi_output.hpp"

namespace test_health_output {

using namespace npu_run;

namespace {

const char* const kIdle910B3 =
    R"(+------------------------------------------------------------------------------------------------+
| npu-smi 23.0.rc3                 Version: 23.0.rc3                                             |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 98.2        37                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3440 / 65536         |
+===========================+===============+====================================================+
| 1     910B3               | Alarm         | 93.1        36                0    / 0             |
| 0                         | 0000:C2:00.0  | 0           0    / 0          58626/ 65536         |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| No running processes found in NPU 0                                                           |
+===========================+===============+====================================================+
| 1       0                 | 2698909       |                          | 600                     |
+===========================+===============+====================================================+
)";

// A3: two dies per NPU, a Phy-ID column, die 1's power "-", borders one wider.
const char* const kA3 =
    R"(| NPU    Name                 | Health         | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip   Phy-ID               | Bus-Id         | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+============================+================+====================================================+
| 0      Ascend910            | OK             | 166.4       37                0    / 0             |
| 0      0                    | 0000:9D:00.0   | 0           0    / 0          3410 / 65536         |
+----------------------------+----------------+----------------------------------------------------+
| 0      Ascend910            | Critical       | -           36                0    / 0             |
| 1      1                    | 0000:9F:00.0   | 0           0    / 0          3402 / 65536         |
+============================+================+====================================================+
| NPU     Chip               | Process id     | Process name             | Process memory(MB)      |
| 0       1                  | 4242           | python3                  | 600                     |
)";

}  // namespace

TEST_CASE("npu-smi info: chips, their health and the processes, split on '|'", "[health]") {
  const NpuSmiTable table = parse_npu_smi_info(kIdle910B3);
  REQUIRE(table.chips.size() == 2);
  CHECK(table.chips[0].npu == 0);
  CHECK(table.chips[0].name == "910B3");
  CHECK(table.chips[0].health == "OK");
  CHECK(table.chips[1].health == "Alarm");
  REQUIRE(table.processes.size() == 1);
  CHECK(table.processes[0].npu == 1);
  CHECK(table.processes[0].pid == 2698909);
  CHECK(table.processes[0].name.empty());  // inside a container

  const NpuSmiTable a3 = parse_npu_smi_info(kA3);
  REQUIRE(a3.chips.size() == 2);
  CHECK(a3.chips[1].npu == 0);
  CHECK(a3.chips[1].chip == 1);
  CHECK(a3.chips[1].health == "Critical");
  REQUIRE(a3.processes.size() == 1);
  CHECK(a3.processes[0].chip == 1);
  CHECK(a3.processes[0].name == "python3");

  CHECK(parse_npu_smi_info("").chips.empty());
  CHECK(parse_npu_smi_info("Error: the driver is not loaded\n").chips.empty());
}

TEST_CASE("npu-smi info -t health: the status, the error codes, the information", "[health]") {
  const auto ok = parse_chip_health(
      "\tHealth Status                  : OK\n\tError Code                     : NA\n"
      "\tError Information              : NA\n");
  REQUIRE(ok);
  CHECK(ok->status == "OK");
  CHECK(ok->error_codes.empty());
  CHECK(ok->information.empty());
  const auto alarm = parse_chip_health(
      "Health Status : Alarm\nError Code    :   80E18402 80E18401\nError Information : "
      "node fault\n");
  REQUIRE(alarm);
  CHECK(alarm->status == "Alarm");
  CHECK(alarm->error_codes == std::vector<std::string>{"80E18402", "80E18401"});
  CHECK(alarm->information == "node fault");
  CHECK_FALSE(parse_chip_health("\tHealth                         : OK\n"));  // without -c
}

TEST_CASE("npu-smi info -m: the physical id of each (NPU, chip), MCU rows left out", "[health]") {
  const auto a2 = parse_chip_map(
      "\tNPU ID   Chip ID   Chip Logic ID   Chip Name\n\t0   0   0   Ascend 910B3\n"
      "\t0   1   -   Mcu\n\t1        0        1        Ascend 910B3\n");
  REQUIRE(a2.size() == 2);
  CHECK(a2[1].npu == 1);
  CHECK(a2[1].physical_id == 1);
  CHECK(a2[0].name == "Ascend 910B3");
  const auto a3 = parse_chip_map(
      "NPU ID  Chip ID  Chip Logic ID  Chip Phy-ID  Chip Name\n0 0 0 0 Ascend910\n"
      "0 1 1 1 Ascend910\n1 0 2 8 Ascend910\n");
  REQUIRE(a3.size() == 3);
  CHECK(a3[2].npu == 1);
  CHECK(a3[2].physical_id == 8);  // the Phy-ID, not the logic id
}

TEST_CASE("npu-smi: the processes on a job's devices, placed by the chip map", "[health]") {
  // A3: NPU 0 chip 1 is physical device 1; NPU 1 chip 0 is device 8.
  const auto map = parse_chip_map(
      "NPU ID  Chip ID  Chip Logic ID  Chip Phy-ID  Chip Name\n0 0 0 0 Ascend910\n"
      "0 1 1 1 Ascend910\n1 0 2 8 Ascend910\n");
  NpuSmiTable table;
  table.processes = {{0, 1, 42, "python3"}, {1, 0, 43, ""}, {0, 0, 44, "other"}, {5, 0, 45, ""}};
  const auto on = processes_on_devices(table, map, {1, 8});
  REQUIRE(on.size() == 2);
  CHECK(on[0].device == 1);
  CHECK(on[0].pid == 42);
  CHECK(on[0].name == "python3");
  CHECK(on[1].device == 8);  // not device 0 (another job's), nor NPU 5 (not in the map)
  CHECK(on[1].pid == 43);
  CHECK(processes_on_devices(table, {}, {1, 8}).empty());
}

TEST_CASE("hccn_tool: link, net health, address and TLS switch, by key", "[health]") {
  CHECK(parse_link_status("link status: UP\n") == "UP");
  CHECK(parse_link_status("link status:   DOWN  \n") == "DOWN");
  CHECK_FALSE(parse_link_status("The device is not exist!\n"));
  CHECK(parse_net_health("net health status: Receive timeout\n") == "Receive timeout");
  CHECK(parse_net_health("net health status: Init\n") == "Init");

  const auto v4 = parse_device_ip("ipaddr:10.0.0.5\nnetmask:255.255.255.0\n");
  REQUIRE(v4);
  CHECK(v4->address == "10.0.0.5");
  CHECK(v4->netmask == "255.255.255.0");
  CHECK_FALSE(v4->ipv6);
  const auto v6 = parse_device_ip("ipaddr:fd00::5\nnetmask:ffff:ffff::\n");
  REQUIRE(v6);
  CHECK(v6->address == "fd00::5");
  CHECK(v6->ipv6);
  CHECK_FALSE(parse_device_ip(""));

  CHECK(parse_tls_switch("dev_id:0, tls switch[1](0:disable, 1:enable), tls preconfigured[1](0:"
                         "non-preset, 1:preset), tls alarm time threshold[60]days\n") == 1);
  CHECK(parse_tls_switch("dev_id:3, tls switch[0](0:disable, 1:enable), tls alarm time "
                         "threshold[60]days\n") == 0);  // older firmware
  CHECK_FALSE(parse_tls_switch("No certificate found, please set certs firstly!\n"));
}

TEST_CASE("hccn_tool -optical: presence, lanes against thresholds, flags", "[health]") {
  const std::string healthy =
      "optical info:\npresent              : present\ntemperature          : 47 C\n"
      "Tx Power0            : 1.0189 mW\nRx Power0            : 0.8 mW\n"
      "Rx Power1 : 0.0100 mW\nTxPower High Thres   : 3.5 mW\nTxPower Low Thres    : 0.15 mW\n"
      "RxPower High Thres   : 3.5 mW\nRxPower Low Thres    : 0.03 mW\n"
      "Tx Los Flag          : 0x0\nRx Los Flag          : 0x0\nTx LoL Flag          : 0x0\n"
      "Rx LoL Flag          : 0x1\n";
  const auto module = parse_optical(healthy);
  REQUIRE(module);
  CHECK(module->present);
  CHECK(module->rx_power_mw.size() == 2);
  const auto problems = optical_problems(*module);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0] == "Rx power of lane 1 is 0.0100 mW, outside 0.0300-3.5000 mW");
  CHECK(problems[1] == "Rx LoL Flag is 0x1");
  const auto absent = parse_optical("optical info:\npresent   : not present\nTx Power0 : NA\n");
  REQUIRE(absent);
  CHECK_FALSE(absent->present);
  CHECK(absent->tx_power_mw.empty());
}

TEST_CASE("hccn_tool -link_stat: a recent LINK DOWN, on the device's own clock", "[health]") {
  const std::string text =
      "[devid 0]current time        : Tue Oct 28 21:46:46 2025\n"
      "[devid 0]link up count       : 2\n[devid 0]link down count     : 1\n"
      "[devid 0]link change records :\n"
      "[devid 0]    Tue Oct 28 21:40:51 2025    LINK UP\n"
      "[devid 0]    Tue Oct 28 21:40:46 2025    LINK DOWN\n"
      "[devid 0]    Sun Oct  5 10:13:51 2025    LINK UP\n";
  const auto stats = parse_link_stat(text);
  REQUIRE(stats);
  CHECK(stats->down_count == 1);
  REQUIRE(stats->changes.size() == 3);
  CHECK(stats->changes[2].text == "Sun Oct  5 10:13:51 2025 LINK UP");
  const auto down = recent_link_down(*stats, int64_t{10} * 60);
  REQUIRE(down);
  CHECK(*stats->now - down->time == int64_t{6} * 60);
  CHECK_FALSE(recent_link_down(*stats, int64_t{5} * 60));
  // Older drivers: "[device 0]" and no down count; "NA" records.
  const auto old = parse_link_stat(
      "[device 0]current time : Tue Oct 28 21:46:46 2025\n[device 0]link change records : NA\n");
  REQUIRE(old);
  CHECK_FALSE(old->down_count);
  CHECK(old->changes.empty());
}

TEST_CASE("hccn_tool -ping: reached only with no loss, exit 0 and no time-out", "[health]") {
  const std::string good =
      "device 0 PING 10.0.1.5\nrecv seq=0,time=0.067000ms\n"
      "3 packets transmitted, 3 received, 0.00% packet loss\n";
  CHECK(judge_ping(0, good, "").reached);
  const auto lost = judge_ping(1,
                               "device 0 PING 10.0.1.5\nrecv time out seq=0\n"
                               "3 packets transmitted, 0 received, 100.00% packet loss\n",
                               "Command execute failed!\n");
  CHECK_FALSE(lost.reached);
  CHECK(lost.detail == "recv time out seq=0");
  CHECK_FALSE(judge_ping(1, "", "Command execute failed!\n").reached);
  CHECK(judge_ping(1, "", "Command execute failed!\n").detail == "Command execute failed!");
  CHECK_FALSE(judge_ping(0, "3 packets transmitted, 2 received, 33.33% packet loss\n", "").reached);
}

TEST_CASE("nvidia-smi CSV: cells trimmed, [N/A] is no number", "[health]") {
  const auto rows = parse_nvidia_csv("0, 00000000:18:00.0, 0\n\n1, 00000000:19:00.0, [N/A]\n");
  REQUIRE(rows.size() == 2);
  CHECK(rows[1][1] == "00000000:19:00.0");
  CHECK(nvidia_count(rows[0][2]) == 0);
  CHECK_FALSE(nvidia_count(rows[1][2]));
  CHECK(nvidia_flag("Yes") == true);
  CHECK(nvidia_flag("0") == false);
  CHECK_FALSE(nvidia_flag("[Not Supported]"));
}

}  // namespace test_health_output
