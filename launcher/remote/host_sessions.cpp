#include "remote/host_sessions.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <csignal>
#include <cstring>
#include <deque>

#include "basics/exit_status.hpp"
#include "basics/text.hpp"
#include "remote/control_lines.hpp"
#include "remote/host_output.hpp"
#include "workers/child_exits.hpp"
#include "workers/child_setup.hpp"
#include "workers/console.hpp"

namespace npu_run {

namespace asio = boost::asio;

namespace {

// After ssh exits, what is still in its pipes is read for this long: a ProxyCommand it started
// may hold them open.
constexpr auto kDrainAfterExit = std::chrono::seconds(2);

// The last lines of what ssh (or the remote shell) said, as one line.
std::string last_words(const std::string& held) {
  std::vector<std::string_view> lines;
  for (std::string_view line : split(held, '\n')) {
    line = trim(line);
    if (!line.empty()) lines.push_back(line);
  }
  if (lines.size() > 3) lines.erase(lines.begin(), lines.end() - 3);
  std::string text;
  for (std::string_view line : lines) {
    if (!text.empty()) text += " / ";
    text += line;
  }
  return printable(text);
}

}  // namespace

struct HostSessions::Session {
  explicit Session(asio::io_context& io, HostStart s) : start(std::move(s)), drain(io) {}

  enum class State { kPending, kConnecting, kStarting, kReady, kEnded };
  HostStart start;
  State state = State::kPending;
  pid_t pid = 0;
  std::unique_ptr<asio::posix::stream_descriptor> in;
  std::shared_ptr<HostOutput> out;
  std::shared_ptr<HostOutput> err;
  std::deque<std::shared_ptr<const std::string>> to_write;
  bool writing = false;
  bool close_after_writes = false;
  int open_outputs = 0;
  bool exited = false;
  int exit_code = 0;
  bool agent_reported = false;
  int agent_code = 0;
  asio::steady_timer drain;
};

HostSessions::HostSessions(asio::io_context& io, ChildExits& exits, std::vector<HostStart> hosts,
                           int fanout, std::shared_ptr<const std::string> binary, Handlers handlers,
                           bool first_alone)
    : io_(io),
      exits_(exits),
      fanout_(std::max(1, fanout)),
      first_alone_(first_alone),
      binary_(std::move(binary)),
      handlers_(std::move(handlers)) {
  for (HostStart& host : hosts) sessions_.push_back(std::make_unique<Session>(io, std::move(host)));
}

HostSessions::~HostSessions() {
  // Whatever still runs is told to go: its hosts see EOF and stop their agents.
  for (auto& session : sessions_) {
    if (session->in) close_stdin(*session);
    if (session->out) session->out->close();
    if (session->err) session->err->close();
  }
}

void HostSessions::start() {
  if (sessions_.empty()) {
    asio::post(io_, [this, alive = std::weak_ptr<int>(alive_)] {
      if (alive.lock() && handlers_.all_ended) handlers_.all_ended();
    });
    return;
  }
  start_more();
}

void HostSessions::start_more() {
  while (stopped_by_ == 0 && next_ < sessions_.size() &&
         in_handshake_ < static_cast<size_t>(fanout_)) {
    const auto first = sessions_.front()->state;
    if (first_alone_ && next_ > 0 && first != Session::State::kReady &&
        first != Session::State::kEnded)
      return;
    Session& session = *sessions_[next_++];
    ++in_handshake_;
    session.state = Session::State::kConnecting;
    spawn(session);
  }
}

void HostSessions::spawn(Session& session) {
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    const int error = errno;
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]})
      if (fd >= 0) ::close(fd);
    session.exited = true;
    session.exit_code = 255;
    session.err = nullptr;
    finish(session);
    spdlog::error("cannot start ssh for {}: no pipes: {}", session.start.name,
                  std::strerror(error));
    return;
  }
  boost::system::error_code ec;
  const std::vector<std::string> args(session.start.argv.begin() + 1, session.start.argv.end());
  session.pid = spawn_helper(io_, session.start.argv.front(), args, in[0], out[1], err[1], ec);
  for (int fd : {in[0], out[1], err[1]}) ::close(fd);
  session.in = std::make_unique<asio::posix::stream_descriptor>(io_, in[1]);
  auto control = [this, s = &session](const ControlLine& line) { on_control(*s, line); };
  auto ended = [this, s = &session, alive = std::weak_ptr<int>(alive_)] {
    if (!alive.lock()) return;
    --s->open_outputs;
    maybe_finish(*s);
  };
  session.out = std::make_shared<HostOutput>(io_, out[0], console_out(), control, ended);
  session.err = std::make_shared<HostOutput>(io_, err[0], console_err(), control, ended);
  session.err->hold();  // ssh's words: shown once the host runs, the error if it never does
  session.open_outputs = 2;
  session.out->start();
  session.err->start();
  if (ec) {
    session.exited = true;
    session.exit_code = 255;
    spdlog::error("cannot run {} for {}: {}", session.start.argv.front(), session.start.name,
                  ec.message());
    close_stdin(session);
    maybe_finish(session);
    return;
  }
  spdlog::debug("ssh to {}: pid {}", session.start.name, session.pid);
  exits_.watch(session.pid, [this, s = &session, alive = std::weak_ptr<int>(alive_)](
                                boost::system::error_code wait_error, int status) {
    forget_helper_process(s->pid);
    if (!alive.lock()) return;
    s->exited = true;
    s->exit_code = wait_error ? 255 : ExitStatus::from_wait_status(status).as_exit_code();
    s->drain.expires_after(kDrainAfterExit);
    s->drain.async_wait([s](boost::system::error_code cancelled) {
      if (cancelled) return;
      if (s->out) s->out->close();
      if (s->err) s->err->close();
    });
    maybe_finish(*s);
  });
}

