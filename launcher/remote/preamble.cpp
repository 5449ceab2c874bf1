#include "remote/preamble.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace npu_run {

namespace {

using nlohmann::json;

json child_json(const ChildHost& child) {
  json children = json::array();
  for (const ChildHost& c : child.children) children.push_back(child_json(c));
  return {{"name", child.name},
          {"argv", child.argv},
          {"ship_binary", child.ship_binary},
          {"children", children}};
}

ChildHost child_from(const json& j, int depth) {
  // A tree of 10,000 hosts with a fan-out of 2 is 14 levels deep.
  if (depth > 64) throw std::runtime_error("the tree of hosts is more than 64 levels deep");
  ChildHost child;
  child.name = j.at("name").get<std::string>();
  child.argv = j.at("argv").get<std::vector<std::string>>();
  child.ship_binary = j.at("ship_binary").get<bool>();
  for (const json& c : j.at("children")) child.children.push_back(child_from(c, depth + 1));
  if (child.name.empty() || child.argv.empty())
    throw std::runtime_error("a host without a name or ssh command");
  return child;
}

}  // namespace

std::string format_preamble(const Preamble& preamble) {
  json children = json::array();
  for (const ChildHost& c : preamble.children) children.push_back(child_json(c));
  const json j = {{"npu_run_preamble", 1},
                  {"token", preamble.token},
                  {"env", preamble.env},
                  {"fanout", preamble.fanout},
                  {"children", children}};
  return j.dump() + "\n";
}

Preamble parse_preamble(std::string_view line) {
  if (line.size() > kMaxPreambleBytes)
    throw std::runtime_error("the preamble is larger than 16 MiB");
  try {
    const json j = json::parse(line);
    if (j.at("npu_run_preamble").get<int>() != 1)
      throw std::runtime_error("a preamble of another version of npu_run");
    Preamble preamble;
    preamble.token = j.at("token").get<std::string>();
    preamble.env = j.at("env").get<std::vector<std::pair<std::string, std::string>>>();
    preamble.fanout = j.at("fanout").get<int>();
    if (preamble.fanout < 1 || preamble.fanout > 1024)
      throw std::runtime_error("fanout out of range");
    for (const json& c : j.at("children")) preamble.children.push_back(child_from(c, 1));
    return preamble;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("not a preamble of npu_run: ") + e.what());
  }
}

}  // namespace npu_run
