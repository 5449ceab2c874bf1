#include "ascend/rank_table.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "ascend/hccn_conf.hpp"
#include "basics/usage_error.hpp"
#include "commands/commands.hpp"
#include "net/host_address.hpp"

namespace npu_run {

namespace {

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

int make_rank_table(const RankTableCommand& command) {
  if (!command.merge_inputs.empty()) {
    std::vector<RankTable> tables;
    for (const std::string& path : command.merge_inputs) tables.push_back(read_rank_table(path));
    const RankTable merged = merge_rank_tables(tables);
    write_table(merged, command.output, merged_file_name(merged));
    return 0;
  }
  ServerDevices server;
  server.server_id = command.server_id.empty() ? primary_address() : command.server_id;
  server.devices = command.devices;
  if (!command.device_ips.empty()) {
    for (size_t i = 0; i < command.devices.size(); ++i)
      server.device_ips[command.devices[i]] = command.device_ips[i];
  } else {
    server.device_ips = read_hccn_conf(command.hccn_conf);
    std::vector<std::string> missing;
    for (int device : command.devices) {
      if (!server.device_ips.count(device)) missing.push_back(fmt::format("address_{}", device));
    }
    if (!missing.empty()) {
      throw UsageError(fmt::format(
          "{} has no {} for the devices asked for; add the line(s), or give the addresses "
          "with --device-ips",
          command.hccn_conf, fmt::join(missing, ", ")));
    }
  }
  for (size_t i = 0; i < command.super_device_ids.size(); ++i) {
    server.super_device_ids[command.devices[i]] = command.super_device_ids[i];
  }
  const RankTable table = build_rank_table({server}, command.version, command.super_pod_id);
  write_table(table, command.output, classic_file_name(table));
  return 0;
}

}  // namespace npu_run
