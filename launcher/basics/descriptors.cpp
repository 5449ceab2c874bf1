#include "basics/descriptors.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "basics/kernel_features.hpp"

namespace npu_run {
namespace {

// The open descriptors from `lowest` up, read from /proc/self/fd before any is touched (the
// directory's own descriptor is among them while it is read); empty if /proc is not mounted.
std::vector<int> open_descriptors(int lowest, bool& listed) {
  std::vector<int> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  listed = dir != nullptr;
  if (dir == nullptr) return fds;
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd < lowest || fd == own || fd > INT_MAX) continue;
    fds.push_back(static_cast<int>(fd));
  }
  ::closedir(dir);
  return fds;
}

// Applies `action` to each open descriptor from `lowest` up except `keep`, without close_range.
void for_each_descriptor(int lowest, int keep, const std::function<void(int)>& action) {
  bool listed = false;
  const std::vector<int> fds = open_descriptors(lowest, listed);
  if (listed) {
    for (int fd : fds) {
      if (fd != keep) action(fd);
    }
    return;
  }
  // No /proc (a bare chroot): every possible number, as far as the open-files limit goes.
  const long limit = ::sysconf(_SC_OPEN_MAX);
  for (long fd = lowest; fd < (limit > 0 ? limit : 1024); ++fd) {
    if (fd != keep) action(static_cast<int>(fd));
  }
}

void mark_cloexec(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0 && !(flags & FD_CLOEXEC)) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

}  // namespace

void fill_closed_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // The lowest free number is `fd` itself, as the ones below it are open by now. Not
    // close-on-exec: it stands for the standard stream, which workers inherit.
    const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) ::close(opened);
  }
}

void set_cloexec(int fd) {
  mark_cloexec(fd);
}

void set_cloexec_from_in_child(int lowest, bool close_range_cloexec) {
  const auto first = static_cast<unsigned>(lowest);
  if (close_range_cloexec && ::syscall(SYS_close_range, first, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
    return;
  const int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    // struct linux_dirent64: inode, offset, record length, type, name.
    alignas(8) char buffer[4096];
    long n = 0;
    while ((n = ::syscall(SYS_getdents64, dir, buffer, sizeof buffer)) > 0) {
      for (long at = 0; at < n;) {
        unsigned short length = 0;
        std::memcpy(&length, buffer + at + 16, sizeof length);
        const char* name = buffer + at + 19;
        int fd = 0;
        bool number = *name != '\0';
        for (const char* c = name; *c != '\0'; ++c) {
          if (*c < '0' || *c > '9')
            number = false;
          else
            fd = fd * 10 + (*c - '0');
        }
        if (number && fd >= lowest && fd != dir) mark_cloexec(fd);
        at += length;
      }
    }
    ::close(dir);
    if (n == 0) return;
  }
  rlimit limit{};
  const rlim_t last = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                          ? limit.rlim_cur
                          : 65536;
  for (rlim_t fd = first; fd < last; ++fd) mark_cloexec(static_cast<int>(fd));
}

void set_cloexec_from(int lowest) {
  if (kernel_features().close_range_cloexec &&
      ::syscall(SYS_close_range, static_cast<unsigned>(lowest), ~0U, CLOSE_RANGE_CLOEXEC) == 0)
    return;
  for_each_descriptor(lowest, -1, mark_cloexec);
}

void close_descriptors_from(int lowest, int keep) {
  if (kernel_features().close_range) {
    const auto first = static_cast<unsigned>(lowest);
    bool ok = true;
    if (keep < lowest) {
      ok = ::syscall(SYS_close_range, first, ~0U, 0) == 0;
    } else {
      const auto kept = static_cast<unsigned>(keep);
      if (kept > first) ok = ::syscall(SYS_close_range, first, kept - 1, 0) == 0;
      ok = ok && ::syscall(SYS_close_range, kept + 1, ~0U, 0) == 0;
    }
    if (ok) return;
  }
  for_each_descriptor(lowest, keep, [](int fd) { ::close(fd); });
}

void raise_open_files_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

unsigned long ensure_open_files(unsigned long needed) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed) return 0;
  if (limit.rlim_max < needed) return static_cast<unsigned long>(limit.rlim_max);
  limit.rlim_cur = needed;
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0 ? 0 : static_cast<unsigned long>(limit.rlim_cur);
}

bool write_fully(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace npu_run
