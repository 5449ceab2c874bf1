// Mounts that only this test process and what it starts see: a mount namespace of its own
// (under ctest every test case is a process of its own, so nothing leaks into the next).
#pragma once

#include <string>

namespace npu_run::testing {

// Enters a private mount namespace once per process; false when not allowed (not root).
bool private_mount_namespace();

// A tmpfs of `size` ("256k") at `path` (created), in the private namespace.
bool mount_small_tmpfs(const std::string& path, const std::string& size);

// `path` read-only in the private namespace, its contents still there: a build or a binary
// below it (a checkout under /tmp) stays usable while writes there fail with EROFS.
bool make_read_only(const std::string& path);

// `text` as /etc/hosts, in the private namespace: names that resolve as a test needs.
bool replace_hosts_file(const std::string& text, const std::string& scratch_dir);

}  // namespace npu_run::testing
