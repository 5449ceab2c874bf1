#include "store/store_server.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <unordered_map>
#include <vector>

#include "net/accept_loop.hpp"
#include "store/drop_log.hpp"
#include "store/key_value_store.hpp"
#include "store/local_clients.hpp"

namespace npu_run::store {

namespace {

// A tier holds a wait per distinct key set its workers wait on at once.
constexpr size_t kMaxTaggedWaits = size_t{1} << 20;

std::shared_ptr<const std::string> one_byte(uint8_t value) {
  return std::make_shared<const std::string>(1, static_cast<char>(value));
}

}  // namespace

struct StoreServer::Impl : std::enable_shared_from_this<Impl> {
  struct Session {
    std::shared_ptr<net::StreamConnection> connection;
    std::string first_bytes;  // until the generation is known
    std::optional<RequestDecoder> decoder;
    bool validated = false;  // torch 2.x: VALIDATE came first
    // Until the first byte (StoreServerOptions::silent_timeout).
    std::unique_ptr<boost::asio::steady_timer> silent;
    // A tier's parked waits: its tag -> the waiter id the key-value store knows.
    std::unordered_map<uint32_t, ClientId> tags;
  };

  // A tier's parked wait, by the waiter id it has in the key-value store.
  struct TaggedWait {
    ClientId session;
    uint32_t tag;
  };

  Impl(boost::asio::io_context& io_context, StoreServerOptions opts)
      : io(io_context), options(opts), values(opts.max_store_bytes) {}

  void adopt(const std::shared_ptr<net::StreamConnection>& connection, const std::string& first) {
    const ClientId id = next_id++;
    Session& session =
        sessions.emplace(id, Session{connection, {}, std::nullopt, false, {}, {}}).first->second;
    std::weak_ptr<Impl> weak = shared_from_this();
    if (first.empty() && connection->bytes_received() == 0) {
      session.silent = std::make_unique<boost::asio::steady_timer>(
          io, connection->opened_at() + options.silent_timeout);
      session.silent->async_wait([weak, id](boost::system::error_code ec) {
        if (auto self = weak.lock(); self && !ec) self->close_silent(id);
      });
    }
    connection->replace_handlers({[weak, id](std::string_view bytes) {
                                    if (auto self = weak.lock()) self->on_bytes(id, bytes);
                                  },
                                  [weak, id](const net::ConnectionClosed&) {
                                    if (auto self = weak.lock()) self->forget(id);
                                  }});
    if (!first.empty()) on_bytes(id, first);
  }

  void on_bytes(ClientId id, std::string_view bytes) {
    const auto it = sessions.find(id);
    if (it == sessions.end()) return;
    Session& session = it->second;
    session.silent.reset();  // cancels its wait
    if (!session.decoder) {
      session.first_bytes.append(bytes);
      const auto generation = detect_generation(session.first_bytes);
      if (!generation) return;
      session.decoder.emplace(*generation, options.limits);
      bytes = session.first_bytes;
    }
    std::vector<Request> requests;
    const auto error = session.decoder->feed(bytes, requests);
    session.first_bytes = std::string();
    std::string reply;
    for (const Request& request : requests) {
      if (!handle(id, session, request, reply)) return;  // closed
    }
    if (error) {
      drop(id, error->message);
      return;
    }
    if (!reply.empty())
      session.connection->send(std::make_shared<const std::string>(std::move(reply)));
  }

