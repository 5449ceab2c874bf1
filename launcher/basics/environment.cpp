#include "basics/environment.hpp"

#include <unistd.h>

namespace npu_run {

EnvMap current_environment() {
  EnvMap env;
  for (char** entry = ::environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string kv(*entry);
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;  // not a variable; execve would pass it on as junk
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

std::optional<std::string> lookup(const EnvMap& env, const std::string& name) {
  const auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> to_envp(const EnvMap& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

}  // namespace npu_run
