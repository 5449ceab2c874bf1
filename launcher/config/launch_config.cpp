#include "config/launch_config.hpp"

namespace npu_run {

std::string token_source(const RendezvousToken& token) {
  if (const auto* given = std::get_if<GivenToken>(&token)) return given->source;
  if (const auto* derived = std::get_if<DerivedToken>(&token)) return derived->source;
  return "";
}

std::vector<std::string> AscendConfig::device_ips() const {
  const auto* automatic = std::get_if<AutoRankTable>(&rank_table);
  return automatic != nullptr ? automatic->device_ips : std::vector<std::string>{};
}

}  // namespace npu_run
