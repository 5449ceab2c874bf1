#include "workers/child_setup.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>

#include "basics/descriptors.hpp"
#include "basics/kernel_features.hpp"
#include "workers/boost_process.hpp"

namespace npu_run {

namespace bp = boost::process::v2;

AllSignalsBlocked::AllSignalsBlocked() {
  sigset_t all;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &saved_);
}

AllSignalsBlocked::~AllSignalsBlocked() {
  ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
}

void restore_signals_in_child() {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction current {};
    if (sig == SIGKILL || sig == SIGSTOP || ::sigaction(sig, nullptr, &current) != 0) continue;
    // Ignored signals survive exec: only npu_run's own choices (SIGPIPE, SIGTTIN) are undone.
    if (current.sa_handler != SIG_DFL &&
        (current.sa_handler != SIG_IGN || sig == SIGPIPE || sig == SIGTTIN))
      (void)::signal(sig, SIG_DFL);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

namespace {

std::mutex helpers_mutex;
std::set<pid_t> helpers;

struct HelperSetup {
  pid_t parent;
  bool close_range_cloexec;

  template <typename Launcher>
  bp::error_code on_exec_setup(Launcher&, const std::filesystem::path&, const char* const*) {
    if (::setpgid(0, 0) != 0) return bp::error_code(errno, boost::system::system_category());
    if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0)
      return bp::error_code(errno, boost::system::system_category());
    if (::getppid() != parent) return bp::error_code(ESRCH, boost::system::system_category());
    set_cloexec_from_in_child(3, close_range_cloexec);
    restore_signals_in_child();
    return {};
  }
};

}  // namespace

pid_t spawn_helper(boost::asio::io_context& io, const std::string& program,
                   const std::vector<std::string>& args, int in_fd, int out_fd, int err_fd,
                   boost::system::error_code& ec, const char* const* envp) {
  std::filesystem::path path = program;
  if (program.find('/') == std::string::npos) {
    path = bp::environment::find_executable(program);
    if (path.empty()) {
      ec = boost::system::error_code(ENOENT, boost::system::system_category());
      return 0;
    }
  }
  bp::posix::fork_and_forget_launcher launcher;
  if (envp != nullptr) launcher.env = envp;  // as for workers (workers/worker_process.cpp)
  std::optional<bp::process> proc;
  {
    const AllSignalsBlocked blocked;
    proc.emplace(launcher(io.get_executor(), ec, path, args,
                          bp::process_stdio{in_fd, out_fd, err_fd},
                          HelperSetup{::getpid(), kernel_features().close_range_cloexec}));
  }
  if (ec) return 0;
  const pid_t pid = proc->id();
  proc->detach();
  (void)::setpgid(pid, pid);  // as for workers: from both sides, before anyone signals the group
  const std::lock_guard lock(helpers_mutex);
  helpers.insert(pid);
  return pid;
}

bool is_helper_process(pid_t pid) {
  const std::lock_guard lock(helpers_mutex);
  return helpers.contains(pid);
}

void forget_helper_process(pid_t pid) {
  const std::lock_guard lock(helpers_mutex);
  helpers.erase(pid);
}

}  // namespace npu_run
