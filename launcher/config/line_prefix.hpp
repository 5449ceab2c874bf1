// The prefix put in front of worker lines that the agent relays to the console, from a template
// like torchrun's --log-line-prefix-template: "[${rank}]: " -> "[12]: ".
#pragma once

#include <string>

namespace npu_run {

struct PrefixValues {
  int rank = 0;
  int local_rank = 0;
  int node_rank = 0;
  std::string role_name;
  std::string host;
};

// torchrun's own: "[default0]:hello" (role and local rank, no space).
inline constexpr const char* kDefaultPrefixTemplate = "[${role_name}${local_rank}]:";
// torchrun 2.x reads the template from here too; the flag wins.
inline constexpr const char* kPrefixTemplateVariable = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE";

// Throws UsageError naming `source` when the template uses an unknown ${name} or leaves one open.
void validate_prefix_template(const std::string& text, const std::string& source);

std::string expand_prefix_template(const std::string& text, const PrefixValues& values);

}  // namespace npu_run
