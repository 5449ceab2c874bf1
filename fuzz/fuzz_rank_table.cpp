// libFuzzer target: the rank table reader and the hccn.conf parser. Bad files are UsageErrors;
// a table that is accepted is written back and read again to the same JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ascend/hccn_conf.hpp"
#include "ascend/rank_table.hpp"
#include "basics/usage_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const npu_run::RankTable table = npu_run::parse_rank_table(text, "fuzz.json");
    const std::string json = npu_run::rank_table_json(table);
    if (npu_run::rank_table_json(npu_run::parse_rank_table(json, "again.json")) != json)
      std::abort();
  } catch (const npu_run::UsageError&) {
  }
  try {
    for (const auto& [device, address] : npu_run::parse_hccn_conf(text, "hccn.conf")) {
      if (device < 0 || address.empty()) std::abort();
    }
  } catch (const npu_run::UsageError&) {
  }
  return 0;
}