void HostSessions::on_control(Session& session, const ControlLine& line) {
  const bool own = line.host == session.start.name;
  switch (line.kind) {
    case ControlLine::Kind::kNeedBinary:
      if (session.state != Session::State::kConnecting || !session.start.ship_binary || !binary_) {
        spdlog::error("{} asks for npu_run's binary, which it was not offered; hanging up",
                      session.start.name);
        close_stdin(session);
        return;
      }
      spdlog::info("{}: sending npu_run's binary ({} bytes)", session.start.name, binary_->size());
      send(session, binary_);
      return;
    case ControlLine::Kind::kHaveBinary:
      spdlog::debug("{} has npu_run's binary already", session.start.name);
      return;
    case ControlLine::Kind::kHello:
      if (session.state != Session::State::kConnecting) return;
      session.state = Session::State::kStarting;
      send(session, std::make_shared<const std::string>(session.start.preamble));
      if (stopped_by_ != 0)
        send(session, std::make_shared<const std::string>(format_stop(stopped_by_)));
      return;
    case ControlLine::Kind::kReady:
      if (own && session.state == Session::State::kStarting) {
        session.state = Session::State::kReady;
        --in_handshake_;
        session.err->release();
        start_more();
      }
      if (handlers_.ready) handlers_.ready(line.host);
      return;
    case ControlLine::Kind::kExit:
      if (own) {
        session.agent_reported = true;
        session.agent_code = line.code;
      } else if (handlers_.ended) {
        handlers_.ended(line.host, line.code, "");
      }
      return;
    case ControlLine::Kind::kFailed:
      if (handlers_.failed) handlers_.failed(line.host, line.code, line.text);
      return;
  }
}

void HostSessions::send(Session& session, std::shared_ptr<const std::string> bytes) {
  if (!session.in) return;
  session.to_write.push_back(std::move(bytes));
  if (!session.writing) write_next(session);
}

void HostSessions::write_next(Session& session) {
  if (session.to_write.empty() || !session.in) {
    session.writing = false;
    if (session.close_after_writes) close_stdin(session);
    return;
  }
  session.writing = true;
  auto bytes = session.to_write.front();
  asio::async_write(*session.in, asio::buffer(*bytes),
                    [this, s = &session, bytes, alive = std::weak_ptr<int>(alive_)](
                        boost::system::error_code ec, size_t) {
                      if (!alive.lock()) return;
                      if (!s->to_write.empty()) s->to_write.pop_front();
                      if (ec) {  // ssh is gone: its end is reported by its exit
                        s->to_write.clear();
                        close_stdin(*s);
                        s->writing = false;
                        return;
                      }
                      write_next(*s);
                    });
}

void HostSessions::close_stdin(Session& session) {
  if (!session.in) return;
  if (session.writing) {
    session.close_after_writes = true;
    return;
  }
  boost::system::error_code ignored;
  session.in->close(ignored);
  session.in.reset();
}

void HostSessions::stop(int sig) {
  const bool first = stopped_by_ == 0;
  stopped_by_ = sig;
  for (auto& owned : sessions_) {
    Session& session = *owned;
    switch (session.state) {
      case Session::State::kPending:
        if (first) {
          session.state = Session::State::kEnded;
          ++ended_;
        }
        break;
      case Session::State::kConnecting:
        // No agent runs there yet: hanging up ends the host-agent before it starts one.
        close_stdin(session);
        if (session.pid > 0) (void)::kill(-session.pid, SIGTERM);
        break;
      case Session::State::kStarting:
      case Session::State::kReady:
        send(session, std::make_shared<const std::string>(format_stop(sig)));
        break;
      case Session::State::kEnded:
        break;
    }
  }
  check_all_ended();
}

void HostSessions::check_all_ended() {
  if (ended_ == sessions_.size() && !all_ended_ && handlers_.all_ended) {
    all_ended_ = true;
    handlers_.all_ended();
  }
}

void HostSessions::hang_up() {
  for (auto& session : sessions_) close_stdin(*session);
}

void HostSessions::maybe_finish(Session& session) {
  if (session.exited && session.open_outputs == 0 && session.state != Session::State::kEnded)
    finish(session);
}

void HostSessions::finish(Session& session) {
  session.drain.cancel();
  close_stdin(session);
  const bool started = session.state == Session::State::kReady;
  if (session.state == Session::State::kConnecting || session.state == Session::State::kStarting)
    --in_handshake_;
  session.state = Session::State::kEnded;
  ++ended_;
  const std::string said = session.err ? last_words(session.err->held()) : "";
  if (started) {
    if (session.err) session.err->release();
    if (handlers_.ended) {
      if (session.agent_reported) {
        handlers_.ended(session.start.name, session.agent_code, "");
      } else {
        handlers_.ended(session.start.name, session.exit_code,
                        fmt::format("the ssh session ended (ssh's exit status {}) before the "
                                    "agent said how it ended{}{}",
                                    session.exit_code, said.empty() ? "" : ": ", said));
      }
    }
  } else if (stopped_by_ != 0) {
    if (handlers_.ended)
      handlers_.ended(session.start.name, session.exit_code, "stopped before its agent started");
  } else if (handlers_.failed) {
    handlers_.failed(
        session.start.name, session.exit_code,
        said.empty() ? fmt::format("ssh exited with status {} and said nothing", session.exit_code)
                     : said);
  }
  start_more();
  check_all_ended();
}

}  // namespace npu_run
