#include "ascend/hccn_conf.hpp"

#include <fmt/format.h>

#include <boost/asio/ip/address.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "basics/text.hpp"
#include "basics/usage_error.hpp"

namespace npu_run {

std::map<int, std::string> parse_hccn_conf(const std::string& text, const std::string& path) {
  std::map<int, std::string> addresses;
  std::map<int, int> seen_on_line;
  std::istringstream in(text);
  int line_number = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++line_number;
    const std::string_view line = trim(raw);
    if (line.rfind("address_", 0) != 0) continue;  // comments, blank lines and other keys
    const auto where = fmt::format("{}:{}", path, line_number);
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) {
      throw UsageError(
          fmt::format("{}: '{}' has no '='; expected address_<device>=<ip>", where, line));
    }
    const auto id = parse_integer(trim(line.substr(8, eq - 8)), 0, 1'000'000);
    if (!id) {
      throw UsageError(
          fmt::format("{}: '{}': '{}' is not a device id; expected address_<device>=<ip>", where,
                      line, trim(line.substr(8, eq - 8))));
    }
    const std::string ip(trim(line.substr(eq + 1)));
    boost::system::error_code ec;
    boost::asio::ip::make_address(ip, ec);
    if (ec) throw UsageError(fmt::format("{}: '{}': '{}' is not an IP address", where, line, ip));
    const int device = static_cast<int>(*id);
    if (const auto first = seen_on_line.find(device); first != seen_on_line.end()) {
      throw UsageError(fmt::format("{}: address_{} is given again (first on line {}); keep one",
                                   where, device, first->second));
    }
    seen_on_line[device] = line_number;
    addresses[device] = ip;
  }
  return addresses;
}

std::map<int, std::string> read_hccn_conf(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw UsageError(fmt::format(
        "cannot read {}: {}; give the device addresses with --device-ips or another file "
        "with --hccn-conf",
        path, std::strerror(errno)));
  }
  std::stringstream content;
  content << in.rdbuf();
  return parse_hccn_conf(content.str(), path);
}

std::vector<std::string> missing_addresses(const std::map<int, std::string>& addresses,
                                           const std::vector<int>& devices) {
  std::vector<std::string> missing;
  for (int device : devices) {
    if (!addresses.count(device)) missing.push_back(fmt::format("address_{}", device));
  }
  return missing;
}

std::vector<std::string> device_addresses(const std::map<int, std::string>& addresses,
                                          const std::vector<int>& devices, const std::string& path,
                                          const std::string& context, const std::string& for_whom,
                                          const std::string& fix) {
  const std::vector<std::string> missing = missing_addresses(addresses, devices);
  if (!missing.empty()) {
    throw UsageError(fmt::format("{}{} has no {} for {}; {}", context.empty() ? "" : context + ": ",
                                 path, fmt::join(missing, ", "), for_whom, fix));
  }
  std::vector<std::string> ips;
  for (int device : devices) ips.push_back(addresses.at(device));
  return ips;
}

}  // namespace npu_run
