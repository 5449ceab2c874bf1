#include "agent/snapshots/snapshot_copy_client.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <map>
#include <optional>
#include <set>

#include "agent/snapshots/copy_stream.hpp"

namespace npu_run {
namespace {

using json = nlohmann::json;

std::string answer_error(const json& answer) {
  const auto it = answer.find("error");
  return it != answer.end() && it->is_string() ? it->get<std::string>().substr(0, 512)
                                               : std::string("refused");
}

}  // namespace

struct SnapshotCopyClient::Impl : std::enable_shared_from_this<Impl> {
  Impl(boost::asio::io_context& context, std::string key_text, std::string run, Sent on_sent)
      : io(context), key(std::move(key_text)), run_id(std::move(run)), sent(std::move(on_sent)) {}

  using Step = std::function<void(const std::shared_ptr<Impl>&)>;
  // A continuation of the copy in flight: dropped when the client or that connection is gone.
  auto guard(Step step) {
    return [weak = weak_from_this(), gen = generation,
            step = std::move(step)](const std::string& error) {
      auto self = weak.lock();
      if (!self || gen != self->generation) return;
      if (!error.empty()) return self->broken(error);
      step(self);
    };
  }

  void copy(Copy c) {
    if (target.port == 0) return sent(c, "no next node to copy to");
    const auto it = waiting.find(c.rank);
    if (it == waiting.end()) {
      waiting.emplace(c.rank, std::move(c));
    } else {
      Copy old = std::exchange(it->second, std::move(c));
      sent(old, "superseded");
    }
    pump();
  }

  void pump() {
    if (current || connecting || waiting.empty()) return;
    if (!stream) return connect();
    current = std::move(waiting.begin()->second);
    waiting.erase(waiting.begin());
    put_header();
  }

  void connect() {
    connecting = true;
    CopyStream::connect(io, target.addr, target.port, kCopyStall,
                        [weak = weak_from_this(), gen = generation](
                            const std::string& error, const std::shared_ptr<CopyStream>& s) {
                          auto self = weak.lock();
                          if (!self || gen != self->generation) {
                            if (s) s->close();
                            return;
                          }
                          if (!error.empty()) return self->broken(error);
                          self->stream = s;
                          s->offer_proof(self->key, self->run_id, self->guard([](const auto& me) {
                            me->connecting = false;
                            me->pump();
                          }));
                        });
  }

  void put_header() {
    const Copy& c = *current;
    file = ::open(c.file.c_str(), O_RDONLY | O_CLOEXEC);
    if (file < 0) return finish(fmt::format("cannot read {}", c.file));
    stream->send({{"op", "put"},
                  {"rank", c.rank},
                  {"step", c.step},
                  {"world_size", c.world_size},
                  {"bytes", c.bytes}},
                 guard([](const auto& me) { me->put_answer(); }));
  }

  using Answered = std::function<void(const std::shared_ptr<Impl>&, const json&)>;
  // As guard(), for an answer the next agent sends.
  auto guard_answer(Answered step) {
    return [weak = weak_from_this(), gen = generation, step = std::move(step)](
               const std::string& error, const json& answer) {
      auto self = weak.lock();
      if (!self || gen != self->generation) return;
      if (!error.empty()) return self->broken(error);
      step(self, answer);
    };
  }

  void put_answer() {
    stream->receive(guard_answer([](const auto& self, const json& answer) {
      if (!copy_ok(answer)) return self->finish(answer_error(answer));
      self->stream->send_from(self->file, self->current->bytes,
                              self->guard([](const auto& me) { me->put_done(); }));
    }));
  }

  void put_done() {
    stream->receive(guard_answer([](const auto& self, const json& answer) {
      self->finish(copy_ok(answer) ? "" : answer_error(answer));
    }));
  }

  void finish(const std::string& error) {
    close_file();
    Copy done = std::move(*current);
    current.reset();
    sent(done, error);
    pump();
  }

  // The connection failed: the copy in flight and those waiting are let go (the next snapshot
  // tries again), said once per next node unless the ring moved on (`quiet`).
  void broken(const std::string& error, bool quiet = false) {
    ++generation;
    connecting = false;
    close_file();
    if (stream) stream->close();
    stream.reset();
    const std::string where = fmt::format("{} ({}:{})", target.host, target.addr, target.port);
    if (!quiet && warned != where) {
      spdlog::warn("snapshot copies to {} fail: {}; the next snapshot tries again", where, error);
      warned = where;
    }
    std::vector<Copy> lost;
    if (current) lost.push_back(std::move(*current));
    current.reset();
    for (auto& [rank, c] : waiting) lost.push_back(std::move(c));
    waiting.clear();
    for (const Copy& c : lost) sent(c, error);
  }

