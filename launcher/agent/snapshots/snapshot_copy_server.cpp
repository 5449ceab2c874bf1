#include "agent/snapshots/snapshot_copy_server.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <map>
#include <optional>
#include <stdexcept>

#include "agent/snapshots/copy_stream.hpp"
#include "net/accept_loop.hpp"
#include "net/cloexec_socket.hpp"

namespace npu_run {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using json = nlohmann::json;

constexpr size_t kMaxCopyConnections = 16;

// A file open for one transfer, closed with the last handler that holds it.
struct OpenFile {
  explicit OpenFile(int descriptor) : fd(descriptor) {}
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  int fd;
};

std::optional<int64_t> put_number(const json& request, const char* key, int64_t min) {
  const auto it = request.find(key);
  if (it == request.end() || !it->is_number_integer() || it->get<int64_t>() < min)
    return std::nullopt;
  return it->get<int64_t>();
}

json copy_refusal(const std::string& why) {
  return {{"ok", false}, {"error", why}};
}

}  // namespace

struct SnapshotCopyServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io, CopyKeeper& k, std::string key_text, std::string run)
      : keeper(k), key(std::move(key_text)), run_id(std::move(run)), listener(io) {
    boost::system::error_code ec;
    net::open_cloexec(listener, tcp::v6(), ec);
    if (!ec) listener.set_option(asio::ip::v6_only(false), ec);
    if (!ec) listener.bind(tcp::endpoint(tcp::v6(), 0), ec);
    if (ec) {  // no IPv6 on this host
      boost::system::error_code ignored;
      listener.close(ignored);
      ec.clear();
      net::open_cloexec(listener, tcp::v4(), ec);
      if (!ec) listener.bind(tcp::endpoint(tcp::v4(), 0), ec);
    }
    if (!ec) listener.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error("cannot open the snapshot copy port: " + ec.message());
  }

  void start() {
    accepting = net::AcceptLoop::start(listener, "snapshot copy port",
                                       [weak = weak_from_this()](tcp::socket socket) {
                                         if (auto self = weak.lock()) self->take(std::move(socket));
                                       });
  }

  void take(tcp::socket socket) {
    if (open.size() >= kMaxCopyConnections) return;  // closed as it goes out of scope
    const uint64_t id = next_id++;
    auto stream = std::make_shared<CopyStream>(std::move(socket), kCopyStall);
    open.emplace(id, stream);
    stream->demand_proof(key, run_id, [weak = weak_from_this(), id](const std::string& error) {
      auto self = weak.lock();
      if (!self) return;
      if (!error.empty()) return self->end(id, error);
      self->next(id);
    });
  }

  void next(uint64_t id) {
    const auto it = open.find(id);
    if (it == open.end()) return;
    it->second->receive([weak = weak_from_this(), id](const std::string& error, const json& ask) {
      auto self = weak.lock();
      if (!self) return;
      if (!error.empty()) return self->end(id, error);
      const std::string op = copy_text(ask, "op");
      if (op == "put") return self->put(id, ask);
      if (op == "get") return self->get(id, ask);
      self->end(id, "an unknown request");
    });
  }

  // Sends `answer`, then waits for the next request.
  void answer_then_next(uint64_t id, const json& answer) {
    const auto it = open.find(id);
    if (it == open.end()) return;
    it->second->send(answer, [weak = weak_from_this(), id](const std::string& error) {
      auto self = weak.lock();
      if (!self) return;
      if (!error.empty()) return self->end(id, error);
      self->next(id);
    });
  }

  void put(uint64_t id, const json& ask) {
    const auto rank = put_number(ask, "rank", 0);
    const auto step = put_number(ask, "step", 0);
    const auto world = put_number(ask, "world_size", 1);
    const auto bytes = put_number(ask, "bytes", 0);
    if (!rank || !step || !world || !bytes || *rank >= *world || *world > INT32_MAX)
      return end(id, "a put without a rank, a step, a world size and bytes");
    const CopyKeeper::Slot slot = keeper.copy_begins(
        static_cast<int>(*rank), *step, static_cast<uint64_t>(*bytes), static_cast<int>(*world));
    if (slot.file.empty()) return answer_then_next(id, copy_refusal(slot.error));
    auto file = std::make_shared<OpenFile>(
        ::open(slot.file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (file->fd < 0) {
      keeper.copy_ends(slot.file, false);
      return answer_then_next(id, copy_refusal(fmt::format("cannot make {}", slot.file)));
    }
    auto stream = open.at(id);
    stream->send({{"ok", true}}, [weak = weak_from_this(), id, stream, file, name = slot.file,
                                  size = static_cast<uint64_t>(*bytes)](const std::string& e) {
      auto self = weak.lock();
      if (!self) return;
      if (!e.empty()) return self->put_failed(id, name, e);
      stream->receive_into(file->fd, size, [weak, id, file, name](const std::string& error) {
        auto me = weak.lock();
        if (!me) return;
        if (!error.empty()) return me->put_failed(id, name, error);
        me->keeper.copy_ends(name, true);
        me->answer_then_next(id, {{"ok", true}});
      });
    });
  }

  void put_failed(uint64_t id, const std::string& name, const std::string& why) {
    keeper.copy_ends(name, false);
    end(id, why);
  }

  void get(uint64_t id, const json& ask) {
    const auto rank = put_number(ask, "rank", 0);
    const auto step = put_number(ask, "step", 0);
    if (!rank || !step || *rank > INT32_MAX) return end(id, "a get without a rank and a step");
    const CopyKeeper::Source source = keeper.copy_wanted(static_cast<int>(*rank), *step);
    if (source.file.empty()) return answer_then_next(id, copy_refusal(source.error));
    auto file = std::make_shared<OpenFile>(::open(source.file.c_str(), O_RDONLY | O_CLOEXEC));
    if (file->fd < 0) {
      keeper.copy_served(source.file);
      return answer_then_next(id, copy_refusal("the snapshot is gone"));
    }
    auto stream = open.at(id);
    stream->send({{"ok", true}, {"bytes", source.bytes}},
                 [weak = weak_from_this(), id, stream, file, source](const std::string& e) {
                   auto self = weak.lock();
                   if (!self) return;
                   if (!e.empty()) return self->served(id, source.file, e);
                   stream->send_from(file->fd, source.bytes,
                                     [weak, id, file, name = source.file](const std::string& er) {
                                       if (auto me = weak.lock()) me->served(id, name, er);
                                     });
                 });
  }

  void served(uint64_t id, const std::string& name, const std::string& error) {
    keeper.copy_served(name);
    if (!error.empty()) return end(id, error);
    next(id);
  }

  void end(uint64_t id, const std::string& why) {
    const auto it = open.find(id);
    if (it == open.end()) return;
    spdlog::debug("snapshot copy port: {}: {}", it->second->peer(), why);
    it->second->close();
    open.erase(it);
  }

  void close() {
    if (accepting) accepting->stop();
    boost::system::error_code ignored;
    listener.close(ignored);
    for (auto& [id, stream] : open) stream->close();
    open.clear();
  }

  CopyKeeper& keeper;
  std::string key;
  std::string run_id;
  tcp::acceptor listener;
  std::shared_ptr<net::AcceptLoop> accepting;
  std::map<uint64_t, std::shared_ptr<CopyStream>> open;
  uint64_t next_id = 1;
};

SnapshotCopyServer::SnapshotCopyServer(asio::io_context& io, CopyKeeper& keeper, std::string key,
                                       std::string run_id)
    : impl_(std::make_shared<Impl>(io, keeper, std::move(key), std::move(run_id))) {
  impl_->start();
}

SnapshotCopyServer::~SnapshotCopyServer() {
  impl_->close();
}

int SnapshotCopyServer::port() const {
  boost::system::error_code ec;
  const auto endpoint = impl_->listener.local_endpoint(ec);
  return ec ? 0 : endpoint.port();
}

}  // namespace npu_run
