// The first line a host-agent reads from ssh's stdin: what must not travel on a command line
// (the rendezvous token, the variables passed, which may hold secrets too) and, with --ssh-tree,
// the hosts this one starts in turn. One JSON object on one line.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace npu_run {

// A host that a host starts (--ssh-tree): its ssh command, and the hosts it starts in turn.
struct ChildHost {
  std::string name;
  std::vector<std::string> argv;  // ssh ... (run as is by the host that starts it)
  bool ship_binary = false;       // answer "need" with the starting host's own binary
  std::vector<ChildHost> children;
};

struct Preamble {
  std::string token;  // empty: none
  std::vector<std::pair<std::string, std::string>> env;
  int fanout = 32;
  std::vector<ChildHost> children;
};

// A preamble is at most this long: 16 MiB, room for 10,000 hosts' ssh commands.
inline constexpr size_t kMaxPreambleBytes = size_t{16} << 20;

// One line, ending in '\n'.
std::string format_preamble(const Preamble& preamble);
// Throws std::runtime_error saying what is wrong.
Preamble parse_preamble(std::string_view line);

}  // namespace npu_run
