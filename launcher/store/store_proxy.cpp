#include "store/store_proxy.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstring>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "net/accept_loop.hpp"
#include "net/stream_connection.hpp"
#include "store/drop_log.hpp"
#include "store/local_clients.hpp"
#include "store/proxy_batches.hpp"
#include "store/tier_upstream.hpp"

namespace npu_run::store {

namespace {

std::shared_ptr<const std::string> bytes_of(std::string text) {
  return std::make_shared<const std::string>(std::move(text));
}

}  // namespace

struct StoreProxy::Impl : std::enable_shared_from_this<Impl> {
  struct Client {
    std::shared_ptr<net::StreamConnection> connection;
    ConnectionDecoder decoder;
    std::deque<Request> queue;  // decoded, not yet started
    size_t queued_bytes = 0;    // the keys and values in `queue`
    bool busy = false;          // its last request is not answered yet
    std::string waiting_on;     // the key set of its parked wait
    std::unique_ptr<boost::asio::steady_timer> silent;
  };
  enum class Upstream { kWaiting, kUp, kDown };

  Impl(boost::asio::io_context& io_context, StoreProxyOptions opts)
      : io(io_context), options(opts) {}

  // ---- clients ----

  void adopt(boost::asio::ip::tcp::socket socket) {
    if (state == Upstream::kDown) return;  // closes it: nothing would answer
    const net::ConnectionLimits limits{options.limits.max_request, 4096, size_t{160} * 1024 * 1024};
    auto connection = net::StreamConnection::create(std::move(socket), limits);
    const ClientId id = next_id++;
    Client& client = clients.emplace(id, Client{}).first->second;
    client.connection = connection;
    client.decoder = ConnectionDecoder(options.limits);
    std::weak_ptr<Impl> weak = shared_from_this();
    client.silent = std::make_unique<boost::asio::steady_timer>(
        io, connection->opened_at() + options.silent_timeout);
    client.silent->async_wait([weak, id](boost::system::error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->close_client(id, "", false);
    });
    connection->start_stream({[weak, id](std::string_view bytes) {
                                if (auto self = weak.lock()) self->on_bytes(id, bytes);
                              },
                              [weak, id](const net::ConnectionClosed&) {
                                if (auto self = weak.lock()) self->forget(id);
                              }});
  }

  void on_bytes(ClientId id, std::string_view bytes) {
    const auto it = clients.find(id);
    if (it == clients.end()) return;
    Client& client = it->second;
    client.silent.reset();
    std::vector<Request> requests;
    const auto error = client.decoder.feed(bytes, requests);
    if (client.decoder.generation() == Generation::kTier) {
      close_client(id, "a tier's greeting; a node's proxy serves its workers only", true);
      return;
    }
    counted.client_requests += requests.size();
    for (Request& request : requests) {
      client.queued_bytes += request_bytes(request);
      client.queue.push_back(std::move(request));
    }
    if (client.queue.size() > options.max_queued_requests ||
        client.queued_bytes > options.limits.max_request) {
      close_client(id,
                   fmt::format("more than {} requests or {} bytes sent without waiting for the "
                               "answers",
                               options.max_queued_requests, options.limits.max_request),
                   true);
      return;
    }
    if (error) {
      close_client(id, error->message, true);
      return;
    }
    pump(id);
  }

  // Starts the client's queued requests, one at a time, for as long as they are answered here.
  void pump(ClientId id) {
    while (state == Upstream::kUp) {
      const auto it = clients.find(id);
      if (it == clients.end()) return;
      Client& client = it->second;
      if (client.busy || client.queue.empty()) return;
      Request request = std::move(client.queue.front());
      client.queue.pop_front();
      client.queued_bytes -= request_bytes(request);
      if (!start(id, client, std::move(request))) return;
    }
  }

