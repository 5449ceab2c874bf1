#include "cli/host_probe.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "ascend/hccn_conf.hpp"
#include "basics/token_file.hpp"
#include "basics/usage_error.hpp"

namespace npu_run {

namespace fs = std::filesystem;

namespace {

class RealHost : public HostProbe {
 public:
  explicit RealHost(EnvMap env) : env_(std::move(env)) {}

  const DiscoveredDevices& devices() override {
    if (!devices_) devices_ = discover_devices(env_);
    return *devices_;
  }
  std::map<int, std::string> hccn_conf(const std::string& path) override {
    return read_hccn_conf(path);
  }
  RankTable rank_table(const std::string& path) override { return read_rank_table(path); }
  std::string token_file(const std::string& path, const std::string& source) override {
    return read_token_file(path, source);
  }
  std::string find_program(const std::string& name) override {
    if (name.find('/') != std::string::npos)
      return ::access(name.c_str(), X_OK) == 0 ? absolute(name) : "";
    const std::string path = lookup(env_, "PATH").value_or("/usr/local/bin:/usr/bin:/bin");
    size_t pos = 0;
    while (pos <= path.size()) {
      const auto colon = std::min(path.find(':', pos), path.size());
      const std::string dir = colon == pos ? "." : path.substr(pos, colon - pos);
      pos = colon + 1;
      const fs::path candidate = fs::path(dir) / name;
      std::error_code ec;
      if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0)
        return absolute(candidate.string());
    }
    return "";
  }
  std::string read_text(const std::string& path, const std::string& source,
                        size_t max_bytes) override {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      throw UsageError(
          fmt::format("{} {}: cannot read it: {}", source, path, std::strerror(errno)));
    }
    std::string text(max_bytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      throw UsageError(fmt::format("{} {}: larger than {} bytes; is it the right file?", source,
                                   path, max_bytes));
    }
    return text;
  }
  bool is_directory(const std::string& path) override {
    std::error_code ec;
    return fs::is_directory(path, ec);
  }
  bool is_regular_file(const std::string& path) override {
    std::error_code ec;
    return fs::is_regular_file(path, ec);
  }
  std::string working_directory() override {
    std::error_code ec;
    return fs::current_path(ec).string();
  }
  std::string absolute(const std::string& path) override {
    std::error_code ec;
    return fs::absolute(path, ec).lexically_normal().string();
  }
  int cpu_count() override {
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }

 private:
  EnvMap env_;
  std::optional<DiscoveredDevices> devices_;
};

}  // namespace

std::unique_ptr<HostProbe> real_host(const EnvMap& env) {
  return std::make_unique<RealHost>(env);
}

}  // namespace npu_run
