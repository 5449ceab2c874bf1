// Rendezvous token files: the variable and size a token has, reading one from a file only its
// owner can read, and where the user's own secret (from which a Slurm step's token is derived,
// agent/link/job_token.hpp) lives.
#pragma once

#include <optional>
#include <string>

#include "basics/environment.hpp"

namespace npu_run {

// The variable agents read the token from; removed from the workers' environment.
inline constexpr const char* kTokenVariable = "NPU_RUN_RDZV_TOKEN";
inline constexpr size_t kMaxTokenBytes = 4096;

// The token in `path` (its first line, without surrounding blanks). Throws UsageError naming
// `source` when the file is missing, not a regular file, owned by someone else, readable or
// writable by group or others, empty or too long.
std::string read_token_file(const std::string& path, const std::string& source);

// $XDG_CONFIG_HOME/npu_run/rdzv_secret, else $HOME/.config/npu_run/rdzv_secret; none without
// either variable.
std::optional<std::string> user_secret_path(const EnvMap& env);

}  // namespace npu_run
