#include "ascend/rank_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "basics/text.hpp"
#include "basics/usage_error.hpp"

namespace npu_run {

using ordered_json = nlohmann::ordered_json;

size_t RankTable::device_count() const {
  size_t n = 0;
  for (const auto& s : servers) n += s.devices.size();
  return n;
}

RankTable build_rank_table(const std::vector<ServerDevices>& servers, const std::string& version,
                           const std::string& super_pod_id) {
  RankTable table;
  table.version = version;
  int rank = 0;
  for (const ServerDevices& s : servers) {
    RankTableServer server{s.server_id, {}};
    std::set<int> seen;
    for (int device : s.devices) {
      if (!seen.insert(device).second) {
        throw UsageError(fmt::format("server {}: device {} is listed twice", s.server_id, device));
      }
      const auto ip = s.device_ips.find(device);
      if (ip == s.device_ips.end()) {
        throw UsageError(fmt::format("server {}: no address for device {}", s.server_id, device));
      }
      RankTableDevice d{device, ip->second, rank++, std::nullopt};
      if (version == "1.2") {
        const auto sdid = s.super_device_ids.find(device);
        if (sdid == s.super_device_ids.end()) {
          throw UsageError(
              fmt::format("server {}: no super device id for device {} (version 1.2 needs one per "
                          "device: the SDID of `npu-smi info -t spod-info -i <id> -c <chip>`)",
                          s.server_id, device));
        }
        d.super_device_id = sdid->second;
      }
      server.devices.push_back(std::move(d));
    }
    table.servers.push_back(std::move(server));
  }
  if (version != "1.2") return table;
  for (const ServerDevices& s : servers) {
    const std::string& id = s.super_pod_id.empty() ? super_pod_id : s.super_pod_id;
    auto pod = std::find_if(table.super_pods.begin(), table.super_pods.end(),
                            [&](const SuperPod& p) { return p.super_pod_id == id; });
    if (pod == table.super_pods.end()) pod = table.super_pods.insert(pod, SuperPod{id, {}});
    pod->server_ids.push_back(s.server_id);
  }
  return table;
}

std::string rank_table_json(const RankTable& table) {
  ordered_json servers = ordered_json::array();
  for (const RankTableServer& s : table.servers) {
    ordered_json devices = ordered_json::array();
    for (const RankTableDevice& d : s.devices) {
      ordered_json device;
      device["device_id"] = std::to_string(d.device_id);
      device["device_ip"] = d.device_ip;
      if (d.super_device_id) device["super_device_id"] = std::to_string(*d.super_device_id);
      device["rank_id"] = std::to_string(d.rank_id);
      devices.push_back(std::move(device));
    }
    ordered_json server;
    server["server_id"] = s.server_id;
    server["device"] = std::move(devices);
    server["host_nic_ip"] = "reserve";
    servers.push_back(std::move(server));
  }
  ordered_json root;
  root["version"] = table.version;
  root["server_count"] = std::to_string(table.servers.size());
  root["server_list"] = std::move(servers);
  if (!table.super_pods.empty()) {
    ordered_json pods = ordered_json::array();
    for (const SuperPod& pod : table.super_pods) {
      ordered_json list = ordered_json::array();
      for (const auto& id : pod.server_ids) list.push_back(ordered_json{{"server_id", id}});
      ordered_json entry;
      entry["super_pod_id"] = pod.super_pod_id;
      entry["server_list"] = std::move(list);
      pods.push_back(std::move(entry));
    }
    root["super_pod_list"] = std::move(pods);
  }
  root["status"] = "completed";
  // Python's json.dump(indent=4) with ensure_ascii: the same bytes, and no final newline.
  return root.dump(4, ' ', true);
}

namespace {

// A number the format writes as a string; merge_hccl.py writes rank ids as numbers.
int number_field(const ordered_json& object, const char* key, const std::string& where,
                 bool accept_number) {
  const auto it = object.find(key);
  if (it == object.end()) throw UsageError(fmt::format("{}: '{}' is missing", where, key));
  if (it->is_number_integer() && accept_number) {
    const auto v = it->get<long long>();
    if (v >= 0 && v <= 1'000'000'000) return static_cast<int>(v);
  }
  if (it->is_string()) {
    if (const auto v = parse_integer(it->get<std::string>(), 0, 1'000'000'000))
      return static_cast<int>(*v);
  }
  throw UsageError(
      fmt::format("{}: '{}' = {} is not a number in a string, like \"3\"", where, key, it->dump()));
}

std::string string_field(const ordered_json& object, const char* key, const std::string& where,
                         bool required = true) {
  const auto it = object.find(key);
  if (it == object.end()) {
    if (!required) return "";
    throw UsageError(fmt::format("{}: '{}' is missing", where, key));
  }
  if (!it->is_string()) throw UsageError(fmt::format("{}: '{}' is not a string", where, key));
  return it->get<std::string>();
}

const ordered_json& array_field(const ordered_json& object, const char* key,
                                const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_array())
    throw UsageError(fmt::format("{}: '{}' is missing or not a list", where, key));
  return *it;
}

// The text as a JSON object, or a message for someone who gave the wrong file.
ordered_json parse_json_object(const std::string& text, const std::string& path) {
  ordered_json root;
  try {
    root = ordered_json::parse(text);
  } catch (const ordered_json::parse_error& e) {
    throw UsageError(fmt::format(
        "{}: not valid JSON (the text stops making sense at byte {}); is this an HCCL rank table?",
        path, e.byte));
  } catch (const ordered_json::exception&) {
    // A number too large for any JSON number type (found by fuzz_rank_table).
    throw UsageError(
        fmt::format("{}: holds a number out of any range; is this an HCCL rank table?", path));
  }
  if (!root.is_object()) {
    throw UsageError(fmt::format("{}: not a JSON object; is this an HCCL rank table?", path));
  }
  return root;
}

// The version, a finished status, and a server count that matches the list.
std::string checked_version(const ordered_json& root, const std::string& path) {
  std::string version = string_field(root, "version", path);
  if (version != "1.0" && version != "1.2") {
    throw UsageError(fmt::format(
        "{}: version '{}' is not supported; npu_run reads rank tables 1.0 and 1.2", path, version));
  }
  const std::string status = string_field(root, "status", path);
  if (status != "completed") {
    throw UsageError(fmt::format("{}: status is '{}', not 'completed': the table is not finished",
                                 path, status));
  }
  const ordered_json& servers = array_field(root, "server_list", path);
  if (const int count = number_field(root, "server_count", path, true);
      static_cast<size_t>(count) != servers.size()) {
    throw UsageError(fmt::format("{}: server_count is {} but server_list has {} servers", path,
                                 count, servers.size()));
  }
  return version;
}

// Who holds each rank id so far, to name both holders of a rank given twice.
using RankOwners = std::map<int, std::string>;

RankTableDevice parse_device(const ordered_json& json, const std::string& where) {
  if (!json.is_object()) throw UsageError(fmt::format("{} is not an object", where));
  RankTableDevice d;
  d.device_id = number_field(json, "device_id", where, true);
  d.device_ip = string_field(json, "device_ip", where, false);
  d.rank_id = number_field(json, "rank_id", where, true);
  if (json.contains("super_device_id"))
    d.super_device_id = number_field(json, "super_device_id", where, true);
  return d;
}

RankTableServer parse_server(const ordered_json& json, const std::string& where,
                             RankOwners& rank_owners) {
  if (!json.is_object()) throw UsageError(fmt::format("{} is not an object", where));
  RankTableServer server{string_field(json, "server_id", where), {}};
  const ordered_json& devices = array_field(json, "device", where);
  std::set<int> device_ids;
  for (size_t j = 0; j < devices.size(); ++j) {
    const std::string dwhere = fmt::format("{}.device[{}]", where, j);
    RankTableDevice d = parse_device(devices[j], dwhere);
    if (!device_ids.insert(d.device_id).second) {
      throw UsageError(fmt::format("{}: device {} appears twice on server {}", dwhere, d.device_id,
                                   server.server_id));
    }
    const std::string owner = fmt::format("device {} of server {}", d.device_id, server.server_id);
    if (const auto [it, fresh] = rank_owners.emplace(d.rank_id, owner); !fresh) {
      throw UsageError(fmt::format("{}: rank_id {} is given to both {} and {}", dwhere, d.rank_id,
                                   it->second, owner));
    }
    server.devices.push_back(std::move(d));
  }
  return server;
}

std::vector<SuperPod> parse_super_pods(const ordered_json& root, const std::string& path) {
  std::vector<SuperPod> result;
  const auto pods = root.find("super_pod_list");
  if (pods == root.end()) return result;
  const std::string where = fmt::format("{}: super_pod_list", path);
  if (!pods->is_array()) throw UsageError(fmt::format("{} is not a list", where));
  for (const ordered_json& pod : *pods) {
    SuperPod p{string_field(pod, "super_pod_id", where), {}};
    for (const ordered_json& s : array_field(pod, "server_list", where))
      p.server_ids.push_back(string_field(s, "server_id", where));
    result.push_back(std::move(p));
  }
  return result;
}

}  // namespace

RankTable parse_rank_table(const std::string& text, const std::string& path) {
  const ordered_json root = parse_json_object(text, path);
  RankTable table;
  table.version = checked_version(root, path);
  const ordered_json& servers = array_field(root, "server_list", path);
  RankOwners rank_owners;
  for (size_t i = 0; i < servers.size(); ++i) {
    table.servers.push_back(
        parse_server(servers[i], fmt::format("{}: server_list[{}]", path, i), rank_owners));
  }
  const int total = static_cast<int>(rank_owners.size());
  if (total > 0 && rank_owners.rbegin()->first != total - 1) {
    throw UsageError(
        fmt::format("{}: rank ids must run from 0 to {} without gaps, but the largest is {}", path,
                    total - 1, rank_owners.rbegin()->first));
  }
  table.super_pods = parse_super_pods(root, path);
  return table;
}

RankTable read_rank_table(const std::string& path) {
  // An ifstream opens a directory and then reads nothing, which would read as broken JSON.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UsageError(fmt::format(
        "cannot read the rank table {}: it is a directory; give the JSON file in it, or "
        "--rank-table auto",
        path));
  }
  std::ifstream in(path);
  if (!in)
    throw UsageError(fmt::format("cannot read the rank table {}: {}", path, std::strerror(errno)));
  std::stringstream content;
  content << in.rdbuf();
  return parse_rank_table(content.str(), path);
}

