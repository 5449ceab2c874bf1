// Device topology rules of Ascend server series (--soc): which device sets one server may run
// and whether servers of one job must agree. A violation is refused before any worker starts.
#pragma once

#include <string>
#include <vector>

namespace npu_run {

enum class Soc { kNone, kAtlasTraining, kAtlasA2, kAtlasA3 };

// "atlas-training" etc.; throws UsageError naming `source` for unknown names.
Soc parse_soc(const std::string& name, const std::string& source);
std::string soc_name(Soc soc);

// Rules one server can check alone. Throws UsageError naming the devices and the rule.
void check_server_devices(Soc soc, const std::vector<int>& devices);

// Rules across the job's servers, given each node's device count in node-rank order.
struct JobTopology {
  std::string error;                  // empty: allowed
  std::vector<std::string> warnings;  // allowed, but worth saying
};
JobTopology check_job_devices(Soc soc, const std::vector<int>& devices_per_node);

}  // namespace npu_run
