#include "basics/kernel_features.hpp"

#include <fmt/format.h>
#include <linux/close_range.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>

namespace npu_run {
namespace {

// True unless the call fails with ENOSYS: every probe below is made with arguments that have no
// effect, so any other answer (success or EINVAL) means the kernel knows the call.
bool known(long result) {
  return result >= 0 || errno != ENOSYS;
}

KernelFeatures probe() {
  KernelFeatures f;
  struct utsname names {};
  if (::uname(&names) == 0) f.release = names.release;

  const long pidfd = ::syscall(SYS_pidfd_open, ::getpid(), 0);
  f.pidfd_open = pidfd >= 0;
  if (pidfd >= 0) ::close(static_cast<int>(pidfd));
  // A null argument block of size 0 is refused with EINVAL by a kernel that has clone3.
  f.clone3 = known(::syscall(SYS_clone3, nullptr, 0));
  // The range [~0U, ~0U] holds no open descriptor: nothing is closed.
  f.close_range = known(::syscall(SYS_close_range, ~0U, ~0U, 0));
  // Before 5.11 the flag is refused with EINVAL, which must not count as support.
  f.close_range_cloexec =
      f.close_range && ::syscall(SYS_close_range, ~0U, ~0U, CLOSE_RANGE_CLOEXEC) == 0;
  unsigned char byte = 0;
  f.getrandom = known(::syscall(SYS_getrandom, &byte, 1, GRND_NONBLOCK));
  return f;
}

const char* yes_no(bool b) {
  return b ? "yes" : "no";
}

}  // namespace

const KernelFeatures& kernel_features() {
  static const KernelFeatures features = probe();
  return features;
}

std::string describe_kernel(const KernelFeatures& f) {
  return fmt::format("{} (pidfd_open {}, clone3 {}, close_range {}, getrandom {})",
                     f.release.empty() ? "unknown" : f.release, yes_no(f.pidfd_open),
                     yes_no(f.clone3), yes_no(f.close_range), yes_no(f.getrandom));
}

}  // namespace npu_run
