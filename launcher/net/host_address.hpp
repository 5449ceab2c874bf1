// This host's primary address, for rank tables' server_id: what other servers would reach it at.
#pragma once

#include <string>

namespace npu_run::net {

// A non-loopback IPv4 address of the host name; else the address of the interface that holds
// the default route (from `proc_root`/net/route); else any non-loopback IPv4 address; else
// 127.0.0.1. Local lookups only: nothing is sent anywhere.
std::string primary_address(const std::string& proc_root = "/proc");

// The name of the interface that holds `address` ("eth0" for 10.0.0.5; IPv4 or IPv6), or "" when
// none of this host's interfaces does. Gloo, NCCL and HCCL advertise the address of the
// interface their *_SOCKET_IFNAME names.
std::string interface_of_address(const std::string& address);

// The source address this host would use to reach `host` (a UDP socket connected, which sends
// nothing), or "" when `host` does not resolve or has no route: what a plan shows before any
// rendezvous connection exists.
std::string route_source_address(const std::string& host);

// This host's name and the first address it resolves to: the one Gloo and NCCL advertise to
// their peers when no *_SOCKET_IFNAME names an interface. `address` is "" when the name does
// not resolve; `loopback` says whether it is 127.0.0.0/8 or ::1, which no peer can reach.
struct HostNameAddress {
  std::string name;
  std::string address;
  bool loopback = false;
};
HostNameAddress host_name_address();

}  // namespace npu_run::net
