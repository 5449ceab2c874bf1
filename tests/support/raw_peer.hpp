// A raw TCP connection to a rendezvous server on 127.0.0.1, for tests that speak the protocol
// by hand (or not at all): blocking sends, replies read with a deadline. Closed on destruction.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/protocol/protocol.hpp"

namespace npu_run::testing {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

class Raw {
 public:
  explicit Raw(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~Raw() {
    if (fd_ >= 0) ::close(fd_);
  }
  Raw(Raw&& other) noexcept
      : fd_(other.fd_),
        connected_(other.connected_),
        decoder_(std::move(other.decoder_)),
        frames_(std::move(other.frames_)) {
    other.fd_ = -1;
  }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  bool connected() const { return connected_; }
  bool send(std::string_view bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  bool send(const rdzv::ClientMessage& m) { return send(rdzv::encode_frame(rdzv::encode(m))); }

  // The next frame from the server; nullopt when it closed the connection or `timeout` passed.
  std::optional<rdzv::ServerMessage> reply(milliseconds timeout = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (frames_.empty()) {
      std::string chunk;
      if (!read_some(chunk, deadline)) return std::nullopt;
      if (decoder_.feed(chunk, frames_)) return std::nullopt;
    }
    auto decoded = rdzv::decode_server_message(frames_.front());
    frames_.erase(frames_.begin());
    if (std::holds_alternative<rdzv::ProtocolError>(decoded)) return std::nullopt;
    return std::get<rdzv::ServerMessage>(decoded);
  }
  std::string error_code(milliseconds timeout = 5s) {
    const auto m = reply(timeout);
    const auto* e = m ? std::get_if<rdzv::ErrorReply>(&*m) : nullptr;
    return e ? e->code : "(no error reply)";
  }
  // True when the server closes the connection (EOF or reset) within `timeout`; what it sent
  // before closing is skipped.
  bool closed_within(milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string chunk;
    while (read_some(chunk, deadline)) chunk.clear();
    return std::chrono::steady_clock::now() < deadline;
  }
  // Exactly `n` bytes from the server (not frames: another protocol's answer), or nullopt when
  // it closed the connection or `timeout` passed first.
  std::optional<std::string> read_bytes(size_t n, milliseconds timeout = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string out;
    while (out.size() < n) {
      if (!read_some(out, deadline)) return std::nullopt;
    }
    return out;  // the tests ask for whole answers; a longer read would be the peer's error
  }
  // Closes with a reset (SO_LINGER 0) instead of a FIN.
  void reset() {
    const linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd_);
    fd_ = -1;
  }

 private:
  // Appends what arrives; false on EOF, error or the deadline.
  bool read_some(std::string& out, std::chrono::steady_clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buffer[4096];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n <= 0) return false;
    out.append(buffer, static_cast<size_t>(n));
    return true;
  }

  int fd_;
  bool connected_ = false;
  rdzv::FrameDecoder decoder_{rdzv::Limits::kMaxServerFrame};
  std::vector<std::string> frames_;  // arrived, not yet returned by reply()
};

}  // namespace npu_run::testing