  // False when the client was closed for it. Its order and magic number were checked when it
  // was decoded.
  bool start(ClientId id, Client& client, Request r) {
    switch (r.command) {
      case Command::kValidate:
        return true;
      case Command::kPing: {
        std::string echo;
        append_u32(echo, r.number);
        client.connection->send(bytes_of(std::move(echo)));
        return true;
      }
      case Command::kWatchKey:
        close_client(id, "watch_key, which npu_run's store does not serve", true);
        return false;
      case Command::kWait:
        park_wait(id, client, r.keys);
        return true;
      case Command::kCancelWait:  // a 2.x client that gave up waiting (or whose wait just ended)
        leave_wait(id, client);
        client.connection->send(wait_reply(WaitReply::kWaitCanceled));
        return true;
      case Command::kAdd:
        return queue_add(id, client, r.keys[0], r.delta);
      default:
        break;
    }
    ++counted.upstream_requests;
    if (!tier_answers(r.command) || answer_is_empty(r.command)) {
      // SET, APPEND, MULTI_SET: nothing to wait for here; a refusal closes the client later.
      upstream->send(r, [weak = weak_from_this(), id](const TierOutcome& outcome) {
        auto self = weak.lock();
        if (self && !outcome.refused.empty()) self->close_client(id, outcome.refused, true);
      });
      return true;
    }
    client.busy = true;
    upstream->send(r, [weak = weak_from_this(), id](const TierOutcome& outcome) {
      if (auto self = weak.lock()) self->answered(id, outcome);
    });
    return true;
  }

  void answered(ClientId id, const TierOutcome& outcome) {
    const auto it = clients.find(id);
    if (it == clients.end()) return;
    if (!outcome.refused.empty()) {
      close_client(id, outcome.refused, true);
      return;
    }
    it->second.busy = false;
    it->second.connection->send(bytes_of(std::string(outcome.answer)));
    pump(id);
  }

  // ---- waits ----

  // A parked wait does not hold the client's later requests back, as on torch's server (a 1.13
  // client whose wait timed out goes on using its connection); a client has one wait at most,
  // as on node 0's store.
  void park_wait(ClientId id, Client& client, const std::vector<std::string>& keys) {
    leave_wait(id, client);
    client.waiting_on = key_set_name(keys);
    const std::optional<uint32_t> tag = waits.park(id, client.waiting_on);
    if (!tag) {
      ++counted.coalesced_waits;
      return;
    }
    Request wait;
    wait.command = Command::kWaitTagged;
    wait.number = *tag;
    wait.keys = keys;
    ++counted.upstream_requests;
    upstream->send(wait);
  }

  void woken(uint32_t tag) {
    for (const ClientId id : waits.woken(tag)) {
      const auto it = clients.find(id);
      if (it == clients.end()) continue;
      it->second.waiting_on.clear();
      it->second.connection->send(stop_waiting);
    }
  }

  // The client no longer waits; the upstream wait goes when nobody does.
  void leave_wait(ClientId id, Client& client) {
    if (client.waiting_on.empty()) return;
    const std::optional<uint32_t> tag = waits.leave(id, client.waiting_on);
    client.waiting_on.clear();
    if (!tag || !upstream) return;
    Request cancel;
    cancel.command = Command::kCancelTagged;
    cancel.number = *tag;
    upstream->send(cancel);
  }

  // ---- adds ----

  bool queue_add(ClientId id, Client& client, const std::string& key, int64_t delta) {
    client.busy = true;
    switch (adds.add(id, key, delta)) {
      case AddBatches::Queued::kSendNow:
        send_add(key, delta);
        return true;
      case AddBatches::Queued::kBehind:
        ++counted.batched_adds;
        return true;
      case AddBatches::Queued::kOverflow:
        break;
    }
    close_client(id, fmt::format("an add of {} that overflows the node's batched sum", delta),
                 true);
    return false;
  }

  void send_add(const std::string& key, int64_t sum) {
    Request add;
    add.command = Command::kAdd;
    add.keys = {key};
    add.delta = sum;
    ++counted.upstream_requests;
    upstream->send(add, [weak = weak_from_this(), key](const TierOutcome& outcome) {
      if (auto self = weak.lock()) self->added(key, outcome);
    });
  }

  void added(const std::string& key, const TierOutcome& outcome) {
    std::optional<int64_t> total;
    if (outcome.refused.empty()) {
      int64_t sum = 0;
      std::memcpy(&sum, outcome.answer.data(), sizeof sum);
      total = sum;
    }
    const AddBatches::Landed landed = adds.landed(key, total);
    if (landed.next_sum) send_add(key, *landed.next_sum);
    for (const auto& [id, value] : landed.results) {
      if (!total) {
        close_client(id, outcome.refused, true);
        continue;
      }
      const auto client = clients.find(id);
      if (client == clients.end()) continue;
      std::string answer;
      append_i64(answer, value);
      client->second.busy = false;
      client->second.connection->send(bytes_of(std::move(answer)));
    }
    if (!total) return;
    for (const auto& [id, value] : landed.results) pump(id);
  }

  // ---- the upstream and the round ----

