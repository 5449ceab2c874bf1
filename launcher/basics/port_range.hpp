// A range of TCP ports, for the ports a held worker port must avoid.
#pragma once

namespace npu_run {

struct PortRange {
  int first = 0;
  int last = 0;  // inclusive
  bool contains(int port) const { return port >= first && port <= last; }
};

}  // namespace npu_run
