#include "rendezvous/server.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <fstream>
#include <unordered_map>

#include "net/kernel_limits.hpp"
#include "rendezvous/describe.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/stranger_log.hpp"

namespace npu_run::rdzv {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// Thousands of agents need thousands of descriptors; the hard limit is what we may use.
void raise_open_files_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

double seconds(milliseconds d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

std::string kernel_limit_warning(int nodes) {
  const auto queues = kernel_queues();
  std::vector<KernelQueue> small;
  std::vector<std::string> values;
  for (const KernelQueue& q : queues) {
    values.push_back(
        fmt::format("{} is {}", q.key, q.value ? std::to_string(*q.value) : "unknown"));
    if (q.value && *q.value < nodes) small.push_back(q);
  }
  if (small.empty()) return "";
  return fmt::format(
      "{}: fewer than the {} agents that connect at once, so their connections will be retried and "
      "the "
      "rendezvous slows down. To fix, run as root: {}",
      fmt::join(values, " and "), nodes, sysctl_fix(small, nodes));
}

// One agent's connection: reads frames into the state machine, writes whatever it is sent.
class Session : public std::enable_shared_from_this<Session> {
 public:
  using FrameHandler =
      std::function<void(ClientId, std::vector<std::string>&, std::optional<ProtocolError>)>;
  using CloseHandler = std::function<void(ClientId)>;

  using TimeoutHandler = std::function<void(ClientId)>;

  Session(tcp::socket socket, ClientId id)
      : socket_(std::move(socket)), id_(id), handshake_deadline_(socket_.get_executor()) {}

  void start(FrameHandler on_frames, CloseHandler on_close, milliseconds handshake_timeout,
             TimeoutHandler on_handshake_timeout) {
    on_frames_ = std::move(on_frames);
    on_close_ = std::move(on_close);
    boost::system::error_code ec;
    const auto remote = socket_.remote_endpoint(ec);
    peer_ = ec ? "unknown peer" : fmt::format("{}:{}", remote.address().to_string(), remote.port());
    socket_.set_option(tcp::no_delay(true), ec);
    handshake_deadline_.expires_after(handshake_timeout);
    handshake_deadline_.async_wait(
        [weak = std::weak_ptr<Session>(shared_from_this()),
         handler = std::move(on_handshake_timeout)](boost::system::error_code wait_ec) {
          auto self = weak.lock();
          if (wait_ec || !self || self->closed_ || self->authenticated_) return;
          handler(self->id_);
        });
    read();
  }

  // Welcomed: the agent may now send full-size frames, and its liveness is the state machine's
  // heartbeat deadline instead of the handshake deadline.
  void authenticate() {
    authenticated_ = true;
    decoder_.set_max_frame(Limits::kMaxClientFrame);
    handshake_deadline_.cancel();
  }
  bool authenticated() const { return authenticated_; }

  void send(std::shared_ptr<const std::string> frame, bool close_after) {
    if (closed_) return;
    queue_.push_back(std::move(frame));
    close_after_ = close_after_ || close_after;
    if (queue_.size() == 1) write();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    handshake_deadline_.cancel();
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    if (on_close_) on_close_(id_);
    on_close_ = nullptr;
    on_frames_ = nullptr;
  }

  const std::string& peer() const { return peer_; }

 private:
  void read() {
    socket_.async_read_some(
        asio::buffer(buffer_), [self = shared_from_this()](boost::system::error_code ec, size_t n) {
          if (self->closed_) return;
          if (ec) {
            self->close();
            return;
          }
          std::vector<std::string> frames;
          auto error = self->decoder_.feed(std::string_view(self->buffer_.data(), n), frames);
          self->on_frames_(self->id_, frames, std::move(error));
          if (!self->closed_ && !self->close_after_) self->read();
        });
  }

  void write() {
    asio::async_write(socket_, asio::buffer(*queue_.front()),
                      [self = shared_from_this()](boost::system::error_code ec, size_t) {
                        if (self->closed_) return;
                        if (ec) {
                          self->close();
                          return;
                        }
                        self->queue_.pop_front();
                        if (!self->queue_.empty())
                          self->write();
                        else if (self->close_after_)
                          self->close();
                      });
  }

  tcp::socket socket_;
  ClientId id_;
  std::string peer_;
  // Agents' frames are small: a 1 KiB read buffer keeps 16k idle sessions cheap.
  std::array<char, 1024> buffer_{};
  FrameDecoder decoder_{Limits::kMaxHandshakeFrame};
  asio::steady_timer handshake_deadline_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  bool authenticated_ = false;
  bool close_after_ = false;
  bool closed_ = false;
  FrameHandler on_frames_;
  CloseHandler on_close_;
};

struct RendezvousServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io_context, JobSettings job, ServerOptions opts)
      : io(io_context),
        options(std::move(opts)),
        state(std::move(job), now()),
        acceptor(io_context),
        tick_timer(io_context),
        retry_timer(io_context),
        barrier_timer(io_context) {}

