// HCCL rank tables (the file RANK_TABLE_FILE points to): the model, the JSON exactly as the
// classic hccl_tools.py writes it, a validating reader, and merging servers' tables into one.
//
// Version 1.0: {"version", "server_count", "server_list": [{"server_id", "device": [{"device_id",
// "device_ip", "rank_id"}], "host_nic_ip": "reserve"}], "status": "completed"}, every number a
// JSON string. Version 1.2 (Atlas A3 SuperPoD) adds each device's "super_device_id" and a
// "super_pod_list" naming the servers of each SuperPoD.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace npu_run {

struct RankTableDevice {
  int device_id = 0;  // physical id: the N of /dev/davinciN
  std::string device_ip;
  int rank_id = 0;
  std::optional<int> super_device_id;  // version 1.2
};

struct RankTableServer {
  std::string server_id;
  std::vector<RankTableDevice> devices;
};

struct SuperPod {
  std::string super_pod_id;
  std::vector<std::string> server_ids;
};

struct RankTable {
  std::string version = "1.0";  // "1.0" or "1.2"
  std::vector<RankTableServer> servers;
  std::vector<SuperPod> super_pods;  // version 1.2

  size_t device_count() const;
};

// One server of a table being built: its devices in local-rank order, with their addresses.
struct ServerDevices {
  std::string server_id;
  std::vector<int> devices;
  std::map<int, std::string> device_ips;  // by device id
  std::map<int, int> super_device_ids;    // by device id; version 1.2 only
  std::string super_pod_id{};             // version 1.2: its SuperPoD (empty: the table's one)
};

// Numbers rank ids 0..N-1 through the servers in order. Throws UsageError naming the device
// whose address (or, for 1.2, super device id) is missing, and duplicate devices. A 1.2 table's
// super_pod_list names each server under its own SuperPoD, else under `super_pod_id`.
RankTable build_rank_table(const std::vector<ServerDevices>& servers,
                           const std::string& version = "1.0",
                           const std::string& super_pod_id = "0");

// The JSON text, byte for byte what hccl_tools.py writes (json.dump with indent=4, no final
// newline).
std::string rank_table_json(const RankTable& table);

// Reads and checks a table: known version, "completed", server_count, rank ids unique and
// 0..N-1, devices unique per server. Rank ids may be strings or numbers (merge_hccl.py writes
// numbers). Throws UsageError naming `path` and the place in the file.
RankTable parse_rank_table(const std::string& text, const std::string& path);
RankTable read_rank_table(const std::string& path);

// Concatenates the servers in order and renumbers rank ids 0..N-1, as merge_hccl.py does (but
// keeps rank ids strings, as the format says).
RankTable merge_rank_tables(const std::vector<RankTable>& tables);

// hccl_<n>p_<device ids joined>_<server id>.json, the classic generator's name.
std::string classic_file_name(const RankTable& table);  // a table of one server
// hccl_<servers>s_<devices>p.json, the classic merge script's name.
std::string merged_file_name(const RankTable& merged);

// Ids in the classic "[first,last)" form, e.g. "[4,8)" -> 4,5,6,7; nullopt for other text.
std::optional<std::vector<int>> parse_half_open_range(const std::string& text,
                                                      const std::string& what);

}  // namespace npu_run
