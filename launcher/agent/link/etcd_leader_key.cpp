#include "agent/link/etcd_leader_key.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

namespace npu_run {

std::string leader_value(const LeaderAddress& at, const std::string& host) {
  return nlohmann::json{{"addr", at.addr}, {"port", at.port}, {"host", host}, {"pid", ::getpid()}}
      .dump();
}

std::optional<LeaderAddress> leader_address(const std::string& value) {
  const nlohmann::json leader = nlohmann::json::parse(value, nullptr, false);
  if (!leader.is_object() || !leader.value("addr", nlohmann::json()).is_string() ||
      !leader.value("port", nlohmann::json()).is_number_integer())
    return std::nullopt;
  return LeaderAddress{leader["addr"].get<std::string>(), leader["port"].get<int>()};
}

}  // namespace npu_run
