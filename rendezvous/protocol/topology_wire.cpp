#include "rendezvous/protocol/topology_wire.hpp"

#include <cstdint>

#include "rendezvous/protocol/json_fields.hpp"

namespace npu_run::rdzv {

json to_json(const TopologyPath& t) {
  json j = json::object();
  for (const auto& [key, text] : {std::pair{"superpod", &t.superpod}, std::pair{"block", &t.block},
                                  std::pair{"server", &t.server}}) {
    if (!text->empty()) j[key] = *text;
  }
  if (!t.switches.empty()) j["switches"] = t.switches;
  if (!t.sources.empty()) j["sources"] = t.sources;
  if (!t.super_device_ids.empty()) j["sdids"] = t.super_device_ids;
  return j;
}

namespace {

std::vector<std::string> topology_names(const Fields& f, const char* key) {
  std::vector<std::string> names;
  for (const json& name : f.array(key, Limits::kMaxTopologyLevels, false)) {
    if (!name.is_string() || name.get_ref<const std::string&>().size() > Limits::kMaxName)
      f.fail(fmt::format("'{}' holds a bad name", key));
    names.push_back(name.get<std::string>());
  }
  return names;
}

}  // namespace

TopologyPath topology_from(const json& j) {
  const Fields f(j, "topology");
  TopologyPath t;
  t.superpod = f.text("superpod", Limits::kMaxName, false);
  t.block = f.text("block", Limits::kMaxName, false);
  t.server = f.text("server", Limits::kMaxName, false);
  t.switches = topology_names(f, "switches");
  t.sources = topology_names(f, "sources");
  for (const json& id : f.array("sdids", Limits::kMaxDevices, false)) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      f.fail("'sdids' holds a bad id");
    t.super_device_ids.push_back(id.get<int>());
  }
  return t;
}

}  // namespace npu_run::rdzv
