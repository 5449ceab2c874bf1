#include "store/store_server.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <stdexcept>
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

}  // namespace

struct StoreServer::Impl : std::enable_shared_from_this<Impl> {
  struct Session {
    std::shared_ptr<net::StreamConnection> connection;
    ConnectionDecoder decoder;
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

  // One request being answered: who asked, where the answer goes, and whose waits it ended.
  struct Call {
    ClientId id;
    Session& session;
    const Request& request;
    std::string& reply;
    std::vector<ClientId> woken;

    const std::string& key() const { return request.keys[0]; }
  };
  // Answers into call.reply; false when the connection was closed for the request.
  using Handler = bool (Impl::*)(Call& call);

  Impl(boost::asio::io_context& io_context, StoreServerOptions opts)
      : io(io_context), options(opts), values(opts.max_store_bytes) {}

  void adopt(const std::shared_ptr<net::StreamConnection>& connection, const std::string& first) {
    const ClientId id = next_id++;
    Session& session =
        sessions.emplace(id, Session{connection, ConnectionDecoder(options.limits), {}, {}})
            .first->second;
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
    std::vector<Request> requests;
    const auto error = session.decoder.feed(bytes, requests);
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

  // One request, in three steps: its command's handler, the tier's framing of the answer, and
  // the wake-up of the waits its writes ended. False when the connection was closed for it.
  bool handle(ClientId id, Session& session, const Request& r, std::string& reply) {
    ++requests_served;
    const bool tier = session.decoder.generation() == Generation::kTier;
    const size_t answer_at = reply.size();
    Call call{id, session, r, reply, {}};
    try {
      if (!(this->*handler_for(r.command))(call)) return false;
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
    wake(call);
    return true;
  }

  // Every command has its handler: a command added to the protocol without one fails to compile
  // (-Wswitch, warnings are errors).
  static Handler handler_for(Command command) {
    switch (command) {
      case Command::kValidate:
        return &Impl::handle_validate;
      case Command::kSet:
        return &Impl::handle_set;
      case Command::kCompareSet:
        return &Impl::handle_compare_set;
      case Command::kGet:
        return &Impl::handle_get;
      case Command::kAdd:
        return &Impl::handle_add;
      case Command::kCheck:
        return &Impl::handle_check;
      case Command::kWait:
        return &Impl::handle_wait;
      case Command::kNumKeys:
        return &Impl::handle_num_keys;
      case Command::kWatchKey:
        return &Impl::handle_watch_key;
      case Command::kDeleteKey:
        return &Impl::handle_delete_key;
      case Command::kAppend:
        return &Impl::handle_append;
      case Command::kMultiGet:
        return &Impl::handle_multi_get;
      case Command::kMultiSet:
        return &Impl::handle_multi_set;
      case Command::kCancelWait:
        return &Impl::handle_cancel_wait;
      case Command::kPing:
        return &Impl::handle_ping;
      case Command::kWaitTagged:
        return &Impl::handle_wait_tagged;
      case Command::kCancelTagged:
        return &Impl::handle_cancel_tagged;
    }
    throw std::logic_error("a store command without a handler");
  }

  // ---- one handler per command ----

  // The decoder checked its place and its magic number.
  bool handle_validate(Call& /*call*/) { return true; }
  bool handle_set(Call& c) {
    values.set(c.key(), c.request.values[0], c.woken);
    return true;
  }
  bool handle_compare_set(Call& c) {
    append_bytes(c.reply,
                 values.compare_set(c.key(), c.request.values[0], c.request.values[1], c.woken));
    return true;
  }
  bool handle_get(Call& c) {
    append_bytes(c.reply, values.get(c.key()));
    return true;
  }
  bool handle_add(Call& c) {
    append_i64(c.reply, values.add(c.key(), c.request.delta, c.woken));
    return true;
  }
  bool handle_check(Call& c) {
    const bool ready = values.check(c.request.keys);
    append_byte(c.reply, static_cast<uint8_t>(ready ? CheckReply::kReady : CheckReply::kNotReady));
    return true;
  }
  bool handle_wait(Call& c) {
    if (values.wait(c.id, c.request.keys))
      append_byte(c.reply, static_cast<uint8_t>(WaitReply::kStopWaiting));
    return true;
  }
  bool handle_num_keys(Call& c) {
    append_i64(c.reply, values.num_keys());
    return true;
  }
  bool handle_watch_key(Call& c) {
    drop(c.id,
         "watch_key, which npu_run's store does not serve (torch 1.13's Python API never sends "
         "it)");
    return false;
  }
  bool handle_delete_key(Call& c) {
    append_i64(c.reply, values.delete_key(c.key()) ? 1 : 0);
    return true;
  }
  bool handle_append(Call& c) {
    values.append(c.key(), c.request.values[0], c.woken);
    return true;
  }
  bool handle_multi_get(Call& c) {
    for (const auto& value : values.multi_get(c.request.keys)) append_bytes(c.reply, value);
    return true;
  }
  bool handle_multi_set(Call& c) {
    values.multi_set(c.request.keys, c.request.values, c.woken);
    return true;
  }
  bool handle_cancel_wait(Call& c) {
    values.forget_wait(c.id);
    append_byte(c.reply, static_cast<uint8_t>(WaitReply::kWaitCanceled));
    return true;
  }
  bool handle_ping(Call& c) {
    append_u32(c.reply, c.request.number);
    return true;
  }
  bool handle_cancel_tagged(Call& c) {
    if (const auto tag = c.session.tags.find(c.request.number); tag != c.session.tags.end()) {
      values.forget_wait(tag->second);
      tagged.erase(tag->second);
      c.session.tags.erase(tag);
    }
    return true;
  }
  // ---- the wake-up step ----

  // Woken waiters hear it now; the asking client's own answer goes with the rest of its replies.
  void wake(Call& c) {
    for (const ClientId client : c.woken) {
      if (const auto wait = tagged.find(client); wait != tagged.end()) {
        wake_tagged(c, wait->second);
        tagged.erase(wait);
        continue;
      }
      if (client == c.id) {
        append_byte(c.reply, static_cast<uint8_t>(WaitReply::kStopWaiting));
        continue;
      }
      const auto other = sessions.find(client);
      if (other != sessions.end()) other->second.connection->send(stop_waiting);
    }
  }

  void wake_tagged(Call& c, TaggedWait woke) {
    const auto owner = sessions.find(woke.session);
    if (owner == sessions.end()) return;
    owner->second.tags.erase(woke.tag);
    std::string notice;
    append_woken(notice, woke.tag);
    if (woke.session == c.id)
      c.reply += notice;
    else
      owner->second.connection->send(std::make_shared<const std::string>(std::move(notice)));
  }

  // A tier's wait: parked under a waiter id of its own, so that one connection holds many.
  bool handle_wait_tagged(Call& c) {
    const uint32_t tag = c.request.number;
    if (c.session.tags.count(tag) > 0) {
      drop(c.id, fmt::format("a second wait with the tag {} while the first is parked", tag));
      return false;
    }
    if (c.session.tags.size() >= kMaxTaggedWaits) {
      drop(c.id, fmt::format("more than {} parked waits", kMaxTaggedWaits));
      return false;
    }
    const ClientId waiter = next_id++;
    if (values.wait(waiter, c.request.keys)) {
      append_woken(c.reply, tag);
      return true;
    }
    c.session.tags.emplace(tag, waiter);
    tagged.emplace(waiter, TaggedWait{c.id, tag});
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
  uint64_t requests_served = 0;  // for --metrics-port
  std::unordered_map<ClientId, TaggedWait> tagged;
  std::vector<std::shared_ptr<net::AcceptLoop>> accept_loops;
  const std::shared_ptr<const std::string> stop_waiting = wait_reply(WaitReply::kStopWaiting);
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

uint64_t StoreServer::requests() const {
  return impl_->requests_served;
}

}  // namespace npu_run::store
