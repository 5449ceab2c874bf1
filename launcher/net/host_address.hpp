// This host's primary address, for rank tables' server_id: what other servers would reach it at.
#pragma once

#include <string>

namespace npu_run::net {

// A non-loopback IPv4 address of the host name; else the address of the interface that holds
// the default route (from `proc_root`/net/route); else any non-loopback IPv4 address; else
// 127.0.0.1. Local lookups only: nothing is sent anywhere.
std::string primary_address(const std::string& proc_root = "/proc");

}  // namespace npu_run::net
