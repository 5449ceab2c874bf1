#include "rendezvous/client/status_query.hpp"

#include <fmt/format.h>

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <optional>
#include <vector>

#include "net/cloexec_socket.hpp"
#include "rendezvous/protocol/auth.hpp"
#include "rendezvous/protocol/protocol.hpp"

namespace npu_run::rdzv {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// A failed step of the conversation, said in words.
struct Failed {
  std::string why;
};

// One connection driven step by step, each step bounded by the conversation's deadline: the
// io_context runs until the step completes or the deadline passes (then the socket is closed).
template <typename Socket>
class Conversation {
 public:
  Conversation(asio::io_context& io, Socket& socket, std::chrono::milliseconds timeout,
               std::string peer)
      : io_(io),
        socket_(socket),
        timeout_(timeout),
        deadline_(Clock::now() + timeout),
        peer_(std::move(peer)),
        decoder_(Limits::kMaxServerFrame) {}

  void send(const ClientMessage& message) {
    const std::string frame = encode_frame(encode(message));
    boost::system::error_code result = asio::error::would_block;
    asio::async_write(socket_, asio::buffer(frame),
                      [&](boost::system::error_code ec, size_t) { result = ec; });
    run_until_done(result, "send to");
  }

  ServerMessage receive() {
    while (frames_.empty()) {
      boost::system::error_code result = asio::error::would_block;
      size_t n = 0;
      socket_.async_read_some(asio::buffer(buffer_), [&](boost::system::error_code ec, size_t got) {
        result = ec;
        n = got;
      });
      run_until_done(result, "read from", /*eof_ok=*/true);
      if (n == 0) throw Failed{fmt::format("{} closed the connection without answering", peer_)};
      if (auto error = decoder_.feed(std::string_view(buffer_.data(), n), frames_))
        throw Failed{fmt::format("{} sent a bad frame: {}", peer_, error->message)};
    }
    std::string frame = std::move(frames_.front());
    frames_.erase(frames_.begin());
    auto decoded = decode_server_message(frame);
    if (auto* error = std::get_if<ProtocolError>(&decoded))
      throw Failed{fmt::format("{} sent a bad message: {}", peer_, error->message)};
    return std::get<ServerMessage>(std::move(decoded));
  }

  // Runs the io_context until `result` is set or the deadline passes.
  void run_until_done(boost::system::error_code& result, const char* what, bool eof_ok = false) {
    io_.restart();
    while (result == asio::error::would_block) {
      if (io_.run_one_until(deadline_) == 0) {
        boost::system::error_code ignored;
        socket_.close(ignored);  // the pending operation completes with operation_aborted
        io_.restart();
        io_.run();
        throw Failed{fmt::format("no answer from {} within {:g} s (--timeout)", peer_,
                                 std::chrono::duration<double>(timeout_).count())};
      }
    }
    if (result && !(eof_ok && result == asio::error::eof))
      throw Failed{fmt::format("cannot {} {}: {}", what, peer_, result.message())};
  }

