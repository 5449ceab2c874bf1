// libFuzzer target: Slurm hostlist expansion. Bad expressions are UsageErrors; good ones expand
// to as many non-empty names as count_hosts says, and the first host is the first expansion (an
// expression naming no host, like "" or ",", has no first host: that is a UsageError too).
// Lists of more than kExpandAtMost hosts are counted and their first host taken, not expanded:
// a million names per input would make the fuzzer slow and its memory (ASan keeps freed blocks)
// grow towards the RSS limit. The unit tests expand the 1,000,000-host boundary itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "basics/usage_error.hpp"
#include "cluster/hostlist.hpp"

namespace {
constexpr size_t kExpandAtMost = 65536;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const size_t count = npu_run::count_hosts(text);
    if (count > kExpandAtMost) {
      if (npu_run::first_host(text).empty()) std::abort();
      return 0;
    }
    const auto hosts = npu_run::expand_hostlist(text);
    if (count != hosts.size()) std::abort();
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
