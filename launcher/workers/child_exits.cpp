#include "workers/child_exits.hpp"

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <cerrno>
#include <csignal>
#include <map>
#include <optional>
#include <vector>

#include "basics/kernel_features.hpp"

namespace npu_run {

namespace asio = boost::asio;

struct ChildExits::Impl : std::enable_shared_from_this<Impl> {
  struct Child {
    Handler on_exit;
    std::unique_ptr<asio::posix::stream_descriptor> pidfd;  // null: woken by SIGCHLD
  };

  Impl(asio::io_context& io_context, Mechanism m) : io(io_context), mechanism(m) {}

  // SIGCHLD is handled from the first child that has no pidfd on: always before Linux 5.3,
  // otherwise only if pidfd_open fails for a child (out of descriptors).
  void listen_for_sigchld() {
    if (sigchld) return;
    sigchld = std::make_unique<asio::signal_set>(io, SIGCHLD);
    // Asio installs its handler without SA_RESTART: every worker exit would then interrupt a
    // blocking call of the agent (a console or log write) with EINTR. Same handler, restartable;
    // and stopped children (SIGSTOP) need not wake anyone.
    struct sigaction sa {};
    if (::sigaction(SIGCHLD, nullptr, &sa) == 0) {
      sa.sa_flags |= SA_RESTART | SA_NOCLDSTOP;
      ::sigaction(SIGCHLD, &sa, nullptr);
    }
    wait_for_sigchld();
  }

  void wait_for_sigchld() {
    sigchld->async_wait([weak = weak_from_this()](const boost::system::error_code& ec, int) {
      auto self = weak.lock();
      if (ec || !self) return;
      self->reap_exited();
      self->wait_for_sigchld();
    });
  }

  struct Exit {
    Handler handler;
    boost::system::error_code ec;
    int status = 0;
  };

  // Reaps `pid` if it has exited. Never blocks, even when its pidfd said it had: a readiness
  // can be stale (Asio recycles a closed descriptor's reactor state, and an event already
  // collected for the old descriptor may reach the new one), and a blocking wait on a live
  // worker would stop the whole agent.
  std::optional<Exit> try_reap(pid_t pid) {
    int status = 0;
    pid_t got = 0;
    do {
      got = ::waitpid(pid, &status, WNOHANG);
    } while (got < 0 && errno == EINTR);
    if (got == 0) return std::nullopt;  // still running
    const auto it = children.find(pid);
    Exit exit{std::move(it->second.on_exit), {}, status};
    if (got < 0) exit.ec = boost::system::error_code(errno, boost::system::system_category());
    children.erase(it);  // closes its pidfd, if any
    return exit;
  }

  // One SIGCHLD may stand for several exits (signals do not queue): ask every child without a
  // pidfd. Handlers run after the scan, as they may watch or forget children.
  void reap_exited() {
    std::vector<pid_t> candidates;
    for (const auto& [pid, child] : children) {
      if (!child.pidfd) candidates.push_back(pid);
    }
    std::vector<Exit> exits;
    for (pid_t pid : candidates) {
      if (auto exit = try_reap(pid)) exits.push_back(std::move(*exit));
    }
    for (Exit& exit : exits) exit.handler(exit.ec, exit.status);
  }

  void watch(pid_t pid, Handler on_exit) {
    Child& child = children[pid];
    child.on_exit = std::move(on_exit);
    const long fd = mechanism == Mechanism::kPidfd ? ::syscall(SYS_pidfd_open, pid, 0) : -1;
    if (fd < 0) {
      listen_for_sigchld();
      // The child may have exited before it was in the map, its SIGCHLD already handled: look
      // once now (posted, so that the handler never runs inside watch()).
      asio::post(io, [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->reap_exited();
      });
      return;
    }
    // A pidfd is close-on-exec by definition.
    child.pidfd = std::make_unique<asio::posix::stream_descriptor>(io, static_cast<int>(fd));
    wait_for_exit(pid);
  }

  void wait_for_exit(pid_t pid) {
    children.at(pid).pidfd->async_wait(
        asio::posix::stream_descriptor::wait_read,
        [weak = weak_from_this(), pid](const boost::system::error_code& ec) {
          auto self = weak.lock();
          if (ec || !self || !self->children.count(pid)) return;
          if (auto exit = self->try_reap(pid))
            exit->handler(exit->ec, exit->status);
          else
            self->wait_for_exit(pid);  // not exited after all: wait again
        });
  }

  void forget(pid_t pid) { children.erase(pid); }

  asio::io_context& io;
  const Mechanism mechanism;
  std::unique_ptr<asio::signal_set> sigchld;
  std::map<pid_t, Child> children;
};

ChildExits::Mechanism ChildExits::preferred() {
  return kernel_features().pidfd_open ? Mechanism::kPidfd : Mechanism::kSigchld;
}

ChildExits::ChildExits(asio::io_context& io) : ChildExits(io, preferred()) {}

ChildExits::ChildExits(asio::io_context& io, Mechanism mechanism)
    : impl_(std::make_shared<Impl>(io, mechanism)) {}

ChildExits::~ChildExits() = default;

void ChildExits::watch(pid_t pid, Handler on_exit) {
  impl_->watch(pid, std::move(on_exit));
}

void ChildExits::forget(pid_t pid) {
  impl_->forget(pid);
}

ChildExits::Mechanism ChildExits::mechanism() const {
  return impl_->mechanism;
}

const char* to_string(ChildExits::Mechanism mechanism) {
  return mechanism == ChildExits::Mechanism::kPidfd ? "pidfd" : "SIGCHLD";
}

}  // namespace npu_run
