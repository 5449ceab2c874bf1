// `npu_run rank-table`: the HCCL rank table of this server, as hccl_tools.py writes it, or several
// servers' tables merged into one.
#include "ascend/rank_table.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <boost/asio/ip/address.hpp>
#include <fstream>
#include <iostream>

#include "ascend/hccn_conf.hpp"
#include "basics/text.hpp"
#include "cli/host_probe.hpp"
#include "commands/commands.hpp"
#include "devices/device_list.hpp"
#include "net/host_address.hpp"

namespace npu_run {

namespace {

constexpr const char* kRankTableCommand = "npu_run rank-table";

class RankTableOptions : public OptionTable {
 public:
  RankTableOptions()
      : app_(
            "npu_run rank-table [--devices IDS] [OPTIONS]\n       npu_run rank-table --merge "
            "A.json B.json ... [-o FILE]\n\nWrite the HCCL rank table (RANK_TABLE_FILE) of this "
            "server, as hccl_tools.py does, or merge the tables of several servers into one, "
            "renumbering rank ids in the order given.",
            kRankTableCommand) {
    app_.add_option("--devices,--device_num", devices,
                    "Physical device ids in rank order: 0-7, 0,2,4,6 or the classic [0,8) "
                    "(default: the NPUs found)");
    app_.add_option(
            "--hccn-conf,--hccn_conf", hccn_conf,
            "File with the devices' addresses (default $NPU_RUN_HCCN_CONF, else /etc/hccn.conf)")
        ->type_name("FILE");
    app_.add_option("--device-ips,--device_ips", device_ips,
                    "Device addresses in device order, instead of hccn.conf");
    app_.add_option("--server-id,--server_id,--server-ip,--server_ip", cmd.server_id,
                    "server_id of this server (default: this host's primary address)");
    app_.add_option("-o,--output", cmd.output,
                    "Output file (default: hccl_<n>p_<ids>_<server>.json; - for stdout)")
        ->type_name("FILE");
    app_.add_option("--version", cmd.version,
                    "Rank table version: 1.0, or 1.2 for Atlas A3 SuperPoDs")
        ->type_name("{1.0,1.2}");
    app_.add_option("--super-pod-id,--super_pod_id", cmd.super_pod_id,
                    "1.2: the SuperPoD of this server (default 0)");
    app_.add_option("--super-device-ids,--super_device_ids", super_device_ids,
                    "1.2: each device's super device id (SDID), in device order");
    app_.add_option("--merge", cmd.merge_inputs, "Merge these rank tables, in this order")
        ->expected(1, -1)
        ->type_name("FILE");
  }
  CLI::App& app() override { return app_; }

