#include "store/store_server.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "store/local_clients.hpp"
#include "store/store_server_impl.hpp"

namespace npu_run::store {

void StoreServer::Impl::adopt(const std::shared_ptr<net::StreamConnection>& connection,
                              const std::string& first) {
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

void StoreServer::Impl::on_bytes(ClientId id, std::string_view bytes) {
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

bool StoreServer::Impl::handle(ClientId id, Session& session, const Request& r,
                               std::string& reply) {
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

void StoreServer::Impl::drop(ClientId id, const std::string& why) {
  const auto it = sessions.find(id);
  if (it == sessions.end()) return;
  log_dropped(it->second.connection->peer(), why);
  it->second.connection->close();
  forget(id);
}

void StoreServer::Impl::close_silent(ClientId id) {
  const auto it = sessions.find(id);
  if (it == sessions.end()) return;
  spdlog::debug("workers' store: closed the connection of {}: silent for {:.1f} s",
                it->second.connection->peer(),
                std::chrono::duration<double>(options.silent_timeout).count());
  it->second.connection->close();
  forget(id);
}

void StoreServer::Impl::forget(ClientId id) {
  values.forget_wait(id);
  if (const auto it = sessions.find(id); it != sessions.end()) {
    for (const auto& [tag, waiter] : it->second.tags) {
      values.forget_wait(waiter);
      tagged.erase(waiter);
    }
    sessions.erase(it);
  }
}

void StoreServer::Impl::clear() {
  values.clear();
  tagged.clear();
  for (auto& [id, session] : sessions) session.tags.clear();
}

void StoreServer::Impl::log_dropped(const std::string& peer, const std::string& why) {
  drops.dropped(peer, why);
}

void StoreServer::Impl::stop() {
  for (auto& loop : accept_loops) loop->stop();
  accept_loops.clear();
  for (auto& [id, session] : sessions) session.connection->close();
  sessions.clear();
  clear();
}

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
