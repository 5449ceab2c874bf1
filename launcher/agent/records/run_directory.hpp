// The directory of one run's files: a fresh <log_dir>/<run_id>_XXXXXX when the user gave
// --log-dir (error files always, worker output where -r/-t ask for it), a fresh
// $TMPDIR/npu_run_<run_id>_XXXXXX when -r/-t asked for files without --log-dir (kept, like
// torchrun), or a private temporary directory for error files only (removed at exit).
#pragma once

#include <string>

#include "basics/environment.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

class RunDirectory {
 public:
  // Creates the directory; throws UsageError naming the path when it cannot.
  static RunDirectory create(const LaunchConfig& cfg, const EnvMap& env);
  // What create() would choose, without touching the file system (for --dry-run).
  static std::string preview(const LaunchConfig& cfg, const EnvMap& env);

  RunDirectory(RunDirectory&& other) noexcept;
  RunDirectory& operator=(RunDirectory&&) = delete;
  ~RunDirectory();

  const std::string& path() const { return path_; }
  bool log_files() const { return log_files_; }

 private:
  RunDirectory(std::string path, bool log_files, bool remove_at_exit)
      : path_(std::move(path)), log_files_(log_files), remove_at_exit_(remove_at_exit) {}
  std::string path_;
  bool log_files_ = false;
  bool remove_at_exit_ = false;
};

}  // namespace npu_run