RankTable merge_rank_tables(const std::vector<RankTable>& tables) {
  RankTable merged;
  merged.version = "1.0";
  int rank = 0;
  for (const RankTable& t : tables) {
    if (t.version == "1.2") merged.version = "1.2";
    for (RankTableServer server : t.servers) {
      for (RankTableDevice& d : server.devices) d.rank_id = rank++;
      merged.servers.push_back(std::move(server));
    }
    for (const SuperPod& pod : t.super_pods) {
      auto same =
          std::find_if(merged.super_pods.begin(), merged.super_pods.end(),
                       [&](const SuperPod& p) { return p.super_pod_id == pod.super_pod_id; });
      if (same == merged.super_pods.end()) {
        merged.super_pods.push_back(pod);
      } else {
        same->server_ids.insert(same->server_ids.end(), pod.server_ids.begin(),
                                pod.server_ids.end());
      }
    }
  }
  return merged;
}

std::string classic_file_name(const RankTable& table) {
  std::string ids;
  for (const auto& d : table.servers.at(0).devices) ids += std::to_string(d.device_id);
  return fmt::format("hccl_{}p_{}_{}.json", table.device_count(), ids,
                     table.servers.at(0).server_id);
}

std::string merged_file_name(const RankTable& merged) {
  return fmt::format("hccl_{}s_{}p.json", merged.servers.size(), merged.device_count());
}

std::optional<std::vector<int>> parse_half_open_range(const std::string& text,
                                                      const std::string& what) {
  if (text.size() < 5 || text.front() != '[' || text.back() != ')') return std::nullopt;
  const auto parts = split(std::string_view(text).substr(1, text.size() - 2), ',');
  if (parts.size() != 2) return std::nullopt;
  const auto first = parse_integer(parts[0], 0, 4095);
  const auto last = parse_integer(parts[1], 0, 4096);
  if (!first || !last || *last <= *first) {
    throw UsageError(fmt::format(
        "{} '{}': expected [first,last) with first < last, e.g. [0,8) or [4,8)", what, text));
  }
  std::vector<int> ids;
  for (auto id = *first; id < *last; ++id) ids.push_back(static_cast<int>(id));
  return ids;
}

}  // namespace npu_run