  void close_file() {
    if (file >= 0) ::close(file);
    file = -1;
  }

  void send_to(const rdzv::CopyPeer& peer) {
    if (peer.addr == target.addr && peer.port == target.port) return;
    if (stream || connecting || current || !waiting.empty()) broken("the ring changed", true);
    target = peer;
    warned.clear();
  }

  void shut() {
    ++generation;
    close_file();
    if (stream) stream->close();
    for (const auto& s : fetches) s->close();
    fetches.clear();
  }

  boost::asio::io_context& io;
  std::string key;
  std::string run_id;
  Sent sent;
  rdzv::CopyPeer target;
  std::map<int, Copy> waiting;  // by rank: the newest of each
  std::optional<Copy> current;
  int file = -1;  // current's segment, open while it is sent
  std::shared_ptr<CopyStream> stream;
  bool connecting = false;
  uint64_t generation = 0;  // a callback of an older connection is stale
  std::string warned;       // the next node a failure was said for
  std::set<std::shared_ptr<CopyStream>> fetches;
};

namespace {

// One fetch: connect, prove, ask, receive into the file.
struct CopyFetch : std::enable_shared_from_this<CopyFetch> {
  int rank = 0;
  int64_t step = 0;
  uint64_t max_bytes = 0;
  std::string file;
  uint64_t bytes = 0;
  int fd = -1;
  bool ended = false;
  std::shared_ptr<CopyStream> stream;
  std::function<void(const std::string& error)> end;  // once

  ~CopyFetch() {
    if (fd >= 0) ::close(fd);
  }

  void ask() {
    stream->send({{"op", "get"}, {"rank", rank}, {"step", step}},
                 [self = shared_from_this()](const std::string& error) {
                   if (!error.empty()) return self->end(error);
                   self->stream->receive([self](const std::string& e, const json& answer) {
                     if (!e.empty()) return self->end(e);
                     self->receive(answer);
                   });
                 });
  }

  void receive(const json& answer) {
    if (!copy_ok(answer)) return end(answer_error(answer));
    const auto size = answer.find("bytes");
    if (size == answer.end() || !size->is_number_unsigned() || size->get<uint64_t>() > max_bytes)
      return end(
          fmt::format("its copy is larger than the {} bytes this node has room for", max_bytes));
    bytes = size->get<uint64_t>();
    fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return end(fmt::format("cannot make {}", file));
    stream->receive_into(fd, bytes, [self = shared_from_this()](const std::string& error) {
      ::close(self->fd);
      self->fd = -1;
      self->end(error);
    });
  }
};

}  // namespace

void SnapshotCopyClient::fetch(const rdzv::CopyPeer& from, int rank, int64_t step,
                               uint64_t max_bytes, const std::string& file, Fetched done) {
  auto job = std::make_shared<CopyFetch>();
  job->rank = rank;
  job->step = step;
  job->max_bytes = max_bytes;
  job->file = file;
  const std::string where = fmt::format("{} ({}:{})", from.host, from.addr, from.port);
  // Ends once: the caller hears it only while the client lives.
  job->end = [weak = std::weak_ptr<Impl>(impl_), job_weak = std::weak_ptr<CopyFetch>(job), where,
              done = std::move(done)](const std::string& error) {
    auto self = weak.lock();
    auto me = job_weak.lock();
    if (!self || !me || me->ended) return;
    me->ended = true;
    if (me->stream) {
      self->fetches.erase(me->stream);
      me->stream->close();
    }
    done(error.empty() ? "" : where + ": " + error, me->bytes);
  };
  CopyStream::connect(impl_->io, from.addr, from.port, kCopyStall,
                      [weak = std::weak_ptr<Impl>(impl_), job, where](
                          const std::string& error, const std::shared_ptr<CopyStream>& s) {
                        auto self = weak.lock();
                        if (!self) {
                          if (s) s->close();
                          return;
                        }
                        if (!error.empty()) return job->end(error);
                        job->stream = s;
                        self->fetches.insert(s);
                        s->offer_proof(self->key, self->run_id, [job](const std::string& e) {
                          if (!e.empty()) return job->end(e);
                          job->ask();
                        });
                      });
}

SnapshotCopyClient::SnapshotCopyClient(boost::asio::io_context& io, std::string key,
                                       std::string run_id, Sent sent)
    : impl_(std::make_shared<Impl>(io, std::move(key), std::move(run_id), std::move(sent))) {}

SnapshotCopyClient::~SnapshotCopyClient() {
  impl_->shut();
}

void SnapshotCopyClient::send_to(const rdzv::CopyPeer& peer) {
  impl_->send_to(peer);
}

void SnapshotCopyClient::copy(Copy copy) {
  impl_->copy(std::move(copy));
}

}  // namespace npu_run