  void bind() {
    raise_open_files_limit();
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(options.bind_addr, ec);
    if (ec) {
      throw BindError(
          fmt::format("rendezvous server: '{}' is not an IP address", options.bind_addr), false,
          true);
    }
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
    acceptor.open(endpoint.protocol(), ec);
    // SO_REUSEADDR: a job restarted right after the last one must not wait out TIME_WAIT.
    if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (ec) {
      const bool in_use = ec == asio::error::address_in_use;
      const bool not_local = ec == boost::system::errc::address_not_available;
      throw BindError(fmt::format("rendezvous server: cannot bind {}:{}: {}", options.bind_addr,
                                  options.port, ec.message()),
                      in_use, not_local);
    }
    // The kernel caps any backlog at net.core.somaxconn; asking for exactly that is the most.
    const auto somaxconn = kernel_queues().front().value;
    listen_backlog =
        options.backlog > 0 ? options.backlog : static_cast<int>(somaxconn.value_or(4096));
    acceptor.listen(listen_backlog, ec);
    // With SO_REUSEADDR, Linux may let bind() succeed next to a listening socket and report the
    // clash only here.
    if (ec) {
      throw BindError(fmt::format("rendezvous server: cannot listen on {}:{}: {}",
                                  options.bind_addr, options.port, ec.message()),
                      ec == asio::error::address_in_use, false);
    }
  }

  void start(DoneHandler handler) {
    on_done = std::move(handler);
    const auto& s = state.settings();
    spdlog::info("rendezvous server on {}:{} for {} node{} (run id '{}', backlog {})",
                 options.bind_addr, port(), s.max_nodes, s.max_nodes == 1 ? "" : "s", s.run_id,
                 listen_backlog);
    if (const std::string warning = kernel_limit_warning(s.max_nodes); !warning.empty())
      spdlog::warn("{}", warning);
    accept();
    schedule_tick();
  }

  int port() const {
    boost::system::error_code ec;
    return acceptor.local_endpoint(ec).port();
  }

  void accept() {
    acceptor.async_accept(
        [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
          if (!self->acceptor.is_open()) return;
          if (ec) {
            // Out of descriptors (EMFILE/ENFILE) or a transient error: pause instead of spinning.
            spdlog::warn("rendezvous server: accept failed: {}; retrying in 100 ms", ec.message());
            self->retry_timer.expires_after(std::chrono::milliseconds(100));
            self->retry_timer.async_wait([self](boost::system::error_code wait_ec) {
              if (!wait_ec) self->accept();
            });
            return;
          }
          self->add_session(std::move(socket));
          self->accept();
        });
  }

  void add_session(tcp::socket socket) {
    const ClientId id = next_id++;
    auto session = std::make_shared<Session>(std::move(socket), id);
    sessions.emplace(id, session);
    handshaking.push_back(id);
    ++handshaking_count;
    std::weak_ptr<Impl> weak = shared_from_this();
    session->start(
        [weak](ClientId from, std::vector<std::string>& frames,
               std::optional<ProtocolError> error) {
          if (auto self = weak.lock()) self->on_frames(from, frames, std::move(error));
        },
        [weak](ClientId closed) {
          if (auto self = weak.lock()) self->on_closed(closed);
        },
        options.handshake_timeout,
        [weak](ClientId late) {
          if (auto self = weak.lock()) {
            self->drop_stranger(
                late, fmt::format(
                          "no {} within {:.1f} s",
                          self->state.settings().token.empty() ? "hello" : "hello and token proof",
                          seconds(self->options.handshake_timeout)));
          }
        });
    if (handshaking_count > handshake_cap()) evict_oldest_stranger();
  }

  size_t handshake_cap() const {
    if (options.max_unauthenticated > 0) return options.max_unauthenticated;
    return std::max<size_t>(1024, 2 * static_cast<size_t>(state.settings().max_nodes));
  }

