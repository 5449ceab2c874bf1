// A compiled stand-in for a healthy node's npu-smi and hccn_tool (the name it is called by picks
// the tool), for benchmarks only: tests/tools/fake_tools prints the same lines for a healthy
// node (an integration case compares them), but each of its calls starts bash, a few
// milliseconds of CPU; 16 nodes' health gates on two cores would measure those, not npu_run.
// Here a call costs an exec. It reads `delay S` from $NPU_RUN_FAKE_SCENARIO, refuses any other
// fact, and keeps the one rule that matters to a runner: a device answers "busy" (exit 11) to a
// second hccn_tool call from the same parent while one runs, written to SCENARIO.collisions.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kDevices = 8;  // 0-7, one chip per NPU (an A2 server)
constexpr int kWidth = 26;   // the narrow style's key padding

std::string scenario_path() {
  const char* path = std::getenv("NPU_RUN_FAKE_SCENARIO");
  return path == nullptr ? "" : path;
}

// The scenario's delay in seconds; exits 2 on a fact this fake cannot play.
double scenario_delay() {
  std::ifstream in(scenario_path());
  double delay = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string key;
    if (!(words >> key) || key[0] == '#') continue;
    if (key == "delay" && words >> delay) continue;
    std::cerr << "fast fake tools: only `delay S` is played, not: " << line << "\n";
    std::exit(2);
  }
  return delay;
}

// Holds the device until the process ends; false when another call of this parent holds it.
bool hold_device(int device, const std::string& command) {
  const std::string scenario = scenario_path();
  if (scenario.empty()) return true;
  const std::string parent = std::to_string(::getppid());
  const std::string lock = scenario + ".lock." + parent + "." + std::to_string(device);
  const int fd = ::open(lock.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);  // kept to the end
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
  std::ofstream(scenario + ".collisions", std::ios::app)
      << parent << " " << device << " " << command << "\n";
  return false;
}

