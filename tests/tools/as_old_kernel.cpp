// Runs a program as if on an older Linux kernel: a seccomp filter makes every system call that
// kernel lacks fail with ENOSYS, for the program and everything it starts. Tests put it in front
// of npu_run to prove the run-time fallbacks (no pidfd, clone3, close_range, getrandom, ...).
// With --linux, the TCP option TCP_RTO_MAX_MS (Linux 6.15) is refused with ENOPROTOOPT, as every
// older kernel refuses an option it does not know: TCP then backs off as it does there.
//
//   as_old_kernel --linux 3.10 PROGRAM [ARGS...]        every call newer than Linux 3.10
//   as_old_kernel --deny pidfd_open,clone3 PROGRAM ...  just these calls
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

#if defined(__x86_64__)
constexpr unsigned kAuditArch = AUDIT_ARCH_X86_64;
// The highest system call number of each kernel (arch/x86/entry/syscalls/syscall_64.tbl).
const std::map<std::string, unsigned> kLastSyscall = {
    {"3.10", 313}, {"4.15", 332}, {"4.18", 334}, {"4.19", 334},
    {"5.2", 433},  {"5.4", 435},  {"5.10", 440},
};
#elif defined(__aarch64__)
constexpr unsigned kAuditArch = AUDIT_ARCH_AARCH64;
// include/uapi/asm-generic/unistd.h
const std::map<std::string, unsigned> kLastSyscall = {
    {"3.10", 273}, {"4.15", 291}, {"4.18", 293}, {"4.19", 293},
    {"5.2", 433},  {"5.4", 435},  {"5.10", 440},
};
#else
#error "as_old_kernel knows the system calls of x86_64 and aarch64 only"
#endif

const std::map<std::string, unsigned> kByName = {
    {"pidfd_open", SYS_pidfd_open},
    {"clone3", SYS_clone3},
    {"close_range", SYS_close_range},
    {"pidfd_send_signal", SYS_pidfd_send_signal},
    {"getrandom", SYS_getrandom},
    {"statx", SYS_statx},
    {"rseq", SYS_rseq},
    {"faccessat2", SYS_faccessat2},
};

[[noreturn]] void usage(const char* why) {
  (void)std::fprintf(
      stderr,
      "as_old_kernel: %s\nusage: as_old_kernel (--linux VERSION | --deny CALL,CALL...) "
      "PROGRAM [ARGS...]\n",
      why);
  std::_Exit(2);
}

std::vector<unsigned> parse_names(const std::string& list) {
  std::vector<unsigned> numbers;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    const auto it = kByName.find(name);
    if (it == kByName.end()) usage(("unknown system call name: " + name).c_str());
    numbers.push_back(it->second);
    start = comma + 1;
  }
  return numbers;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) usage("missing arguments");
  const std::string mode = argv[1];
  unsigned last = ~0U;  // deny every number above this
  std::vector<unsigned> denied;
  if (mode == "--linux") {
    const auto it = kLastSyscall.find(argv[2]);
    if (it == kLastSyscall.end())
      usage("unknown kernel version (3.10 4.15 4.18 4.19 5.2 5.4 5.10)");
    last = it->second;
    // Programs also read the release: OpenSSL, finding no getrandom, reads /dev/urandom only
    // on kernels it knows to be older than 4.8 (before that /dev/random's readiness meant a
    // seeded pool). UNAME26 makes uname() report "2.6.x", which is as old as they look.
    if (std::string(argv[2]).rfind("3.", 0) == 0 &&
        personality(static_cast<unsigned long>(UNAME26)) == -1) {
      (void)std::fprintf(stderr, "as_old_kernel: personality(UNAME26): %s\n", std::strerror(errno));
      return 1;
    }
  } else if (mode == "--deny") {
    denied = parse_names(argv[2]);
  } else {
    usage("the first argument must be --linux or --deny");
  }

  constexpr unsigned kEnosys = SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA);
  std::vector<sock_filter> program = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
  };
  if (mode == "--linux") {
    // setsockopt(fd, IPPROTO_TCP, TCP_RTO_MAX_MS, ...): compares the low halves of the 64-bit
    // arguments (both architectures here are little-endian), then loads the number again.
    constexpr unsigned kTcpRtoMaxMs = 44;
    constexpr unsigned kNoSuchOption = SECCOMP_RET_ERRNO | (ENOPROTOOPT & SECCOMP_RET_DATA);
    const auto arg = [](int i) {
      return static_cast<unsigned>(offsetof(seccomp_data, args) + sizeof(__u64) * i);
    };
    const std::vector<sock_filter> rto_max = {
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setsockopt, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arg(1)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arg(2)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kTcpRtoMaxMs, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, kNoSuchOption),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
    };
    program.insert(program.end(), rto_max.begin(), rto_max.end());
  }
  program.push_back(BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, last, 0, 1));
  program.push_back(BPF_STMT(BPF_RET | BPF_K, kEnosys));
  for (unsigned nr : denied) {
    program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1));
    program.push_back(BPF_STMT(BPF_RET | BPF_K, kEnosys));
  }
  program.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  const sock_fprog fprog{static_cast<unsigned short>(program.size()), program.data()};

  // Without no_new_privs an unprivileged process may not install a filter.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0) {
    (void)std::fprintf(stderr, "as_old_kernel: cannot install the seccomp filter: %s\n",
                       std::strerror(errno));
    return 1;
  }
  execvp(argv[3], argv + 3);
  (void)std::fprintf(stderr, "as_old_kernel: cannot execute %s: %s\n", argv[3],
                     std::strerror(errno));
  return 127;
}
