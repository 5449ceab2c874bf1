// The hosts of a job started over ssh, and how many workers (slots) each runs on which devices:
// horovodrun's `-H h1:8,h2:8` (with Slurm hostlist expressions), DeepSpeed's hostfile
// (`host slots=8`), and DeepSpeed's --include/--exclude filters (`h1:0,2@h2`). Pure text in,
// hosts out; every mistake is a UsageError naming the value, the file and line, and the fix.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npu_run {

struct HostSlots {
  std::string name;          // as written: what ssh is given ("user@host" and aliases allowed)
  std::optional<int> slots;  // unset: the job's --nproc-per-node
  // The devices picked by --include/--exclude (empty: the node's own choice, 0..slots-1 or
  // --devices). When set, slots == devices.size().
  std::vector<int> devices;
  // Where the host was named, for messages: "--hosts" or "hostfile h.txt line 3".
  std::string origin;
};

// --hosts "h1:8,h2,node[01-04]:4": comma-separated items, each a host or a Slurm hostlist
// expression with an optional ":SLOTS". A host named twice is refused.
std::vector<HostSlots> parse_hosts_list(std::string_view text, const std::string& source);

// DeepSpeed's hostfile: one `HOST [slots=N]` per line; '#' starts a comment, blank lines are
// skipped. `path` names the file in messages. A host named twice, any other text, or a file
// without hosts is refused.
std::vector<HostSlots> parse_hostfile(std::string_view content, const std::string& path);

// DeepSpeed's --include / --exclude: `NAME[:SLOT[,SLOT...]]` items joined by '@'. Include keeps
// only the named hosts (all their slots, or the listed ones); exclude drops the named hosts, or
// only the listed slots. Hosts keep their order; a host left without a slot is dropped. Naming a
// slot needs the host's slot count: its own, else `default_slots` (a numeric --nproc-per-node).
// Unknown hosts and slots are refused; both filters at once too (`source` names the flags).
std::vector<HostSlots> filter_hosts(std::vector<HostSlots> hosts, std::string_view include,
                                    std::string_view exclude, std::optional<int> default_slots);

}  // namespace npu_run
