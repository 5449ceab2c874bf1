#include <fmt/format.h>

#include "ascend/hccn_conf.hpp"
#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "devices/device_list.hpp"

namespace npu_run {

// Everything about --soc, --rank-table and --hccn-conf that can be checked before the
// rendezvous; whether a given table fits this node's ranks waits for the assignment.
void resolve_ascend(const LaunchInputs& in, const JobShape& shape, AscendConfig& ascend) {
  const AscendFlags& f = in.options.ascend;
  ascend.soc = parse_soc(*f.soc, f.soc.source());
  check_server_devices(ascend.soc, shape.devices);
  const std::string& rank_table = *f.rank_table;
  if (rank_table.empty()) {
    if (f.hccn_conf.given())
      throw UsageError("--hccn-conf is read by --rank-table auto; add --rank-table auto");
    return;
  }
  if (rank_table == "auto") {
    AutoRankTable table;
    table.hccn_conf = !f.hccn_conf->empty()
                          ? *f.hccn_conf
                          : lookup(in.env, "NPU_RUN_HCCN_CONF").value_or(kDefaultHccnConf);
    table.device_ips = device_addresses(in.host.hccn_conf(table.hccn_conf), shape.devices,
                                        table.hccn_conf, "--rank-table auto",
                                        "this node's devices " + format_device_list(shape.devices),
                                        "add the line(s) or point --hccn-conf at the right file");
    ascend.rank_table = std::move(table);
    return;
  }
  // A given table is read now, so that a broken file stops the launch before any node joins.
  GivenRankTable given{in.host.absolute(rank_table), in.host.rank_table(rank_table)};
  if (given.table.device_count() == 0)
    throw UsageError(fmt::format("--rank-table {}: the table lists no devices", rank_table));
  ascend.rank_table = std::move(given);
}

}  // namespace npu_run