  // Over the cap the oldest handshake goes, not the newest: a real agent's handshake takes a
  // round trip or two, so it is never the oldest for long, while idle strangers always are.
  void evict_oldest_stranger() {
    while (!handshaking.empty()) {
      const ClientId oldest = handshaking.front();
      handshaking.pop_front();
      const auto it = sessions.find(oldest);
      if (it == sessions.end() || it->second->authenticated()) continue;  // gone or welcomed
      drop_stranger(oldest, fmt::format("more than {} connections without a finished handshake; "
                                        "closed the oldest",
                                        handshake_cap()));
      return;
    }
  }

  void drop_stranger(ClientId id, const std::string& why) {
    const auto it = sessions.find(id);
    if (it == sessions.end()) return;
    strangers.record(fmt::format("dropped {}: {}", it->second->peer(), why), Clock::now());
    dropping = id;  // on_closed: we hung up, not the peer
    it->second->close();
    dropping = 0;
  }

  // Welcomed connections leave the handshake count; the queue forgets them lazily.
  void mark_authenticated(ClientId id) {
    const auto it = sessions.find(id);
    if (it == sessions.end() || it->second->authenticated()) return;
    it->second->authenticate();
    --handshaking_count;
    if (handshaking.size() > 2 * handshaking_count + 1024) {
      std::erase_if(handshaking, [this](ClientId h) {
        const auto s = sessions.find(h);
        return s == sessions.end() || s->second->authenticated();
      });
    }
  }

  void on_frames(ClientId from, std::vector<std::string>& frames,
                 std::optional<ProtocolError> error) {
    for (const std::string& frame : frames) {
      auto decoded = decode_client_message(frame);
      if (auto* bad = std::get_if<ProtocolError>(&decoded)) {
        error = std::move(*bad);
        break;
      }
      dispatch(state.on_message(from, std::get<ClientMessage>(decoded), now()));
      if (sessions.find(from) == sessions.end()) return;  // rejected and closed
    }
    if (error) {
      const auto it = sessions.find(from);
      if (it != sessions.end()) {
        if (it->second->authenticated())
          spdlog::warn("rendezvous server: dropping {}: {}", it->second->peer(), error->message);
        else
          strangers.record(fmt::format("dropped {}: {}", it->second->peer(), error->message),
                           Clock::now());
        auto frame = std::make_shared<const std::string>(
            encode_frame(encode(ServerMessage{ErrorReply{error->code, error->message}})));
        it->second->send(frame, true);
      }
    }
  }

  void on_closed(ClientId id) {
    const auto it = sessions.find(id);
    if (it != sessions.end() && !it->second->authenticated()) {
      --handshaking_count;
      // An agent with another token hangs up here: it checks the server's proof first.
      if (state.awaiting_proof(id) && id != dropping) {
        strangers.record(fmt::format("{} hung up instead of proving the token: it has a different "
                                     "token, or is not an npu_run agent",
                                     it->second->peer()),
                         Clock::now());
      }
    }
    sessions.erase(id);
    dispatch(state.on_disconnect(id, now()));
    check_done();
  }

  void dispatch(const std::vector<Outgoing>& outgoing) {
    for (const Outgoing& o : outgoing) {
      log(o);
      if (std::holds_alternative<Welcome>(o.message)) {
        for (ClientId id : o.to) mark_authenticated(id);
      }
      // Serialized once; every recipient's queue shares the same bytes.
      auto frame = std::make_shared<const std::string>(encode_frame(encode(o.message)));
      for (ClientId id : o.to) {
        const auto it = sessions.find(id);
        if (it != sessions.end()) it->second->send(frame, o.close_after);
      }
    }
    if (state.phase() == RendezvousState::Phase::kFinished && !finished) {
      finished = true;
      barrier_timer.expires_after(options.exit_barrier_timeout);
      barrier_timer.async_wait([weak = std::weak_ptr<Impl>(shared_from_this())](
                                   boost::system::error_code ec) {
        auto self = weak.lock();
        if (ec || !self) return;
        spdlog::warn(
            "rendezvous server: {} agent(s) still connected {:.0f} s after the job ended; closing",
            self->sessions.size(),
            std::chrono::duration<double>(self->options.exit_barrier_timeout).count());
        self->shutdown();
      });
      check_done();
    }
  }

