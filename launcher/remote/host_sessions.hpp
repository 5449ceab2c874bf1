// HostSessions: the ssh sessions that start and carry the agents of a launch over ssh, at most
// `fanout` of them in their handshake at once (as pdsh's fan-out), every one kept open for the
// whole job: its stdin is the host's control channel (preamble, stop lines; EOF = the launcher
// is gone), its stdout and stderr bring the host's output and control lines back. Used by the
// launching npu_run for its hosts and by a host-agent for the hosts it starts (--ssh-tree).
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace npu_run {

class ChildExits;

// One host to start: its ssh command and the line it is sent once its host-agent says hello.
struct HostStart {
  std::string name;
  std::vector<std::string> argv;  // ssh ..., program first
  std::string preamble;           // one line, with its '\n'
  bool ship_binary = false;       // answer "need" with `binary`
};

class HostSessions {
 public:
  struct Handlers {
    // The host's agent runs (for this one's hosts and, forwarded, the hosts they start).
    std::function<void(const std::string& host)> ready;
    // The host's agent ended with `code` (from the agent; 255 when ssh lost it).
    std::function<void(const std::string& host, int code, const std::string& why)> ended;
    // The host could not be started: ssh's exit code and the last of what it said.
    std::function<void(const std::string& host, int code, const std::string& why)> failed;
    // Every ssh process has ended.
    std::function<void()> all_ended;
  };

  // `binary` (nullptr: none) is sent to a host with ship_binary that asks for it. With
  // `first_alone` the first host is started alone, the others once its agent runs: the
  // launcher's first host is node 0, which hosts the rendezvous, and agents started before it
  // would sit in their connect backoff (up to 2 s) until its server is up.
  HostSessions(boost::asio::io_context& io, ChildExits& exits, std::vector<HostStart> hosts,
               int fanout, std::shared_ptr<const std::string> binary, Handlers handlers,
               bool first_alone = false);
  ~HostSessions();
  HostSessions(const HostSessions&) = delete;
  HostSessions& operator=(const HostSessions&) = delete;

  void start();
  // Stops the job as signal `sig` would: hosts not started yet never are, a host whose agent
  // has not started is hung up on, the others are sent "stop SIG".
  void stop(int sig);
  // Closes every host's stdin: each agent stops as if its parent had died.
  void hang_up();

 private:
  struct Session;
  void start_more();
  void spawn(Session& session);
  void on_control(Session& session, const struct ControlLine& line);
  void send(Session& session, std::shared_ptr<const std::string> bytes);
  void write_next(Session& session);
  void close_stdin(Session& session);
  void maybe_finish(Session& session);
  void finish(Session& session);
  void check_all_ended();

  boost::asio::io_context& io_;
  ChildExits& exits_;
  int fanout_;
  bool first_alone_;
  std::shared_ptr<const std::string> binary_;
  Handlers handlers_;
  std::vector<std::unique_ptr<Session>> sessions_;
  size_t next_ = 0;  // the first host not started yet
  size_t in_handshake_ = 0;
  size_t ended_ = 0;
  int stopped_by_ = 0;
  bool all_ended_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace npu_run
