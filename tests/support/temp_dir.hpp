// Test helpers: a temporary directory removed at scope exit, and environment variables set for
// one scope.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace npu_run::testing {

class TempDir {
 public:
  TempDir();  // under TMPDIR, else /tmp
  // Under `base` (made if missing), or TempDir() where it cannot be written.
  explicit TempDir(const std::string& base);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes `content` to path()/name (creating parent directories) and returns the full path.
  std::string write(const std::string& name, const std::string& content,
                    bool executable = false) const;

 private:
  std::string path_;
};

std::string read_file(const std::string& path);

// The directories of the runs logged into `log_dir` (<run_id>_XXXXXX, one per launch), sorted.
std::vector<std::string> run_dirs(const std::string& log_dir, const std::string& run_id = "none");
// The one run's directory in `log_dir`; fails the test unless there is exactly one.
std::string run_dir(const std::string& log_dir, const std::string& run_id = "none");

// Sets (or with nullopt unsets) process environment variables until destroyed.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::optional<std::string>>& vars);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace npu_run::testing
