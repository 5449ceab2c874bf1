#include "agent/records/run_directory.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "basics/usage_error.hpp"

namespace npu_run {

namespace fs = std::filesystem;

namespace {

std::string temp_base(const EnvMap& env) {
  const auto tmp = lookup(env, "TMPDIR");
  return tmp && !tmp->empty() ? *tmp : "/tmp";
}

std::string make_temp_dir(const std::string& base, const std::string& run_id) {
  std::string pattern = fmt::format("{}/npu_run_{}_XXXXXX", base, run_id);
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw UsageError(
        fmt::format("cannot create a temporary directory in {}: {}; set TMPDIR to a writable "
                    "directory or pass --log-dir",
                    base, std::strerror(errno)));
  }
  return pattern;
}

}  // namespace

std::string RunDirectory::preview(const LaunchConfig& cfg, const EnvMap& env) {
  if (cfg.output.log_dir) {
    return (fs::path(*cfg.output.log_dir) / (cfg.rendezvous.run_id + "_XXXXXX"))
        .lexically_normal()
        .string();
  }
  return fmt::format("{}/npu_run_{}_XXXXXX", temp_base(env), cfg.rendezvous.run_id);
}

RunDirectory RunDirectory::create(const LaunchConfig& cfg, const EnvMap& env) {
  if (!cfg.output.log_dir) {
    const std::string dir = make_temp_dir(temp_base(env), cfg.rendezvous.run_id);
    if (cfg.output.log_dir_is_temporary)
      spdlog::info("worker log files go to {} (pass --log-dir to choose)", dir);
    return RunDirectory(dir, cfg.output.log_dir_is_temporary, !cfg.output.log_dir_is_temporary);
  }
  // Each launch gets a directory of its own, as under torchrun (<run_id>_<unique>): a second
  // run into the same --log-dir never overwrites the first one's logs.
  const fs::path base = fs::path(*cfg.output.log_dir).lexically_normal();
  std::error_code ec;
  fs::create_directories(base, ec);
  std::string pattern = (base / (cfg.rendezvous.run_id + "_XXXXXX")).string();
  if (ec || ::mkdtemp(pattern.data()) == nullptr) {
    throw UsageError(
        fmt::format("--log-dir {}: cannot create a directory for this run in {}: {}; choose a "
                    "directory you can write to",
                    *cfg.output.log_dir, base.string(), ec ? ec.message() : std::strerror(errno)));
  }
  spdlog::info("logs of this run: {}", pattern);
  return RunDirectory(pattern, true, false);
}

RunDirectory::RunDirectory(RunDirectory&& other) noexcept
    : path_(std::move(other.path_)),
      log_files_(other.log_files_),
      remove_at_exit_(other.remove_at_exit_) {
  other.remove_at_exit_ = false;
}

RunDirectory::~RunDirectory() {
  if (!remove_at_exit_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace npu_run
