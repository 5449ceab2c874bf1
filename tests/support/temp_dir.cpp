#include "support/temp_dir.hpp"

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace npu_run::testing {

namespace {

std::string default_temp_base() {
  const char* base = std::getenv("TMPDIR");
  return base != nullptr && *base != '\0' ? base : "/tmp";
}

std::optional<std::string> made_temp_dir(const std::string& base) {
  std::string pattern = base + "/npu_run_test_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return std::nullopt;
  return pattern;
}

}  // namespace

TempDir::TempDir() {
  const auto made = made_temp_dir(default_temp_base());
  if (!made) throw std::runtime_error("mkdtemp failed under " + default_temp_base());
  path_ = *made;
}

TempDir::TempDir(const std::string& base) {
  std::error_code ec;
  std::filesystem::create_directories(base, ec);
  auto made = made_temp_dir(base);
  if (!made) made = made_temp_dir(default_temp_base());
  if (!made) throw std::runtime_error("mkdtemp failed under " + base);
  path_ = *made;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& content,
                           bool executable) const {
  const std::string full = file(name);
  std::filesystem::create_directories(std::filesystem::path(full).parent_path());
  std::ofstream(full) << content;
  if (executable) ::chmod(full.c_str(), 0755);
  return full;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

ScopedEnv::ScopedEnv(const std::map<std::string, std::optional<std::string>>& vars) {
  for (const auto& [name, value] : vars) {
    const char* old = std::getenv(name.c_str());
    saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    if (value)
      ::setenv(name.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
}

ScopedEnv::~ScopedEnv() {
  for (const auto& [name, value] : saved_) {
    if (value)
      ::setenv(name.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
}

std::vector<std::string> run_dirs(const std::string& log_dir, const std::string& run_id) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(log_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind(run_id + "_", 0) == 0 &&
        name.size() == run_id.size() + 7)
      dirs.push_back(entry.path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

std::string run_dir(const std::string& log_dir, const std::string& run_id) {
  const std::vector<std::string> dirs = run_dirs(log_dir, run_id);
  INFO("runs in " << log_dir);
  REQUIRE(dirs.size() == 1);
  return dirs.front();
}

}  // namespace npu_run::testing
