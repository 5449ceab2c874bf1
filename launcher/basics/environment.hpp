// An environment as data: a snapshot of the agent's variables that pure code reads and workers
// inherit. Passing it explicitly keeps planning code testable without touching the real environ.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace npu_run {

using EnvMap = std::map<std::string, std::string>;

// Copies the calling process's environment.
EnvMap current_environment();

std::optional<std::string> lookup(const EnvMap& env, const std::string& name);

// "NAME=value" strings in the order execve() wants them.
std::vector<std::string> to_envp(const EnvMap& env);

}  // namespace npu_run
