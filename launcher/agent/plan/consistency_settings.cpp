// The settings the health gate compares across nodes (agent/health/health_gate.hpp).
#include <filesystem>
#include <fstream>
#include <iterator>

#include "agent/health/health_gate.hpp"
#include "basics/text.hpp"
#include "rendezvous/protocol/auth.hpp"

namespace npu_run {

namespace {

// The HCCL settings that must be the same on every rank (a different HCCL_BUFFSIZE or timeout
// makes ranks disagree on a collective's shape or give up at different times).
const char* const kHcclSettings[] = {"HCCL_CONNECT_TIMEOUT",   "HCCL_EXEC_TIMEOUT",
                                     "HCCL_BUFFSIZE",          "HCCL_IF_BASE_PORT",
                                     "HCCL_WHITELIST_DISABLE", "HCCL_SOCKET_FAMILY"};

// A training script larger than this is hashed in its first bytes only.
constexpr std::streamsize kMaxHashed = std::streamsize{64} * 1024 * 1024;

// "Version=23.0.rc3" from a version.info file; "" when there is none.
std::string version_in(const std::string& path) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Version=", 0) == 0 || line.rfind("version=", 0) == 0)
      return printable(trim(line.substr(8)));
  }
  return "";
}

std::string file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string data(static_cast<size_t>(kMaxHashed), '\0');
  in.read(data.data(), kMaxHashed);
  data.resize(static_cast<size_t>(in.gcount()));
  return rdzv::sha256_hex(data);
}

}  // namespace

std::map<std::string, std::string> consistency_settings(const LaunchConfig& cfg,
                                                        const EnvMap& env) {
  std::map<std::string, std::string> settings;
  for (const char* name : kHcclSettings) settings[name] = lookup(env, name).value_or("");
  if (const auto visible = lookup(env, "ASCEND_RT_VISIBLE_DEVICES")) {
    settings["ASCEND_RT_VISIBLE_DEVICES (count)"] = std::to_string(split(*visible, ',').size());
  }
  const std::string ascend = "/usr/local/Ascend";
  settings["driver version"] = version_in(ascend + "/driver/version.info");
  const std::string toolkit =
      lookup(env, "ASCEND_TOOLKIT_HOME").value_or(ascend + "/ascend-toolkit/latest");
  settings["CANN version"] = version_in(toolkit + "/compiler/version.info");
  if (cfg.worker.mode != WorkerMode::kExecutable) {
    std::error_code ec;
    const auto python = std::filesystem::canonical(cfg.worker.program, ec);
    settings["python"] = ec ? cfg.worker.program : python.filename().string();
  }
  if (cfg.worker.mode == WorkerMode::kPythonScript) {
    settings["script sha256"] = file_sha256(cfg.worker.entrypoint);
  }
  // Keys with nothing on any node are dropped by nobody: "" compares equal everywhere.
  return settings;
}

}  // namespace npu_run