  void log(const Outgoing& o) {
    std::visit(
        [&](const auto& m) {
          using T = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<T, Assigned>) {
            if (m.node_rank == 0) {
              spdlog::info("round {}: all {} nodes joined; workers' store at {}:{}", m.round,
                           m.nnodes, m.master_addr, m.master_port);
            }
          } else if constexpr (std::is_same_v<T, StopWorkers>) {
            spdlog::warn("round {}: {}; stopping the other nodes", m.round, describe(m.root_cause));
          } else if constexpr (std::is_same_v<T, Reform>) {
            spdlog::info("round {}: {}; stopping every node", m.round, describe(m));
          } else if constexpr (std::is_same_v<T, Decision>) {
            if (m.action == Action::kRestart && m.membership_change) {
              spdlog::info("round {} stopped; the job re-forms in round {}", m.round, m.round + 1);
            } else if (m.action == Action::kRestart) {
              spdlog::warn("round {} failed; restart {} of {}", m.round, m.restart_count,
                           state.settings().max_restarts);
            } else {
              spdlog::info("job ended with exit code {}", m.exit_code);
            }
          } else if constexpr (std::is_same_v<T, ErrorReply>) {
            const auto it = o.to.size() == 1 ? sessions.find(o.to.front()) : sessions.end();
            if (it == sessions.end()) {
              spdlog::warn("rendezvous server: refused an agent: {}", m.message);
            } else if (it->second->authenticated()) {
              spdlog::warn("rendezvous server: refused {}: {}", it->second->peer(), m.message);
            } else {
              strangers.record(fmt::format("refused {}: {}", it->second->peer(), m.message),
                               Clock::now());
            }
          }
        },
        o.message);
  }

  void schedule_tick() {
    tick_timer.expires_after(std::chrono::milliseconds(250));
    tick_timer.async_wait(
        [weak = std::weak_ptr<Impl>(shared_from_this())](boost::system::error_code ec) {
          auto self = weak.lock();
          if (ec || !self || self->stopped) return;
          self->strangers.flush(Clock::now());
          self->dispatch(self->state.on_tick(now()));
          self->schedule_tick();
        });
  }

  void check_done() {
    if (finished && sessions.empty()) shutdown();
  }

  void shutdown() {
    if (stopped) return;
    stopped = true;
    strangers.flush(Clock::now(), true);  // what was only counted so far
    boost::system::error_code ignored;
    acceptor.close(ignored);
    tick_timer.cancel();
    retry_timer.cancel();
    barrier_timer.cancel();
    auto remaining = sessions;  // close() calls back into on_closed, which edits `sessions`
    for (auto& [id, session] : remaining) session->close();
    sessions.clear();
    if (on_done) {
      const Decision decision = state.final_decision().value_or(Decision{
          state.round(), Action::kFinish, state.restart_count(), kExitRendezvous, std::nullopt});
      auto handler = std::move(on_done);
      on_done = nullptr;
      asio::post(io, [handler = std::move(handler), decision] { handler(decision); });
    }
  }

  asio::io_context& io;
  ServerOptions options;
  RendezvousState state;
  tcp::acceptor acceptor;
  asio::steady_timer tick_timer;
  asio::steady_timer retry_timer;
  asio::steady_timer barrier_timer;
  std::unordered_map<ClientId, std::shared_ptr<Session>> sessions;
  // Connections in their handshake, oldest first (welcomed or closed ones are skipped lazily).
  std::deque<ClientId> handshaking;
  size_t handshaking_count = 0;
  ClientId dropping = 0;  // the stranger being closed by drop_stranger()
  StrangerLog strangers{std::chrono::seconds(5)};
  ClientId next_id = 1;
  int listen_backlog = 0;
  bool finished = false;
  bool stopped = false;
  DoneHandler on_done;
};

RendezvousServer::RendezvousServer(asio::io_context& io, JobSettings settings,
                                   ServerOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(settings), std::move(options))) {
  impl_->bind();
}

RendezvousServer::~RendezvousServer() {
  impl_->on_done = nullptr;
  impl_->shutdown();
}

int RendezvousServer::port() const {
  return impl_->port();
}
int RendezvousServer::backlog() const {
  return impl_->listen_backlog;
}
void RendezvousServer::start(DoneHandler on_done) {
  impl_->start(std::move(on_done));
}
void RendezvousServer::stop() {
  impl_->shutdown();
}
bool RendezvousServer::job_finished() const {
  return impl_->finished;
}
bool RendezvousServer::round_in_progress() const {
  const auto phase = impl_->state.phase();
  return phase == RendezvousState::Phase::kRunning || phase == RendezvousState::Phase::kStopping;
}
size_t RendezvousServer::connections() const {
  return impl_->sessions.size();
}

}  // namespace npu_run::rdzv
