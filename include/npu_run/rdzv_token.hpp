// Where a job's rendezvous token comes from: a file only its owner can read, the
// NPU_RUN_RDZV_TOKEN variable or --rdzv-token, or, inside a Slurm step, a token derived from the
// user's own secret and the job id so that every node of the job agrees without anyone typing it.
#pragma once

#include <optional>
#include <string>

#include "npu_run/environment.hpp"

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

// HMAC-SHA256(secret, "slurm job <job_id>"), where the secret is read from `secret_path`; the
// secret (32 random bytes, mode 0600, directory 0700) is created first if missing, atomically, so
// nodes that share the home directory and start together all end up reading the same one.
std::string derive_job_token(const std::string& secret_path, const std::string& job_id);

}  // namespace npu_run
