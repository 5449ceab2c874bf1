// How `npu_run status --dump` prints what it collected: one line per rank (where it is, how its
// record was taken), the rank the records put apart, and where each node kept the files.
#include <fmt/format.h>

#include "agent/round/status_text.hpp"
#include "rendezvous/state/hang_blame.hpp"

namespace npu_run {
namespace {

const char* record_words(const rdzv::RankStack& s) {
  switch (s.record) {
    case rdzv::RankRecord::kServer:
      return s.recorder ? "worker server, flight recorder" : "worker server, no flight recorder";
    case rdzv::RankRecord::kSilent:
      return "its worker server answered nothing";
    case rdzv::RankRecord::kSignal:
      break;
  }
  return "no worker server: the kernel's view";
}

std::string rank_line(const rdzv::NodeDump& node, const rdzv::RankStack& s) {
  std::string line = fmt::format("  rank {}  node {} {}  pid {}  {}  [{}]", s.rank, node.node_rank,
                                 node.host, s.pid, rdzv::join_frames(s.frames), record_words(s));
  if (!s.last_beat.empty())
    line += fmt::format("  last beat '{}' {:.1f} s ago", s.last_beat,
                        static_cast<double>(s.silence_ms) / 1000.0);
  return line + "\n";
}

}  // namespace

std::string format_job_dump(const rdzv::JobDump& d) {
  if (!d.error.empty()) return fmt::format("dump: none collected: {}\n", d.error);
  size_t ranks = d.unlisted;
  for (const rdzv::NodeDump& n : d.nodes) ranks += n.stacks.size();
  std::string out = fmt::format(
      "dump {}: {} rank{} on {} node{} answered in {:.2f} s", d.id, ranks, ranks == 1 ? "" : "s",
      d.nodes.size(), d.nodes.size() == 1 ? "" : "s", static_cast<double>(d.took_ms) / 1000.0);
  if (!d.silent_nodes.empty())
    out += fmt::format("; node{} {} did not answer in time", d.silent_nodes.size() == 1 ? "" : "s",
                       fmt::join(d.silent_nodes, ", "));
  out += "\n";
  for (const rdzv::NodeDump& n : d.nodes) {
    if (!n.note.empty()) out += fmt::format("  node {} {}: {}\n", n.node_rank, n.host, n.note);
    for (const rdzv::RankStack& s : n.stacks) out += rank_line(n, s);
  }
  if (d.unlisted > 0) out += fmt::format("  ({} more ranks not listed)\n", d.unlisted);
  out += d.blame.empty() ? std::string("apart: no rank stands apart from the others\n")
                         : "apart: " + d.blame + "\n";
  if (!d.recorded && ranks > 0)
    out += "no rank had a flight recorder (gloo has one from torch 2.8): the stacks decided\n";
  for (const rdzv::NodeDump& n : d.nodes) {
    if (!n.directory.empty()) out += fmt::format("records: {}:{}\n", n.host, n.directory);
  }
  return out;
}

}  // namespace npu_run
