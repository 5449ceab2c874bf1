// The workers' store's state behind StoreServer (store/store_server.hpp), shared by its two
// halves: the sessions (store/store_server.cpp: connections, framing, drops) and the commands
// (store/store_commands.cpp: one handler per command, and the wake-up of the waits a write ended).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "net/accept_loop.hpp"
#include "store/drop_log.hpp"
#include "store/key_value_store.hpp"
#include "store/store_server.hpp"

namespace npu_run::store {

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

  void adopt(const std::shared_ptr<net::StreamConnection>& connection, const std::string& first);
  void on_bytes(ClientId id, std::string_view bytes);

  // One request, in three steps: its command's handler, the tier's framing of the answer, and
  // the wake-up of the waits its writes ended. False when the connection was closed for it.
  bool handle(ClientId id, Session& session, const Request& r, std::string& reply);

  // Every command has its handler: a command added to the protocol without one fails to compile
  // (-Wswitch, warnings are errors).
  static Handler handler_for(Command command);

  // ---- one handler per command ----

  // The decoder checked its place and its magic number.
  bool handle_validate(Call& /*call*/);
  bool handle_set(Call& c);
  bool handle_compare_set(Call& c);
  bool handle_get(Call& c);
  bool handle_add(Call& c);
  bool handle_check(Call& c);
  bool handle_wait(Call& c);
  bool handle_num_keys(Call& c);
  bool handle_watch_key(Call& c);
  bool handle_delete_key(Call& c);
  bool handle_append(Call& c);
  bool handle_multi_get(Call& c);
  bool handle_multi_set(Call& c);
  bool handle_cancel_wait(Call& c);
  bool handle_ping(Call& c);
  bool handle_cancel_tagged(Call& c);
  // ---- the wake-up step ----

  // Woken waiters hear it now; the asking client's own answer goes with the rest of its replies.
  void wake(Call& c);
  void wake_tagged(Call& c, TaggedWait woke);

  // A tier's wait: parked under a waiter id of its own, so that one connection holds many.
  bool handle_wait_tagged(Call& c);
  static void append_woken(std::string& out, uint32_t tag);
  void drop(ClientId id, const std::string& why);
  void close_silent(ClientId id);
  void forget(ClientId id);

  // A fresh key space; the waits parked in the old one go with it.
  void clear();
  void log_dropped(const std::string& peer, const std::string& why);
  void stop();

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

}  // namespace npu_run::store
