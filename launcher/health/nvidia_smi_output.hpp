// What `nvidia-smi --query-*=... --format=csv,noheader` prints, read into rows. Cells such as
// "[N/A]" and "[Not Supported]" mean the GPU cannot say: never a failure.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace npu_run {

// One CSV row per line, each cell trimmed; blank lines are skipped.
std::vector<std::vector<std::string>> parse_nvidia_csv(const std::string& text);

// A count cell: the number, or nullopt for "[N/A]", "[Not Supported]" and the like.
std::optional<long long> nvidia_count(const std::string& cell);

// A yes/no cell of --query-remapped-rows ("Yes", "No", "1", "0"); nullopt when unknown.
std::optional<bool> nvidia_flag(const std::string& cell);

}  // namespace npu_run
