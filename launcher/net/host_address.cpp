#include "net/host_address.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

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

}  // namespace npu_run::net
