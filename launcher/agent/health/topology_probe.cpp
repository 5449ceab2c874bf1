#include "agent/health/topology_probe.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>

#include "agent/health/tool_call.hpp"
#include "cluster/topology_file.hpp"
#include "health/npu_smi_output.hpp"
#include "health/tool_paths.hpp"
#include "health/topology_output.hpp"
#include "net/host_address.hpp"
#include "workers/child_exits.hpp"

namespace npu_run {

namespace {

namespace asio = boost::asio;

void add_source(TopologyPath& path, const std::string& source) {
  if (std::find(path.sources.begin(), path.sources.end(), source) == path.sources.end())
    path.sources.push_back(source);
}

std::vector<std::string> names_of(const std::string& host) {
  std::vector<std::string> names{host};
  if (const size_t dot = host.find('.'); dot != std::string::npos)
    names.push_back(host.substr(0, dot));
  if (std::string addr = net::primary_address(); !addr.empty()) names.push_back(std::move(addr));
  return names;
}

// A given rank table: the SuperPoD that lists this server, and the server's place in the table
// (the table's order is the ranks' order, so it must be the seats' too).
void from_rank_table(const RankTable& table, const std::vector<std::string>& names,
                     TopologyPath& path) {
  for (size_t i = 0; i < table.servers.size(); ++i) {
    const std::string& id = table.servers[i].server_id;
    if (std::find(names.begin(), names.end(), id) == names.end()) continue;
    for (const SuperPod& pod : table.super_pods) {
      if (std::find(pod.server_ids.begin(), pod.server_ids.end(), id) != pod.server_ids.end())
        path.superpod = pod.super_pod_id;
    }
    path.server = std::to_string(i);
    add_source(path, "rank table");
    return;
  }
}

// The tool calls: npu-smi's one after another (the map, then the SuperPoD of each device asked
// for), hccn_tool's beside them.
class ToolProbe {
 public:
  ToolProbe(asio::io_context& io, ChildExits& exits, const LaunchConfig& cfg, HealthToolPaths tools,
            TopologyPath& path)
      : io_(io), exits_(exits), cfg_(cfg), tools_(std::move(tools)), path_(path) {}

  // Starts the calls; false when there was nothing to ask.
  bool start() {
    if (cfg_.shape.devices.empty()) return false;
    const int first = cfg_.shape.devices.front();
    if (!tools_.npu_smi.empty() && (path_.superpod.empty() || cfg_.ascend.rank_table_auto()))
      call(tools_.npu_smi, {"info", "-m"}, [this](const ToolRun& run) { mapped(run); });
    if (!tools_.hccn_tool.empty() && path_.switches.empty()) {
      call(tools_.hccn_tool, {"-i", std::to_string(first), "-lldp", "-g"},
           [this](const ToolRun& run) { lldp(run); });
    }
    return running_ > 0;
  }

 private:
  void call(const std::string& tool, std::vector<std::string> args,
            std::function<void(const ToolRun&)> then) {
    args.insert(args.begin(), tool);
    ++running_;
    ToolCall::start(io_, exits_, std::move(args),
                    std::min(cfg_.health.run.call_timeout, kTopologyCallTimeout),
                    [this, then = std::move(then)](const ToolRun& run) {
                      if (!run.exited_zero())
                        spdlog::debug("topology: {}: {}", run.command_line(), run.describe());
                      then(run);  // may start the next call
                      // The loop never runs out of work on its own: before Linux 5.3 children's
                      // exits come through a SIGCHLD signal_set, always waiting.
                      if (--running_ == 0) io_.stop();
                    });
  }

  void lldp(const ToolRun& run) {
    if (!run.exited_zero()) return;
    if (const auto leaf = parse_lldp_switch(run.out)) {
      path_.switches = {*leaf};
      add_source(path_, "lldp");
    }
  }

  void mapped(const ToolRun& run) {
    if (!run.exited_zero()) return;
    map_ = parse_chip_map(run.out);
    ask_spod(0);
  }

  // spod-info of the job's local rank `local`: the first answers for the node, the rest only
  // add their SDID (rank table 1.2).
  void ask_spod(size_t local) {
    if (local >= cfg_.shape.devices.size()) return;
    const int device = cfg_.shape.devices[local];
    const auto row = std::find_if(map_.begin(), map_.end(),
                                  [&](const ChipMapRow& r) { return r.physical_id == device; });
    if (row == map_.end()) return;
    call(tools_.npu_smi,
         {"info", "-t", "spod-info", "-i", std::to_string(row->npu), "-c",
          std::to_string(row->chip)},
         [this, local](const ToolRun& run) { spod(local, run); });
  }

  void spod(size_t local, const ToolRun& run) {
    const auto info = run.exited_zero() ? parse_spod_info(run.out) : std::nullopt;
    if (!info) return;  // not a SuperPoD (A2 and older say the command is not supported)
    if (local == 0 && path_.superpod.empty()) {
      path_.superpod = info->super_pod_id;
      if (path_.server.empty()) path_.server = info->server_index;
      add_source(path_, "npu-smi");
    }
    if (!cfg_.ascend.rank_table_auto() || !info->sdid) return;
    path_.super_device_ids.push_back(*info->sdid);
    ask_spod(local + 1);
  }

  asio::io_context& io_;
  ChildExits& exits_;
  const LaunchConfig& cfg_;
  HealthToolPaths tools_;
  TopologyPath& path_;
  std::vector<ChipMapRow> map_;
  int running_ = 0;  // calls not answered yet
};

void from_tools(const LaunchConfig& cfg, const EnvMap& env, TopologyPath& path) {
  const HealthToolPaths tools = locate_health_tools(
      lookup(env, "PATH").value_or("/usr/bin:/bin"),
      [](const std::string& file) { return ::access(file.c_str(), X_OK) == 0; });
  if (tools.npu_smi.empty() && tools.hccn_tool.empty()) return;
  asio::io_context io;
  ChildExits exits(io);
  ToolProbe probe(io, exits, cfg, tools, path);
  if (probe.start()) io.run();
  // SDIDs are all or nothing: a table with some devices' missing is no table.
  if (path.super_device_ids.size() != cfg.shape.devices.size()) path.super_device_ids.clear();
}

}  // namespace

TopologyPath find_topology(const LaunchConfig& cfg, const EnvMap& env, const std::string& host) {
  TopologyPath path;
  const std::vector<std::string> names = names_of(host);
  if (!cfg.placement.file.empty()) {
    if (const auto levels = topology_of(cfg.placement.file, names)) {
      path.switches = *levels;
      path.sources = {"--topology"};
      return path;
    }
    spdlog::warn(
        "{} does not list this node ({}); its place is read from the devices and the "
        "scheduler instead",
        cfg.placement.file_source, fmt::join(names, ", "));
  }
  if (const GivenRankTable* given = cfg.ascend.given_rank_table())
    from_rank_table(given->table, names, path);
  if (const auto block = lookup(env, "HCCL_LOGIC_SUPERPOD_ID"); block && !block->empty()) {
    path.block = *block;
    add_source(path, "HCCL_LOGIC_SUPERPOD_ID");
  }
  const auto addr = lookup(env, "SLURM_TOPOLOGY_ADDR");
  const auto pattern = lookup(env, "SLURM_TOPOLOGY_ADDR_PATTERN");
  if (addr && pattern) {
    path.switches = slurm_switches(*addr, *pattern);
    if (!path.switches.empty()) add_source(path, "slurm");
  }
  from_tools(cfg, env, path);
  return path;
}

}  // namespace npu_run
