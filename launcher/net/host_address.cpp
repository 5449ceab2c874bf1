#include "net/host_address.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/udp.hpp>
#include <fstream>
#include <sstream>

namespace npu_run::net {

namespace {

bool is_loopback(const in_addr& a) {
  return (ntohl(a.s_addr) >> 24) == 127;
}

std::string to_string(const in_addr& a) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, text, sizeof(text));
  return text;
}

std::string from_host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* results = nullptr;
  if (::getaddrinfo(name, nullptr, &hints, &results) != 0) return "";
  std::string found;
  for (addrinfo* r = results; r != nullptr && found.empty(); r = r->ai_next) {
    const auto& a = reinterpret_cast<sockaddr_in*>(r->ai_addr)->sin_addr;
    if (!is_loopback(a)) found = to_string(a);
  }
  ::freeaddrinfo(results);
  return found;
}

// The interface of the default route: the line of <proc>/net/route whose destination is 0.
std::string default_route_interface(const std::string& proc_root) {
  std::ifstream route(proc_root + "/net/route");
  std::string line;
  std::getline(route, line);  // header
  while (std::getline(route, line)) {
    std::istringstream fields(line);
    std::string iface, destination;
    fields >> iface >> destination;
    if (destination == "00000000") return iface;
  }
  return "";
}

std::string interface_address(const std::string& wanted) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    const auto& a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    if (is_loopback(a)) continue;
    if (wanted.empty() || wanted == i->ifa_name) found = to_string(a);
  }
  ::freeifaddrs(list);
  return found;
}

}  // namespace

std::string primary_address(const std::string& proc_root) {
  if (std::string a = from_host_name(); !a.empty()) return a;
  if (const std::string iface = default_route_interface(proc_root); !iface.empty()) {
    if (std::string a = interface_address(iface); !a.empty()) return a;
  }
  if (std::string a = interface_address(""); !a.empty()) return a;
  return "127.0.0.1";
}

std::string interface_of_address(const std::string& address) {
  boost::system::error_code ec;
  const auto wanted = boost::asio::ip::make_address(address, ec);
  if (ec) return "";
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET && wanted.is_v4()) {
      const auto& a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
      if (wanted.to_v4().to_uint() == ntohl(a.s_addr)) found = i->ifa_name;
    } else if (i->ifa_addr->sa_family == AF_INET6 && wanted.is_v6()) {
      const auto& a = reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr;
      boost::asio::ip::address_v6::bytes_type bytes;
      std::copy(std::begin(a.s6_addr), std::end(a.s6_addr), bytes.begin());
      if (wanted.to_v6().to_bytes() == bytes) found = i->ifa_name;
    }
  }
  ::freeifaddrs(list);
  return found;
}

std::string route_source_address(const std::string& host) {
  boost::asio::io_context io;
  boost::system::error_code ec;
  const auto endpoints = boost::asio::ip::udp::resolver(io).resolve(host, "9", ec);
  if (ec || endpoints.empty()) return "";
  boost::asio::ip::udp::socket socket(io);
  socket.connect(*endpoints.begin(), ec);
  if (ec) return "";
  const auto local = socket.local_endpoint(ec);
  return ec ? "" : local.address().to_string();
}

HostNameAddress host_name_address() {
  HostNameAddress found;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return found;
  found.name = name;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* results = nullptr;
  if (::getaddrinfo(name, nullptr, &hints, &results) != 0 || results == nullptr) return found;
  if (results->ai_family == AF_INET) {
    const auto& a = reinterpret_cast<sockaddr_in*>(results->ai_addr)->sin_addr;
    found.address = to_string(a);
    found.loopback = is_loopback(a);
  } else if (results->ai_family == AF_INET6) {
    char text[INET6_ADDRSTRLEN] = {};
    const auto& a = reinterpret_cast<sockaddr_in6*>(results->ai_addr)->sin6_addr;
    ::inet_ntop(AF_INET6, &a, text, sizeof(text));
    found.address = text;
    found.loopback = IN6_IS_ADDR_LOOPBACK(&a);
  }
  ::freeaddrinfo(results);
  return found;
}

}  // namespace npu_run::net
