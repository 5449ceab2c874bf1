// Why a worker's log file may be incomplete. A relay sees its own write fail (a full disk: ENOSPC,
// a quota: EDQUOT); a file the worker writes itself (zero copy, -r without -t) fails in the
// worker, unseen by npu_run, so the file system is looked at once the worker has ended.
#pragma once

#include <optional>
#include <string>

namespace npu_run {

// "No space left on device (ENOSPC)": the text and, for the errors a log write meets, the name
// people search for.
std::string errno_label(int err);

// "its file system is full (0 bytes free)" when what is left under `path` could not hold one
// more page of output (or no inode is left); nothing otherwise or when it cannot be read.
std::optional<std::string> full_file_system(const std::string& path);

}  // namespace npu_run