 private:
  asio::io_context& io_;
  Socket& socket_;
  std::chrono::milliseconds timeout_;
  Clock::time_point deadline_;
  std::string peer_;
  FrameDecoder decoder_;
  std::vector<std::string> frames_;
  std::array<char, 64 * 1024> buffer_{};
};

// The answer to a StatusQuery, or the error the asked end sent instead.
template <typename Socket>
JobStatus await_status(Conversation<Socket>& talk, const std::string& peer) {
  while (true) {
    ServerMessage message = talk.receive();
    if (auto* status = std::get_if<JobStatus>(&message)) return std::move(*status);
    if (const auto* error = std::get_if<ErrorReply>(&message))
      throw Failed{fmt::format("{}: {}", peer, error->message)};
    // Anything else (an ack) is not the answer: keep reading.
  }
}

// hello, then the challenge when either end has a token, then the welcome.
template <typename Socket>
void handshake(Conversation<Socket>& talk, const std::string& peer, const std::string& run_id,
               const std::string& token) {
  const std::string nonce = token.empty() ? "" : random_nonce();
  talk.send(Hello{kMagic, kProtocolVersion, run_id, nonce, ""});
  bool challenged = false;
  while (true) {
    ServerMessage message = talk.receive();
    if (const auto* error = std::get_if<ErrorReply>(&message)) {
      // Said for `npu_run status`, not for an agent.
      if (error->code == "missing_token")
        throw Failed{
            fmt::format("{} needs the job's rendezvous token: give it with "
                        "--rdzv-token-file or NPU_RUN_RDZV_TOKEN",
                        peer)};
      if (error->code == "unexpected_token")
        throw Failed{
            fmt::format("{} has no token: leave out --rdzv-token-file and "
                        "NPU_RUN_RDZV_TOKEN",
                        peer)};
      throw Failed{fmt::format("{} refused: {}", peer, error->message)};
    }
    if (const auto* challenge = std::get_if<Challenge>(&message)) {
      if (token.empty()) {
        throw Failed{
            fmt::format("{} needs the job's rendezvous token: give it with "
                        "--rdzv-token-file or NPU_RUN_RDZV_TOKEN",
                        peer)};
      }
      if (!proofs_match(server_proof(token, run_id, nonce, challenge->nonce), challenge->proof))
        throw Failed{fmt::format("{} does not know this token; is it the job's rendezvous?", peer)};
      challenged = true;
      talk.send(Auth{agent_proof(token, run_id, challenge->nonce, nonce)});
      continue;
    }
    if (std::holds_alternative<Welcome>(message)) {
      if (!token.empty() && !challenged)
        throw Failed{fmt::format("{} asked for no token: it is not this job's rendezvous", peer)};
      return;
    }
    throw Failed{fmt::format("{} sent '{}' before its welcome", peer, message_name(message))};
  }
}

}  // namespace

StatusResult query_rendezvous_status(const std::string& host, int port, const std::string& run_id,
                                     const std::string& token, std::chrono::milliseconds timeout,
                                     bool dump) {
  const std::string peer = fmt::format("the rendezvous at {}:{}", host, port);
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  try {
    asio::ip::tcp::resolver resolver(io);
    boost::system::error_code ec;
    const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
    if (ec) {
      throw Failed{
          fmt::format("cannot resolve --master-addr '{}': {}; give the address the "
                      "agents were given",
                      host, ec.message())};
    }
    Conversation<asio::ip::tcp::socket> talk(io, socket, timeout, peer);
    // Each address in turn, on a close-on-exec socket of its own (net/cloexec_socket.hpp).
    std::optional<Failed> last;
    for (const auto& entry : endpoints) {
      boost::system::error_code ignored;
      socket.close(ignored);
      net::open_cloexec(socket, entry.endpoint().protocol(), ec);
      if (ec) throw Failed{fmt::format("cannot open a socket: {}", ec.message())};
      boost::system::error_code connected = asio::error::would_block;
      socket.async_connect(entry.endpoint(), [&](boost::system::error_code e) { connected = e; });
      try {
        talk.run_until_done(connected, "connect to");
        last.reset();
        break;
      } catch (const Failed& f) {
        last = f;
      }
    }
    if (last) {
      throw Failed{last->why +
                   "; is the job running, and are these the agents' --master-addr and "
                   "--master-port?"};
    }
    handshake(talk, peer, run_id, token);
    talk.send(StatusQuery{1, dump});
    return await_status(talk, peer);
  } catch (const Failed& f) {
    return f.why;
  }
}

StatusResult query_agent_status(const std::string& path, std::chrono::milliseconds timeout) {
  const std::string peer = fmt::format("the agent's socket {}", path);
  asio::io_context io;
  asio::local::stream_protocol::socket socket(io);
  try {
    boost::system::error_code connected = asio::error::would_block;
    net::open_cloexec(socket, asio::local::stream_protocol(), connected);
    if (connected) throw Failed{fmt::format("cannot open a socket: {}", connected.message())};
    connected = asio::error::would_block;
    socket.async_connect(asio::local::stream_protocol::endpoint(path),
                         [&](boost::system::error_code e) { connected = e; });
    Conversation<asio::local::stream_protocol::socket> talk(io, socket, timeout, peer);
    talk.run_until_done(connected, "connect to");
    return await_status(talk, peer);
  } catch (const Failed& f) {
    return f.why;
  }
}

}  // namespace npu_run::rdzv
