#include "workers/log_health.hpp"

#include <fmt/format.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>

namespace npu_run {

std::string errno_label(int err) {
  const char* name = nullptr;
  switch (err) {
    case ENOSPC:
      name = "ENOSPC";
      break;
    case EDQUOT:
      name = "EDQUOT";
      break;
    case EFBIG:
      name = "EFBIG";
      break;
    case EIO:
      name = "EIO";
      break;
    case EROFS:
      name = "EROFS";
      break;
    default:
      break;
  }
  return name == nullptr ? std::string(std::strerror(err))
                         : fmt::format("{} ({})", std::strerror(err), name);
}

std::optional<std::string> full_file_system(const std::string& path) {
  struct statvfs fs {};
  if (path.empty() || ::statvfs(path.c_str(), &fs) != 0) return std::nullopt;
  // What an unprivileged writer may still use; a worker running as root may dip into the
  // reserve, but a log that stopped there is just as incomplete.
  const unsigned long long free_bytes =
      static_cast<unsigned long long>(fs.f_bavail) * static_cast<unsigned long long>(fs.f_frsize);
  constexpr unsigned long long kOnePageOfOutput = 64ULL * 1024;
  if (free_bytes < kOnePageOfOutput)
    return fmt::format("its file system is full ({} bytes free)", free_bytes);
  if (fs.f_files > 0 && fs.f_favail == 0) return std::string("its file system has no inode left");
  return std::nullopt;
}

}  // namespace npu_run
