// The rendezvous token of a Slurm step that was given none: derived from the user's own secret
// and the job id, so that every node of the job agrees without anyone typing it.
#pragma once

#include <string>

#include "config/launch_config.hpp"

namespace npu_run {

// HMAC-SHA256(secret, "slurm job <job_id>"), where the secret is read from `secret_path`; the
// secret (32 random bytes, mode 0600, directory 0700) is created first if missing, atomically, so
// nodes that share the home directory and start together all end up reading the same one.
std::string derive_job_token(const std::string& secret_path, const std::string& job_id);

// `cfg` with a Slurm step's DerivedToken derived: only when an agent really starts, so that
// reading the command line (and --dry-run) creates no files.
LaunchConfig with_derived_token(LaunchConfig cfg);

}  // namespace npu_run
