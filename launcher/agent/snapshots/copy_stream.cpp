#include "agent/snapshots/copy_stream.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>

#include "net/cloexec_socket.hpp"
#include "rendezvous/protocol/auth.hpp"

namespace npu_run {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using json = nlohmann::json;

constexpr size_t kMaxCopyLine = 4096;
constexpr size_t kCopyChunk = size_t{1} << 20;

// Writes all of `data` to fd; "" or why not.
std::string write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::strerror(n < 0 ? errno : ENOSPC);
    data += n;
    size -= static_cast<size_t>(n);
  }
  return "";
}

}  // namespace

bool copy_ok(const json& answer) {
  const auto it = answer.find("ok");
  return it != answer.end() && it->is_boolean() && it->get<bool>();
}

std::string copy_text(const json& message, const char* key) {
  const auto it = message.find(key);
  return it != message.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string copy_key(const std::string& token) {
  return rdzv::hmac_sha256_hex(token, "npu_run snapshot copies");
}

CopyStream::CopyStream(tcp::socket socket, std::chrono::milliseconds stall)
    : socket_(std::move(socket)),
      deadline_(socket_.get_executor()),
      stall_(stall),
      input_(kMaxCopyLine + 1) {
  boost::system::error_code ec;
  const tcp::endpoint remote = socket_.remote_endpoint(ec);
  peer_ = ec ? std::string("a peer")
             : fmt::format("{}:{}", remote.address().to_string(), remote.port());
}

void CopyStream::connect(
    asio::io_context& io, const std::string& addr, int port, std::chrono::milliseconds stall,
    std::function<void(const std::string&, std::shared_ptr<CopyStream>)> done) {
  auto resolver = std::make_shared<tcp::resolver>(io);
  auto socket = std::make_shared<tcp::socket>(io);
  // A peer whose packets are dropped would keep a connect waiting for the kernel's SYN retries
  // (minutes): the stall bounds the resolve and the connect together.
  auto deadline = std::make_shared<asio::steady_timer>(io, stall);
  deadline->async_wait([resolver, socket](boost::system::error_code ec) {
    if (ec) return;
    resolver->cancel();
    boost::system::error_code ignored;
    socket->close(ignored);
  });
  const std::string where = fmt::format("{}:{}", addr, port);
  auto fail = [deadline, where](const auto& finish, const boost::system::error_code& ec) {
    deadline->cancel();
    finish(where + ": " + ec.message(), nullptr);
  };
  resolver->async_resolve(
      addr, std::to_string(port),
      [resolver, socket, deadline, fail, stall, done = std::move(done)](
          boost::system::error_code ec, const tcp::resolver::results_type& results) mutable {
        if (ec || results.empty()) return fail(done, ec);
        const tcp::endpoint endpoint = *results.begin();
        net::open_cloexec(*socket, endpoint.protocol(), ec);
        if (ec) return fail(done, ec);
        socket->async_connect(endpoint, [socket, deadline, fail, stall,
                                         done = std::move(done)](boost::system::error_code e) {
          if (e) return fail(done, e);
          deadline->cancel();
          done("", std::make_shared<CopyStream>(std::move(*socket), stall));
        });
      });
}

void CopyStream::arm(const char* what) {
  deadline_.expires_after(stall_);
  deadline_.async_wait([weak = weak_from_this(), what](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    self->stalled_ = fmt::format("no progress for {} ms while {}", self->stall_.count(), what);
    boost::system::error_code ignored;
    self->socket_.close(ignored);
  });
}

void CopyStream::disarm() {
  deadline_.cancel();
}

void CopyStream::fail(const Done& done, const std::string& what,
                      const boost::system::error_code& ec) {
  disarm();
  const std::string why = !stalled_.empty()        ? stalled_
                          : ec == asio::error::eof ? std::string("the peer closed the connection")
                                                   : ec.message();
  done(fmt::format("{} {}: {}", what, peer_, why));
}

void CopyStream::send(const json& message, Done done) {
  output_ = message.dump() + "\n";
  arm("sending");
  asio::async_write(socket_, asio::buffer(output_),
                    [self = shared_from_this(), done = std::move(done)](
                        boost::system::error_code ec, size_t /*n*/) {
                      if (ec) return self->fail(done, "sending to", ec);
                      self->disarm();
                      done("");
                    });
}

void CopyStream::receive(Received done) {
  arm("waiting for an answer");
  asio::async_read_until(
      socket_, input_, '\n',
      [self = shared_from_this(), done = std::move(done)](boost::system::error_code ec,
                                                          size_t length) {
        if (ec) {
          return self->fail([&](const std::string& e) { done(e, json()); }, "reading from", ec);
        }
        self->disarm();
        std::string line(asio::buffers_begin(self->input_.data()),
                         asio::buffers_begin(self->input_.data()) + static_cast<long>(length) - 1);
        self->input_.consume(length);
        json message = json::parse(line, nullptr, false);
        if (!message.is_object())
          return done(self->peer_ + " sent a line that is not JSON", json());
        done("", message);
      });
}

void CopyStream::receive_into(int fd, uint64_t bytes, Done done) {
  // What came with the last line first: a peer may send the bytes right behind it.
  const size_t buffered = std::min<uint64_t>(input_.size(), bytes);
  if (buffered > 0) {
    const std::string head(asio::buffers_begin(input_.data()),
                           asio::buffers_begin(input_.data()) + static_cast<long>(buffered));
    input_.consume(buffered);
    if (const std::string e = write_all(fd, head.data(), head.size()); !e.empty())
      return done("cannot keep the copy: " + e);
  }
  pump_in(fd, bytes - buffered, std::move(done));
}

void CopyStream::pump_in(int fd, uint64_t left, Done done) {
  if (left == 0) return done("");
  chunk_.resize(kCopyChunk);
  arm("receiving a snapshot");
  socket_.async_read_some(asio::buffer(chunk_.data(), std::min<uint64_t>(left, kCopyChunk)),
                          [self = shared_from_this(), fd, left, done = std::move(done)](
                              boost::system::error_code ec, size_t n) mutable {
                            if (ec) return self->fail(done, "receiving from", ec);
                            self->disarm();
                            if (const std::string e = write_all(fd, self->chunk_.data(), n);
                                !e.empty())
                              return done("cannot keep the copy: " + e);
                            self->pump_in(fd, left - n, std::move(done));
                          });
}

void CopyStream::send_from(int fd, uint64_t bytes, Done done) {
  pump_out(fd, 0, bytes, std::move(done));
}

void CopyStream::pump_out(int fd, uint64_t offset, uint64_t left, Done done) {
  if (left == 0) return done("");
  chunk_.resize(kCopyChunk);
  const ssize_t n =
      ::pread(fd, chunk_.data(), std::min<uint64_t>(left, kCopyChunk), static_cast<off_t>(offset));
  if (n <= 0)
    return done(fmt::format("cannot read the snapshot: {}",
                            n < 0 ? std::strerror(errno) : "it is shorter than said"));
  arm("sending a snapshot");
  asio::async_write(socket_, asio::buffer(chunk_.data(), static_cast<size_t>(n)),
                    [self = shared_from_this(), fd, offset, left, done = std::move(done)](
                        boost::system::error_code ec, size_t sent) mutable {
                      if (ec) return self->fail(done, "sending to", ec);
                      self->disarm();
                      self->pump_out(fd, offset + sent, left - sent, std::move(done));
                    });
}

void CopyStream::close() {
  disarm();
  boost::system::error_code ignored;
  socket_.close(ignored);
}

void CopyStream::offer_proof(const std::string& key, const std::string& run_id, const Done& done) {
  const std::string mine = rdzv::random_nonce();
  send({{"op", "hello"}, {"run_id", run_id}, {"nonce", mine}},
       [self = shared_from_this(), key, run_id, mine, done](const std::string& e) {
         if (!e.empty()) return done(e);
         self->receive([self, key, run_id, mine, done](const std::string& e2,
                                                       const json& challenge) {
           if (!e2.empty()) return done(e2);
           const std::string theirs = copy_text(challenge, "nonce");
           if (!rdzv::proofs_match(rdzv::server_proof(key, run_id, mine, theirs),
                                   copy_text(challenge, "proof")))
             return done(self->peer_ + " does not know this job's key: not one of its agents");
           self->send({{"op", "auth"}, {"proof", rdzv::agent_proof(key, run_id, theirs, mine)}},
                      [self, done](const std::string& e3) {
                        if (!e3.empty()) return done(e3);
                        self->receive([self, done](const std::string& e4, const json& welcome) {
                          if (!e4.empty()) return done(e4);
                          if (!copy_ok(welcome))
                            return done(self->peer_ + " refused: " + copy_text(welcome, "error"));
                          done("");
                        });
                      });
         });
       });
}

void CopyStream::demand_proof(const std::string& key, const std::string& run_id, const Done& done) {
  receive([self = shared_from_this(), key, run_id, done](const std::string& e, const json& hello) {
    if (!e.empty()) return done(e);
    if (copy_text(hello, "op") != "hello" || copy_text(hello, "run_id") != run_id)
      return done(self->peer_ + " is not an agent of this job (its hello names another)");
    const std::string theirs = copy_text(hello, "nonce");
    const std::string mine = rdzv::random_nonce();
    self->send({{"nonce", mine}, {"proof", rdzv::server_proof(key, run_id, theirs, mine)}},
               [self, key, run_id, theirs, mine, done](const std::string& e2) {
                 if (!e2.empty()) return done(e2);
                 self->receive([self, key, run_id, theirs, mine, done](const std::string& e3,
                                                                       const json& auth) {
                   if (!e3.empty()) return done(e3);
                   if (!rdzv::proofs_match(rdzv::agent_proof(key, run_id, mine, theirs),
                                           copy_text(auth, "proof"))) {
                     self->send({{"ok", false}, {"error", "bad proof"}}, [](const std::string&) {});
                     return done(self->peer_ + " does not know this job's key");
                   }
                   self->send({{"ok", true}}, done);
                 });
               });
  });
}

}  // namespace npu_run
