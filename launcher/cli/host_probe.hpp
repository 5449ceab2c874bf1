// The one way the cli layer looks at the host: devices, files the flags name, programs on PATH.
// Parsing is otherwise a function of its arguments; tests inject a fake host. Each probe is made
// at most once per parse (device discovery is remembered).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "ascend/rank_table.hpp"
#include "basics/environment.hpp"
#include "devices/device_discovery.hpp"

namespace npu_run {

class HostProbe {
 public:
  virtual ~HostProbe() = default;
  // Ascend NPUs, else NVIDIA GPUs, as `npu_run --nproc-per-node auto` would use them.
  virtual const DiscoveredDevices& devices() = 0;
  // Device id -> address from an hccn.conf; throws UsageError naming the file and line.
  virtual std::map<int, std::string> hccn_conf(const std::string& path) = 0;
  // A rank table, read and checked; throws UsageError naming the file.
  virtual RankTable rank_table(const std::string& path) = 0;
  // The token of a private token file; throws UsageError naming `source` and the fix.
  virtual std::string token_file(const std::string& path, const std::string& source) = 0;
  // The absolute path execvp would run for `name` (in $PATH unless it has a '/'); "" if none.
  virtual std::string find_program(const std::string& name) = 0;
  // A small text file a flag names (a hostfile, an env file), whole; throws UsageError naming
  // `source` when it cannot be read or is larger than `max_bytes`.
  virtual std::string read_text(const std::string& path, const std::string& source,
                                size_t max_bytes) = 0;
  virtual bool is_regular_file(const std::string& path) = 0;
  virtual bool is_directory(const std::string& path) = 0;
  virtual std::string working_directory() = 0;
  virtual std::string absolute(const std::string& path) = 0;
  virtual int cpu_count() = 0;
};

// This host, as seen with `env` (PATH, NPU_RUN_DEV_ROOT, the visible-devices variables).
std::unique_ptr<HostProbe> real_host(const EnvMap& env);

}  // namespace npu_run