  void attach(boost::asio::ip::tcp::socket socket, TurnedAway turned_away) {
    if (state != Upstream::kWaiting) return;
    std::weak_ptr<Impl> weak = shared_from_this();
    upstream = TierUpstream::start(
        std::move(socket), options.limits,
        {[weak] {
           if (auto self = weak.lock()) self->up();
         },
         [weak](uint32_t tag) {
           if (auto self = weak.lock()) self->woken(tag);
         },
         [weak, turned_away = std::move(turned_away)](const std::string& why, bool was_accepted) {
           auto self = weak.lock();
           if (!self) return;
           if (was_accepted || !turned_away) return self->lost(why);
           self->upstream.reset();  // nothing went through it; the clients keep waiting
           turned_away(why);
         }});
  }

  // Node 0 took the upstream: the requests that waited for it go now.
  void up() {
    state = Upstream::kUp;
    std::vector<ClientId> ids;
    for (const auto& [id, client] : clients) ids.push_back(id);
    for (const ClientId id : ids) pump(id);
  }

  void lost(const std::string& why) {
    if (state == Upstream::kDown) return;
    state = Upstream::kDown;
    spdlog::warn(
        "workers' store proxy: lost node 0's store ({}); closing this node's {} worker "
        "connection{} so that they fail now instead of waiting",
        why, clients.size(), clients.size() == 1 ? "" : "s");
    close_all();
  }

  void close_all() {
    for (auto& [id, client] : clients) client.connection->close();
    clients.clear();
    waits.clear();
    adds.clear();
    if (upstream) upstream->close();
    upstream.reset();
  }

  void close_client(ClientId id, const std::string& why, bool loud) {
    const auto it = clients.find(id);
    if (it == clients.end()) return;
    if (loud) drops.dropped(it->second.connection->peer(), why);
    it->second.connection->close();
    forget(id);
  }

  void forget(ClientId id) {
    const auto it = clients.find(id);
    if (it == clients.end()) return;
    leave_wait(id, it->second);
    clients.erase(it);
    // Its place in an add batch stays: the sum is on its way, and the others' results count it.
  }

  boost::asio::io_context& io;
  StoreProxyOptions options;
  Upstream state = Upstream::kWaiting;
  std::shared_ptr<TierUpstream> upstream;
  std::unordered_map<ClientId, Client> clients;
  SharedWaits waits;  // one upstream wait per key set, its clients parked on it
  AddBatches adds;    // one upstream add per key at a time, of the sum of those behind it
  std::vector<std::shared_ptr<net::AcceptLoop>> accept_loops;
  ClientId next_id = 1;
  ProxyCounters counted;
  const std::shared_ptr<const std::string> stop_waiting = wait_reply(WaitReply::kStopWaiting);
  DropLog drops{"workers' store proxy"};
};

StoreProxy::StoreProxy(boost::asio::io_context& io, StoreProxyOptions options)
    : impl_(std::make_shared<Impl>(io, options)) {}

StoreProxy::~StoreProxy() {
  for (auto& loop : impl_->accept_loops) loop->stop();
  impl_->close_all();
}

void StoreProxy::listen_for_local_clients(boost::asio::ip::tcp::acceptor& acceptor) {
  std::weak_ptr<Impl> weak = impl_;
  impl_->accept_loops.push_back(accept_local_clients(
      acceptor, "workers' store proxy",
      [weak](boost::asio::ip::tcp::socket socket) {
        if (const auto self = weak.lock()) self->adopt(std::move(socket));
      },
      [weak](const std::string& peer) {
        if (const auto self = weak.lock())
          self->drops.dropped(peer, "a node's store proxy serves this host's workers only");
      }));
}

void StoreProxy::adopt(boost::asio::ip::tcp::socket socket) {
  impl_->adopt(std::move(socket));
}

void StoreProxy::attach_upstream(boost::asio::ip::tcp::socket socket, TurnedAway turned_away) {
  impl_->attach(std::move(socket), std::move(turned_away));
}

void StoreProxy::upstream_unreachable(const std::string& why) {
  impl_->lost(why);
}

void StoreProxy::reset() {
  impl_->close_all();
  impl_->state = Impl::Upstream::kWaiting;
}

size_t StoreProxy::connections() const {
  return impl_->clients.size();
}

bool StoreProxy::upstream_attached() const {
  return impl_->upstream && impl_->upstream->is_open();
}

ProxyCounters StoreProxy::counters() const {
  return impl_->counted;
}

}  // namespace npu_run::store
