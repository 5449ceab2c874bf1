// The etcd members a job is given: torchrun's `--rdzv-endpoint host1:2379,host2:2379` (several,
// tried in turn), each optionally with its scheme (`http://`, `https://`) and IPv6 in brackets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace npu_run::etcd {

inline constexpr uint16_t kDefaultPort = 2379;

struct Endpoint {
  std::string host;  // name or address, IPv6 without brackets
  uint16_t port = kDefaultPort;
  bool tls = false;  // https://, or protocol=https for all

  std::string to_string() const;  // "host:port", "[::1]:2379"
};

// Throws std::invalid_argument naming the entry and what is wrong: an empty entry, a bad port,
// a scheme other than http/https, a path after the port.
std::vector<Endpoint> parse_endpoints(std::string_view text);

}  // namespace npu_run::etcd
