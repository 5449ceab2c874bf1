// What `hccn_tool -i N <command> -g` prints, read into data. Its exit status is not a verdict
// (`link status: DOWN` exits 0), so each reader looks for its key and returns nullopt when the
// key is missing: a missing key is the caller's failure (../shared/design/HEALTH_TOOLS.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace npu_run {

// The rest of the first line "KEY : VALUE" whose key (before the first ':', blanks and a leading
// "[devid N]" or "[device N]" trimmed) is `key`; values may contain spaces.
std::optional<std::string> hccn_value(const std::string& text, const std::string& key);

// "-link -g": "UP" or "DOWN".
std::optional<std::string> parse_link_status(const std::string& text);
// "-net_health -g": "Success", "Init", "Receive timeout", ...
std::optional<std::string> parse_net_health(const std::string& text);

struct DeviceAddress {
  std::string address;
  std::string netmask;
  bool ipv6 = false;
};
// "-ip -g": ipaddr and netmask.
std::optional<DeviceAddress> parse_device_ip(const std::string& text);

// "-tls -g": the N of "tls switch[N]".
std::optional<int> parse_tls_switch(const std::string& text);

struct OpticalModule {
  bool present = false;
  std::vector<double> tx_power_mw, rx_power_mw;  // per lane, the lanes that printed a number
  std::optional<double> tx_high, tx_low, rx_high, rx_low;  // thresholds, mW
  std::vector<std::pair<std::string, std::string>> flags;  // "Tx Los Flag" -> "0x0"
};
// "-optical -g"; nullopt without a "present" line.
std::optional<OpticalModule> parse_optical(const std::string& text);
// What is wrong with a present module: a lane outside its thresholds, a flag other than 0x0.
std::vector<std::string> optical_problems(const OpticalModule& module);

struct LinkChange {
  int64_t time = 0;  // seconds, the device's clock read as UTC (only differences matter)
  bool up = true;
  std::string text;  // "Sun Oct  5 10:13:51 2025 LINK DOWN"
};
struct LinkStatistics {
  std::optional<int64_t> now;  // "current time", same clock as the records
  std::optional<int> up_count, down_count;
  std::vector<LinkChange> changes;  // newest first, as printed
};
// "-link_stat -g"; nullopt without a "current time" line.
std::optional<LinkStatistics> parse_link_stat(const std::string& text);
// The newest LINK DOWN within `window_s` before `now`, if any.
std::optional<LinkChange> recent_link_down(const LinkStatistics& stats, int64_t window_s);

struct PingOutcome {
  bool reached = false;
  std::string detail;  // "recv time out seq=0", "3 packets transmitted, 0 received, ..."
};
// "-ping -g address IP": reached when it exited 0 with no time-out or unreachable line and a
// summary with 0% loss, as msprechecker requires.
PingOutcome judge_ping(int exit_code, const std::string& out, const std::string& err);

}  // namespace npu_run
