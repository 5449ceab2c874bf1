#include "support/private_mounts.hpp"

#include <sched.h>
#include <sys/mount.h>

#include <filesystem>
#include <fstream>

namespace npu_run::testing {

bool private_mount_namespace() {
  static const bool entered = ::unshare(CLONE_NEWNS) == 0 &&
                              ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
  return entered;
}

bool mount_small_tmpfs(const std::string& path, const std::string& size) {
  if (!private_mount_namespace()) return false;
  std::filesystem::create_directories(path);
  return ::mount("tmpfs", path.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
}

bool make_read_only(const std::string& path) {
  if (!private_mount_namespace()) return false;
  return ::mount(path.c_str(), path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0 &&
         ::mount(nullptr, path.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) == 0;
}

bool replace_hosts_file(const std::string& text, const std::string& scratch_dir) {
  if (!private_mount_namespace()) return false;
  const std::string hosts = scratch_dir + "/hosts";
  std::ofstream(hosts) << text;
  return ::mount(hosts.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr) == 0;
}

}  // namespace npu_run::testing
