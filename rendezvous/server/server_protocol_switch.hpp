// The first-bytes switch of the rendezvous port: another protocol (the workers' store,
// ServerOptions::other_protocol) is served on the same port, and a connection belongs to it when
// its first bytes are not a rendezvous frame (net::classify_first_bytes), or when it stays
// silent through the handshake deadline (torch 1.13 opens a second store connection that never
// speaks). That protocol has no authentication of its own, so only connections from this host
// or from an address an agent of the job joined from are handed over; anyone else's is a
// stranger's and is dropped.
#pragma once

#include <boost/asio/ip/address.hpp>
#include <memory>
#include <set>
#include <string>

#include "rendezvous/server/server_options.hpp"

namespace npu_run::rdzv {

class ProtocolSwitch {
 public:
  using OtherProtocol = decltype(ServerOptions::other_protocol);

  explicit ProtocolSwitch(OtherProtocol other) : other_(std::move(other)) {}

  // Whether another protocol is served at all.
  bool enabled() const { return static_cast<bool>(other_); }
  // An agent of the job joined from `address`: the other protocol serves it from now on.
  void joined_from(const boost::asio::ip::address& address) { joined_addresses_.insert(address); }
  // Why `connection`, whose first bytes were not a frame, cannot be handed over; "" when it can.
  std::string refusal(const net::StreamConnection& connection) const;
  // Whether an unjoined connection whose handshake time is up goes to the other protocol.
  bool takes_silent(const net::StreamConnection& connection) const;
  // Hands `connection` (no longer the rendezvous server's) over with the bytes read so far.
  void hand_over(const std::shared_ptr<net::StreamConnection>& connection,
                 std::string first_bytes) const;

 private:
  bool from_the_job(const net::StreamConnection& connection) const;

  OtherProtocol other_;
  // Where agents joined from, for as long as the server runs.
  std::set<boost::asio::ip::address> joined_addresses_;
};

}  // namespace npu_run::rdzv
