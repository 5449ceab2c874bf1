#include "agent/health/tool_call.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <optional>

#include "basics/exit_status.hpp"
#include "workers/child_exits.hpp"
#include "workers/child_setup.hpp"

namespace npu_run {

namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// After the tool exits, what a descendant outside its group still holds open is not waited for.
constexpr auto kDrainAfterExit = std::chrono::milliseconds(500);

class RunningTool : public ToolCall, public std::enable_shared_from_this<RunningTool> {
 public:
  RunningTool(asio::io_context& io, ChildExits& exits, std::vector<std::string> argv, Done done)
      : io_(io), exits_(exits), out_(io), err_(io), timer_(io), done_(std::move(done)) {
    run_.argv = std::move(argv);
  }

  void begin(std::chrono::milliseconds timeout, const std::vector<std::string>* env);
  void cancel() override { stop(); }

 private:
  using Buffer = std::array<char, size_t{16} * 1024>;
  void read(asio::posix::stream_descriptor& pipe, std::string& into, Buffer& buffer);
  void exited(boost::system::error_code ec, int status);
  void stop();
  void maybe_done();

  asio::io_context& io_;
  // Handed to Boost's launcher and never run, as for workers (workers/worker_process.hpp):
  // Asio's fork notifications would otherwise rebuild the agent loop's epoll set in the child.
  asio::io_context spawn_context_;
  ChildExits& exits_;
  asio::posix::stream_descriptor out_, err_;
  asio::steady_timer timer_;
  Done done_;
  ToolRun run_;
  Clock::time_point started_ = Clock::now();
  pid_t pid_ = 0;
  bool exited_ = false, timed_out_ = false;
  int open_pipes_ = 0;
  Buffer out_buffer_{}, err_buffer_{};
};

void RunningTool::begin(std::chrono::milliseconds timeout, const std::vector<std::string>* env) {
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in < 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    run_.end = ToolRun::End::kNotStarted;
    run_.code = errno;
    for (int fd : {in, out[0], out[1], err[0], err[1]})
      if (fd >= 0) ::close(fd);
    exited_ = true;
    return asio::post(io_, [self = shared_from_this()] { self->maybe_done(); });
  }
  boost::system::error_code ec;
  const std::vector<std::string> args(run_.argv.begin() + 1, run_.argv.end());
  std::vector<const char*> envp;
  if (env != nullptr) {
    for (const std::string& entry : *env) envp.push_back(entry.c_str());
    envp.push_back(nullptr);
  }
  pid_ = spawn_helper(spawn_context_, run_.argv.front(), args, in, out[1], err[1], ec,
                      env != nullptr ? envp.data() : nullptr);
  for (int fd : {in, out[1], err[1]}) ::close(fd);
  out_.assign(out[0]);
  err_.assign(err[0]);
  open_pipes_ = 2;
  if (ec) {
    run_.end = ToolRun::End::kNotStarted;
    run_.code = ec.value();
    exited_ = true;
  } else {
    exits_.watch(pid_,
                 [self = shared_from_this()](boost::system::error_code wait_error, int status) {
                   self->exited(wait_error, status);
                 });
    timer_.expires_after(timeout);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code cancelled) {
      if (!cancelled) self->stop();
    });
  }
  read(out_, run_.out, out_buffer_);
  read(err_, run_.err, err_buffer_);
}

void RunningTool::read(asio::posix::stream_descriptor& pipe, std::string& into, Buffer& buffer) {
  pipe.async_read_some(asio::buffer(buffer), [self = shared_from_this(), &pipe, &into, &buffer](
                                                 boost::system::error_code ec, size_t n) {
    if (ec) {
      boost::system::error_code ignored;
      pipe.close(ignored);
      --self->open_pipes_;
      return self->maybe_done();
    }
    // Past the cap the output is read and dropped, so the tool never blocks on a full pipe.
    const size_t room = kToolOutputCap - std::min(kToolOutputCap, into.size());
    into.append(buffer.data(), std::min(n, room));
    self->read(pipe, into, buffer);
  });
}

void RunningTool::exited(boost::system::error_code ec, int status) {
  forget_helper_process(pid_);
  ::kill(-pid_, SIGKILL);  // whatever it left in its group goes with it
  exited_ = true;
  timer_.cancel();
  if (!timed_out_) {
    const ExitStatus decoded = ec ? ExitStatus::exited(255) : ExitStatus::from_wait_status(status);
    run_.end = decoded.kind == ExitStatus::Kind::kSignaled ? ToolRun::End::kSignaled
                                                           : ToolRun::End::kExited;
    run_.code = decoded.kind == ExitStatus::Kind::kSignaled ? decoded.signal : decoded.code;
  }
  timer_.expires_after(kDrainAfterExit);
  timer_.async_wait([self = shared_from_this()](boost::system::error_code cancelled) {
    if (cancelled) return;
    boost::system::error_code ignored;
    self->out_.close(ignored);
    self->err_.close(ignored);
  });
  maybe_done();
}

void RunningTool::stop() {
  if (exited_ || timed_out_ || pid_ <= 0) return;
  timed_out_ = true;
  run_.end = ToolRun::End::kTimedOut;
  ::kill(-pid_, SIGKILL);
}

void RunningTool::maybe_done() {
  if (!exited_ || open_pipes_ > 0 || !done_) return;
  timer_.cancel();
  run_.elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_).count();
  auto done = std::move(done_);
  done_ = nullptr;
  done(std::move(run_));
}

}  // namespace

std::shared_ptr<ToolCall> ToolCall::start(asio::io_context& io, ChildExits& exits,
                                          std::vector<std::string> argv,
                                          std::chrono::milliseconds timeout, Done done) {
  auto call = std::make_shared<RunningTool>(io, exits, std::move(argv), std::move(done));
  call->begin(timeout, nullptr);
  return call;
}

std::shared_ptr<ToolCall> ToolCall::start(asio::io_context& io, ChildExits& exits,
                                          std::vector<std::string> argv,
                                          const std::vector<std::string>& env,
                                          std::chrono::milliseconds timeout, Done done) {
  auto call = std::make_shared<RunningTool>(io, exits, std::move(argv), std::move(done));
  call->begin(timeout, &env);
  return call;
}

}  // namespace npu_run
