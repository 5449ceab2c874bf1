// Files of NAME=VALUE lines (DeepSpeed's .deepspeed_env, npu_run's .npu_run_env): the variables
// a launch over ssh passes to every host.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace npu_run {

// A shell variable name: a letter or '_', then letters, digits and '_'.
bool is_variable_name(std::string_view name);

// One NAME=VALUE per line; blank lines and lines starting with '#' are skipped; the value is
// everything after the first '=' (kept as written, '=' and spaces included; one trailing '\r'
// dropped). Throws UsageError naming `path`, the line and the fix for any other line.
std::vector<std::pair<std::string, std::string>> parse_env_file(std::string_view content,
                                                                const std::string& path);

}  // namespace npu_run
