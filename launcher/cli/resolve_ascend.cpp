#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "ascend/hccn_conf.hpp"
#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "devices/device_list.hpp"

namespace npu_run {

// Everything about --soc, --rank-table and --hccn-conf that can be checked before the
// rendezvous; whether a given table fits this node's ranks waits for the assignment.
void resolve_ascend(const LaunchInputs& in, const JobShape& shape, AscendConfig& ascend) {
  const LaunchOptions& o = in.options;
  const LaunchFlags& f = o.flags();
  ascend.soc = parse_soc(f.soc, o.source(o.soc));
  check_server_devices(ascend.soc, shape.devices);
  if (f.rank_table.empty()) {
    if (OptionNames::given(o.hccn_conf))
      throw UsageError("--hccn-conf is read by --rank-table auto; add --rank-table auto");
    return;
  }
  if (f.rank_table == "auto") {
    AutoRankTable table;
    table.hccn_conf = !f.hccn_conf.empty()
                          ? f.hccn_conf
                          : lookup(in.env, "NPU_RUN_HCCN_CONF").value_or(kDefaultHccnConf);
    table.device_ips = device_addresses(in.host.hccn_conf(table.hccn_conf), shape.devices,
                                        table.hccn_conf, "--rank-table auto",
                                        "this node's devices " + format_device_list(shape.devices),
                                        "add the line(s) or point --hccn-conf at the right file");
    ascend.rank_table = std::move(table);
    return;
  }
  // A given table is read now, so that a broken file stops the launch before any node joins.
  GivenRankTable given{in.host.absolute(f.rank_table), in.host.rank_table(f.rank_table)};
  if (given.table.device_count() == 0)
    throw UsageError(fmt::format("--rank-table {}: the table lists no devices", f.rank_table));
  ascend.rank_table = std::move(given);
}

}  // namespace npu_run
