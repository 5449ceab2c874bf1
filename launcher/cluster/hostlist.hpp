// Slurm hostlist expressions (SLURM_JOB_NODELIST etc.), expanded exactly as
// `scontrol show hostnames` does: "node[08-11]" -> node08..node11, several bracket groups,
// comma/space/tab separated items, duplicates and order kept. Checked against the real scontrol
// (tests/data/hostlist/).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace npu_run {

// Throws UsageError naming the expression and what is wrong where scontrol says "Invalid
// hostlist". Deliberate differences: an unterminated '[' ("node[1-3") is an error here
// (scontrol prints a mangled name for it), and so is naming more than 1,000,000 hosts.
std::vector<std::string> expand_hostlist(std::string_view expression);

// How many hosts an expression names (duplicates counted), without making their names.
size_t count_hosts(std::string_view expression);

// The first host of an expression without expanding the rest (the Slurm master node); the
// whole expression is still checked.
std::string first_host(std::string_view expression);

}  // namespace npu_run
