#include "rendezvous/server/server_protocol_switch.hpp"

namespace npu_run::rdzv {

bool ProtocolSwitch::from_the_job(const net::StreamConnection& connection) const {
  const auto peer = connection.peer_address();
  if (peer.is_loopback() || peer.to_string() == connection.local_address()) return true;
  return joined_addresses_.count(peer) > 0;
}

std::string ProtocolSwitch::refusal(const net::StreamConnection& connection) const {
  if (from_the_job(connection)) return "";
  return "it does not speak the rendezvous protocol, and the workers' store on this port serves "
         "only this host and the job's nodes";
}

bool ProtocolSwitch::takes_silent(const net::StreamConnection& connection) const {
  return enabled() && connection.bytes_received() == 0 && from_the_job(connection);
}

void ProtocolSwitch::hand_over(const std::shared_ptr<net::StreamConnection>& connection,
                               std::string first_bytes) const {
  other_(connection, std::move(first_bytes));
}

}  // namespace npu_run::rdzv
