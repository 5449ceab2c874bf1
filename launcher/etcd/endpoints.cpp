#include "etcd/endpoints.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "basics/text.hpp"

namespace npu_run::etcd {

std::string Endpoint::to_string() const {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                             : fmt::format("{}:{}", host, port);
}

namespace {

Endpoint parse_one(std::string_view entry) {
  Endpoint ep;
  std::string_view rest = entry;
  if (const size_t scheme = rest.find("://"); scheme != std::string_view::npos) {
    const std::string_view name = rest.substr(0, scheme);
    if (name != "http" && name != "https") {
      throw std::invalid_argument(
          fmt::format("'{}': the scheme must be http or https, not {}", entry, name));
    }
    ep.tls = name == "https";
    rest.remove_prefix(scheme + 3);
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos)
    throw std::invalid_argument(fmt::format("'{}': give host:port, without a path", entry));
  std::string_view port_text;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos)
      throw std::invalid_argument(fmt::format("'{}': '[' without ']'", entry));
    ep.host = std::string(rest.substr(1, close - 1));
    std::string_view after = rest.substr(close + 1);
    if (!after.empty() && after.front() == ':') port_text = after.substr(1);
  } else if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    if (rest.find(':') != colon)
      throw std::invalid_argument(fmt::format("'{}': write an IPv6 address in brackets, [{}]:{}",
                                              entry, rest, kDefaultPort));
    ep.host = std::string(rest.substr(0, colon));
    port_text = rest.substr(colon + 1);
  } else {
    ep.host = std::string(rest);
  }
  if (ep.host.empty()) throw std::invalid_argument(fmt::format("'{}': no host", entry));
  if (!port_text.empty() || (!rest.empty() && rest.back() == ':')) {
    const auto port = parse_integer(port_text, 1, 65535);
    if (!port) throw std::invalid_argument(fmt::format("'{}': the port must be 1 to 65535", entry));
    ep.port = static_cast<uint16_t>(*port);
  }
  return ep;
}

}  // namespace

std::vector<Endpoint> parse_endpoints(std::string_view text) {
  std::vector<Endpoint> out;
  for (const std::string_view entry : split(text, ',')) {
    const std::string_view trimmed = trim(entry);
    if (trimmed.empty())
      throw std::invalid_argument(fmt::format("'{}': an empty entry between commas", text));
    out.push_back(parse_one(trimmed));
  }
  if (out.empty()) throw std::invalid_argument("no etcd endpoint given");
  return out;
}

}  // namespace npu_run::etcd