void pause_for(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

std::string link_stat_time(std::time_t when) {
  char text[64];
  std::tm utc{};
  ::gmtime_r(&when, &utc);
  (void)std::strftime(text, sizeof text, "%a %b %e %H:%M:%S %Y", &utc);
  return text;
}

void print_optical() {
  std::printf("optical info:\n");
  std::printf("%-*s: present\n%-*s: 47 C\n", kWidth, "present", kWidth, "temperature");
  for (int lane = 0; lane < 4; ++lane) {
    std::printf("%-*s: 0.9312 mW\n", kWidth, ("Tx Power" + std::to_string(lane)).c_str());
    std::printf("%-*s: 1.0189 mW\n", kWidth, ("Rx Power" + std::to_string(lane)).c_str());
  }
  const char* const thresholds[][2] = {{"TxPower High Thres", "3.5481"},
                                       {"TxPower Low Thres", "0.1585"},
                                       {"RxPower High Thres", "3.5481"},
                                       {"RxPower Low Thres", "0.0363"}};
  for (const auto& [key, value] : thresholds) std::printf("%-*s: %s mW\n", kWidth, key, value);
  for (const char* flag : {"Tx Los Flag", "Rx Los Flag", "Tx LoL Flag", "Rx LoL Flag"})
    std::printf("%-*s: 0x0\n", kWidth, flag);
}

void print_link_stat(int device) {
  const std::time_t now = std::time(nullptr);
  std::printf("[devid %d]%-20s: %s\n", device, "current time", link_stat_time(now).c_str());
  std::printf("[devid %d]%-20s: 2\n[devid %d]%-20s: 1\n[devid %d]%-20s: \n", device,
              "link up count", device, "link down count", device, "link change records");
  std::printf("[devid %d]    %s    LINK UP\n", device, link_stat_time(now - 86400).c_str());
}

int hccn_tool(const std::vector<std::string>& args) {
  if (args.size() < 3 || args[0] != "-i") {
    std::cerr << "Usage: hccn_tool -i <device> <command> -g\n";
    return 2;
  }
  const int device = std::atoi(args[1].c_str());
  const std::string& command = args[2];
  if (!hold_device(device, command)) {
    std::printf("hccn_tool is busy, please try again.\n");
    return 11;
  }
  pause_for(scenario_delay());
  if (device < 0 || device >= kDevices || args[1] != std::to_string(device)) {
    std::cerr << "The device is not exist!\n";
    return 4;
  }
  if (command == "-link") {
    std::printf("link status: UP\n");
  } else if (command == "-net_health") {
    std::printf("net health status: Success\n");
  } else if (command == "-lldp") {
    // A healthy node whose switch says nothing: no neighbour heard.
  } else if (command == "-ip") {
    std::printf("ipaddr:10.0.0.%d\nnetmask:255.255.255.0\n", device + 10);
  } else if (command == "-tls") {
    std::printf(
        "dev_id:%d, tls switch[0](0:disable, 1:enable), tls preconfigured[1](0:non-preset, "
        "1:preset), tls alarm time threshold[60]days\n[ca cert info]:\n",
        device);
  } else if (command == "-optical") {
    print_optical();
  } else if (command == "-link_stat") {
    print_link_stat(device);
  } else if (command == "-ping") {
    std::printf("device %d PING %s\n", device, args.size() > 5 ? args[5].c_str() : "");
    for (int seq = 0; seq < 3; ++seq) std::printf("recv seq=%d,time=0.067000ms\n", seq);
    std::printf("3 packets transmitted, 3 received, 0.00%% packet loss\n");
  } else {
    std::cerr << "Command is not supported.\n";
    return 2;
  }
  return 0;
}

std::string bar(char fill) {
  return "+" + std::string(kWidth, fill) + "+" + std::string(15, fill) + "+" +
         std::string(52, fill) + "+\n";
}

void row(const std::string& a, const std::string& b, const std::string& c) {
  std::printf("| %-*s | %-13s | %-50s |\n", kWidth - 2, a.c_str(), b.c_str(), c.c_str());
}

void print_table() {
  std::printf("+%s+\n", std::string(kWidth + 69, '-').c_str());
  std::printf("| %-*s |\n", kWidth + 67, "npu-smi 23.0.rc3                 Version: 23.0.rc3");
  std::printf("%s", bar('-').c_str());
  row("NPU   Name", "Health", "Power(W)    Temp(C)           Hugepages-Usage(page)");
  row("Chip", "Bus-Id", "AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)");
  std::printf("%s", bar('=').c_str());
  for (int d = 0; d < kDevices; ++d) {
    row(std::to_string(d) + "     910B3", "OK", "98.2        37                0    / 0");
    row("0", "0000:C" + std::to_string(d) + ":00.0", "0           0    / 0          58626/ 65536");
    std::printf("%s", bar('=').c_str());
  }
  std::printf("%s", bar('-').c_str());
  std::printf("| %-*s | %-13s | %-24s | %-23s |\n", kWidth - 2, "NPU     Chip", "Process id",
              "Process name", "Process memory(MB)");
  std::printf("%s", bar('=').c_str());
  for (int d = 0; d < kDevices; ++d) {
    std::printf("| %-*s |\n", kWidth + 67,
                ("No running processes found in NPU " + std::to_string(d)).c_str());
    std::printf("%s", bar('=').c_str());
  }
}

int npu_smi(const std::vector<std::string>& args) {
  pause_for(scenario_delay());
  std::string line;
  for (const std::string& a : args) line += (line.empty() ? "" : " ") + a;
  if (line == "info") {
    print_table();
  } else if (line == "info -m") {
    const char* const format = "\t%-30s %-30s %-30s %s\n";
    std::printf(format, "NPU ID", "Chip ID", "Chip Logic ID", "Chip Name");
    for (int d = 0; d < kDevices; ++d) {
      const std::string id = std::to_string(d);
      std::printf(format, id.c_str(), "0", id.c_str(), "Ascend 910B3");
      std::printf(format, id.c_str(), "1", "-", "Mcu");
    }
  } else if (args.size() == 7 && args[1] == "-t" && args[2] == "health") {
    std::printf("\t%-30s : OK\n\t%-30s : NA\n\t%-30s : NA\n", "Health Status", "Error Code",
                "Error Information");
  } else if (args.size() == 7 && args[1] == "-t" && args[2] == "spod-info") {
    std::printf("This device does not support querying spod-info.\n");
    return 255;
  } else {
    std::printf("Error: command not supported by this fake: %s\n", line.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string called = argv[0];
  const std::string name = called.substr(called.find_last_of('/') + 1);
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (name == "hccn_tool") return hccn_tool(args);
  if (name == "npu-smi") return npu_smi(args);
  std::cerr << "fast fake tools: call me as hccn_tool or npu-smi, not " << name << "\n";
  return 2;
}