  CLI::App app_;
  RankTableCommand cmd;
  std::string devices;
  std::string hccn_conf;
  std::string device_ips;
  std::string super_device_ids;
};

std::vector<std::string> given_addresses(const RankTableOptions& o, size_t devices) {
  std::vector<std::string> ips;
  for (std::string_view ip : split(o.device_ips, ',')) ips.emplace_back(ip);
  if (ips.size() != devices) {
    throw UsageError(fmt::format(
        "--device-ips lists {} addresses for {} devices; give one per device, in the order of "
        "--devices",
        ips.size(), devices));
  }
  for (const std::string& ip : ips) {
    boost::system::error_code ec;
    boost::asio::ip::make_address(ip, ec);
    if (ec) throw UsageError(fmt::format("--device-ips: '{}' is not an IP address", ip));
  }
  return ips;
}

std::vector<int> super_device_ids(const RankTableOptions& o, size_t devices) {
  if (o.cmd.version != "1.2") {
    if (!o.super_device_ids.empty())
      throw UsageError("--super-device-ids belongs to --version 1.2");
    return {};
  }
  if (o.super_device_ids.empty()) {
    throw UsageError(
        "--version 1.2 needs --super-device-ids: each device's SDID, from `npu-smi info -t "
        "spod-info -i <id> -c <chip>`");
  }
  std::vector<int> ids;
  for (std::string_view id : split(o.super_device_ids, ',')) {
    const auto value = parse_integer(id, 0, 1'000'000'000);
    if (!value) throw UsageError(fmt::format("--super-device-ids: '{}' is not a number", id));
    ids.push_back(static_cast<int>(*value));
  }
  if (ids.size() != devices) {
    throw UsageError(
        fmt::format("--super-device-ids lists {} ids for {} devices; give one per device",
                    ids.size(), devices));
  }
  return ids;
}

RankTableCommand resolve(const RankTableOptions& o, const EnvMap& env) {
  RankTableCommand cmd = o.cmd;
  if (cmd.version != "1.0" && cmd.version != "1.2") {
    throw UsageError(fmt::format(
        "--version '{}': rank tables are 1.0, or 1.2 for Atlas A3 SuperPoDs", cmd.version));
  }
  if (!cmd.merge_inputs.empty()) {
    if (!o.devices.empty() || !o.device_ips.empty() || !cmd.server_id.empty()) {
      throw UsageError(
          "--merge combines existing tables; --devices, --device-ips and --server-id do not "
          "apply");
    }
    return cmd;
  }
  const auto host = real_host(env);
  if (o.devices.empty()) {
    const DiscoveredDevices& found = host->devices();
    if (found.kind != DeviceKind::kAscend || found.physical_ids.empty()) {
      throw UsageError(fmt::format("{}; give the devices with --devices, e.g. --devices 0-7",
                                   found.description));
    }
    cmd.devices = found.physical_ids;
  } else if (auto classic = parse_half_open_range(o.devices, "--devices")) {
    cmd.devices = *classic;
  } else {
    cmd.devices = parse_device_list(o.devices, "--devices");
  }
  if (!o.device_ips.empty()) {
    cmd.device_ips = given_addresses(o, cmd.devices.size());
  } else {
    const std::string conf = !o.hccn_conf.empty()
                                 ? o.hccn_conf
                                 : lookup(env, "NPU_RUN_HCCN_CONF").value_or(kDefaultHccnConf);
    cmd.device_ips =
        device_addresses(host->hccn_conf(conf), cmd.devices, conf, "", "the devices asked for",
                         "add the line(s), or give the addresses with --device-ips");
  }
  cmd.super_device_ids = super_device_ids(o, cmd.devices.size());
  return cmd;
}

void write_table(const RankTable& table, const std::string& output,
                 const std::string& default_name) {
  const std::string text = rank_table_json(table);
  if (output == "-") {
    std::cout << text << "\n";
    return;
  }
  const std::string path = output.empty() ? default_name : output;
  std::ofstream out(path, std::ios::trunc);
  if (!(out << text) || !out.flush()) {
    throw UsageError(
        fmt::format("cannot write the rank table to {}; choose another file with -o", path));
  }
  std::cout << fmt::format("wrote {} ({} server{}, {} device{})\n", path, table.servers.size(),
                           table.servers.size() == 1 ? "" : "s", table.device_count(),
                           table.device_count() == 1 ? "" : "s");
}

}  // namespace

std::variant<RankTableCommand, EarlyExit> parse_rank_table_command(
    const std::vector<std::string>& args, const EnvMap& env) {
  return parse_subcommand<RankTableOptions>(
      args, kRankTableCommand,
      [&](const RankTableOptions& options) { return resolve(options, env); });
}

int make_rank_table(const RankTableCommand& command) {
  if (!command.merge_inputs.empty()) {
    std::vector<RankTable> tables;
    for (const std::string& path : command.merge_inputs) tables.push_back(read_rank_table(path));
    const RankTable merged = merge_rank_tables(tables);
    write_table(merged, command.output, merged_file_name(merged));
    return 0;
  }
  ServerDevices server;
  server.server_id = command.server_id.empty() ? net::primary_address() : command.server_id;
  server.devices = command.devices;
  for (size_t i = 0; i < command.devices.size(); ++i) {
    server.device_ips[command.devices[i]] = command.device_ips[i];
    if (!command.super_device_ids.empty())
      server.super_device_ids[command.devices[i]] = command.super_device_ids[i];
  }
  const RankTable table = build_rank_table({server}, command.version, command.super_pod_id);
  write_table(table, command.output, classic_file_name(table));
  return 0;
}

std::unique_ptr<OptionTable> rank_table_options() {
  return std::make_unique<RankTableOptions>();
}

}  // namespace npu_run