  // Answers one request into `reply`; false when the connection was closed for it.
  bool handle(ClientId id, Session& session, const Request& r, std::string& reply) {
    const Generation generation = session.decoder->generation();
    const bool tier = generation == Generation::kTier;
    if (generation != Generation::kTorch1 && !session.validated &&
        r.command != Command::kValidate) {
      drop(id, fmt::format("{} before the validation a {} client sends first",
                           command_name(r.command), generation_name(generation)));
      return false;
    }
    if (tier && (r.command == Command::kWait || r.command == Command::kCancelWait)) {
      drop(id, "an untagged wait from a tier, whose waits are tagged");
      return false;
    }
    std::vector<ClientId> woken;
    const size_t answer_at = reply.size();
    try {
      switch (r.command) {
        case Command::kValidate:
          if (r.number != (tier ? kTierMagic : kValidationMagic)) {
            drop(id, fmt::format("a validation with the wrong magic number {:#x}", r.number));
            return false;
          }
          session.validated = true;
          break;
        case Command::kWaitTagged:
          if (!wait_tagged(id, session, r, reply)) return false;
          break;
        case Command::kCancelTagged:
          if (const auto tag = session.tags.find(r.number); tag != session.tags.end()) {
            values.forget_wait(tag->second);
            tagged.erase(tag->second);
            session.tags.erase(tag);
          }
          break;
        case Command::kPing:
          append_u32(reply, r.number);
          break;
        case Command::kSet:
          values.set(r.keys[0], r.values[0], woken);
          break;
        case Command::kCompareSet:
          append_bytes(reply, values.compare_set(r.keys[0], r.values[0], r.values[1], woken));
          break;
        case Command::kGet:
          append_bytes(reply, values.get(r.keys[0]));
          break;
        case Command::kAdd:
          append_i64(reply, values.add(r.keys[0], r.delta, woken));
          break;
        case Command::kCheck:
          append_byte(reply, static_cast<uint8_t>(values.check(r.keys) ? CheckReply::kReady
                                                                       : CheckReply::kNotReady));
          break;
        case Command::kWait:
          if (values.wait(id, r.keys))
            append_byte(reply, static_cast<uint8_t>(WaitReply::kStopWaiting));
          break;
        case Command::kNumKeys:
          append_i64(reply, values.num_keys());
          break;
        case Command::kWatchKey:
          drop(id,
               "watch_key, which npu_run's store does not serve (torch 1.13's Python API "
               "never sends it)");
          return false;
        case Command::kDeleteKey:
          append_i64(reply, values.delete_key(r.keys[0]) ? 1 : 0);
          break;
        case Command::kAppend:
          values.append(r.keys[0], r.values[0], woken);
          break;
        case Command::kMultiGet:
          for (const auto& value : values.multi_get(r.keys)) append_bytes(reply, value);
          break;
        case Command::kMultiSet:
          values.multi_set(r.keys, r.values, woken);
          break;
        case Command::kCancelWait:
          values.forget_wait(id);
          append_byte(reply, static_cast<uint8_t>(WaitReply::kWaitCanceled));
          break;
      }
    } catch (const StoreRequestError& e) {
      if (!tier || !tier_answers(r.command)) {
        drop(id, e.what());
        return false;
      }
      // The worker behind the tier loses its connection, not the whole node.
      reply.resize(answer_at);
      append_byte(reply, static_cast<uint8_t>(TierReply::kRefused));
      append_bytes(reply, e.what());
      return true;
    }
    // A tier tells answers from wake-ups by the byte before each.
    if (tier && tier_answers(r.command))
      reply.insert(reply.begin() + static_cast<std::ptrdiff_t>(answer_at),
                   static_cast<char>(TierReply::kAnswer));
    // Woken waiters hear it now; this client's own answer goes with the rest of its replies.
    for (const ClientId client : woken) {
      if (const auto wait = tagged.find(client); wait != tagged.end()) {
        const TaggedWait woke = wait->second;
        tagged.erase(wait);
        const auto owner = sessions.find(woke.session);
        if (owner == sessions.end()) continue;
        owner->second.tags.erase(woke.tag);
        std::string notice;
        append_woken(notice, woke.tag);
        if (woke.session == id)
          reply += notice;
        else
          owner->second.connection->send(std::make_shared<const std::string>(std::move(notice)));
        continue;
      }
      if (client == id) {
        append_byte(reply, static_cast<uint8_t>(WaitReply::kStopWaiting));
        continue;
      }
      const auto other = sessions.find(client);
      if (other != sessions.end()) other->second.connection->send(stop_waiting);
    }
    return true;
  }

  // A tier's wait: parked under a waiter id of its own, so that one connection holds many.
  bool wait_tagged(ClientId id, Session& session, const Request& r, std::string& reply) {
    if (session.tags.count(r.number) > 0) {
      drop(id, fmt::format("a second wait with the tag {} while the first is parked", r.number));
      return false;
    }
    if (session.tags.size() >= kMaxTaggedWaits) {
      drop(id, fmt::format("more than {} parked waits", kMaxTaggedWaits));
      return false;
    }
    const ClientId waiter = next_id++;
    if (values.wait(waiter, r.keys)) {
      append_woken(reply, r.number);
      return true;
    }
    session.tags.emplace(r.number, waiter);
    tagged.emplace(waiter, TaggedWait{id, r.number});
    return true;
  }

