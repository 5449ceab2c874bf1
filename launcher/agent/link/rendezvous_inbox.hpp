// The agent's inbox: each message the rendezvous sends this agent goes to whoever registered
// for its type. The agent registers for a round's messages (stop, reform, decision,
// dismissal), each room for its feature's (pings, the probe, a spare's standby, a records
// dump...). The links between agent and rendezvous (TCP, in-process, etcd through its leader:
// agent/link/rendezvous.hpp) hand every message here without knowing what it is, so that a new
// message needs its place in the protocol (rendezvous/protocol/messages.hpp) and its room, nothing
// else.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <utility>
#include <variant>
#include <vector>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run {

namespace inbox_detail {

// The index of `M` among the alternatives of `Variant`; a type that is not one fails to compile.
template <typename M, typename Variant>
struct IndexOf;
template <typename M, typename... Alternatives>
struct IndexOf<M, std::variant<Alternatives...>> {
  static constexpr size_t value = [] {
    constexpr bool kIs[] = {std::is_same_v<M, Alternatives>...};
    for (size_t i = 0; i < sizeof...(Alternatives); ++i) {
      if (kIs[i]) return i;
    }
    return sizeof...(Alternatives);
  }();
  static_assert(value < sizeof...(Alternatives), "not a message of the rendezvous");
};

}  // namespace inbox_detail

class Inbox {
 public:
  // `handler` hears every message of type M from now on, after those registered before it.
  template <typename M>
  void on(std::function<void(const M&)> handler) {
    handlers_[inbox_detail::IndexOf<M, rdzv::ServerMessage>::value].push_back(
        [handler = std::move(handler)](const rdzv::ServerMessage& message) {
          handler(std::get<M>(message));
        });
  }
  // Hands `message` to its type's handlers in the order they registered; a message nobody
  // registered for is dropped (a room that is off: no pings without the health gate).
  void deliver(const rdzv::ServerMessage& message) const {
    for (const auto& handler : handlers_[message.index()]) handler(message);
  }

 private:
  std::array<std::vector<std::function<void(const rdzv::ServerMessage&)>>,
             std::variant_size_v<rdzv::ServerMessage>>
      handlers_;
};

}  // namespace npu_run
