// libFuzzer target: Slurm hostlist expansion. Bad expressions are UsageErrors; good ones expand
// to as many non-empty names as count_hosts says, and the first host is the first expansion (an
// expression naming no host, like "" or ",", has no first host: that is a UsageError too).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "npu_run/hostlist.hpp"
#include "npu_run/usage_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto hosts = npu_run::expand_hostlist(text);
    if (npu_run::count_hosts(text) != hosts.size()) std::abort();
    if (hosts.empty()) {
      bool refused = false;
      try {
        npu_run::first_host(text);
      } catch (const npu_run::UsageError&) {
        refused = true;
      }
      if (!refused) std::abort();
      return 0;
    }
    if (npu_run::first_host(text) != hosts.front()) std::abort();
    for (const std::string& h : hosts) {
      if (h.empty()) std::abort();
    }
  } catch (const npu_run::UsageError&) {
  }
  return 0;
}