  static void append_woken(std::string& out, uint32_t tag) {
    append_byte(out, static_cast<uint8_t>(TierReply::kWoken));
    append_u32(out, tag);
  }

  void drop(ClientId id, const std::string& why) {
    const auto it = sessions.find(id);
    if (it == sessions.end()) return;
    log_dropped(it->second.connection->peer(), why);
    it->second.connection->close();
    forget(id);
  }

  void close_silent(ClientId id) {
    const auto it = sessions.find(id);
    if (it == sessions.end()) return;
    spdlog::debug("workers' store: closed the connection of {}: silent for {:.1f} s",
                  it->second.connection->peer(),
                  std::chrono::duration<double>(options.silent_timeout).count());
    it->second.connection->close();
    forget(id);
  }

  void forget(ClientId id) {
    values.forget_wait(id);
    if (const auto it = sessions.find(id); it != sessions.end()) {
      for (const auto& [tag, waiter] : it->second.tags) {
        values.forget_wait(waiter);
        tagged.erase(waiter);
      }
      sessions.erase(it);
    }
  }

  // A fresh key space; the waits parked in the old one go with it.
  void clear() {
    values.clear();
    tagged.clear();
    for (auto& [id, session] : sessions) session.tags.clear();
  }

  void log_dropped(const std::string& peer, const std::string& why) { drops.dropped(peer, why); }

  void stop() {
    for (auto& loop : accept_loops) loop->stop();
    accept_loops.clear();
    for (auto& [id, session] : sessions) session.connection->close();
    sessions.clear();
    clear();
  }

  boost::asio::io_context& io;
  StoreServerOptions options;
  KeyValueStore values;
  std::unordered_map<ClientId, Session> sessions;
  ClientId next_id = 1;
  std::unordered_map<ClientId, TaggedWait> tagged;
  std::vector<std::shared_ptr<net::AcceptLoop>> accept_loops;
  const std::shared_ptr<const std::string> stop_waiting =
      one_byte(static_cast<uint8_t>(WaitReply::kStopWaiting));
  DropLog drops{"workers' store"};
};

StoreServer::StoreServer(boost::asio::io_context& io, StoreServerOptions options)
    : impl_(std::make_shared<Impl>(io, options)) {}

StoreServer::~StoreServer() {
  impl_->stop();
}

net::ConnectionLimits StoreServer::connection_limits() const {
  // Workers' requests are small; 4 KiB reads keep 100k idle connections cheap.
  return {impl_->options.limits.max_request, 4096, impl_->options.max_queued_bytes};
}

void StoreServer::adopt(const std::shared_ptr<net::StreamConnection>& connection,
                        const std::string& first_bytes) {
  impl_->adopt(connection, first_bytes);
}

void StoreServer::adopt(boost::asio::ip::tcp::socket socket) {
  auto connection = net::StreamConnection::create(std::move(socket), connection_limits());
  connection->start_stream({});
  impl_->adopt(connection, {});
}

void StoreServer::listen_for_local_clients(boost::asio::ip::tcp::acceptor& acceptor) {
  std::weak_ptr<Impl> weak = impl_;
  impl_->accept_loops.push_back(accept_local_clients(
      acceptor, "workers' store",
      [this, weak](boost::asio::ip::tcp::socket socket) {
        if (weak.lock()) adopt(std::move(socket));
      },
      [weak](const std::string& peer) {
        if (const auto self = weak.lock())
          self->log_dropped(peer, "a single-node job's store serves this host only");
      }));
}

void StoreServer::set_silent_timeout(std::chrono::milliseconds timeout) {
  impl_->options.silent_timeout = timeout;
}

void StoreServer::clear() {
  impl_->clear();
}

void StoreServer::stop() {
  impl_->stop();
}

size_t StoreServer::connections() const {
  return impl_->sessions.size();
}

size_t StoreServer::keys() const {
  return static_cast<size_t>(impl_->values.num_keys());
}

}  // namespace npu_run::store
