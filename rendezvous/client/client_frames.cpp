#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "rendezvous/client/client_checks.hpp"
#include "rendezvous/client/client_impl.hpp"

namespace npu_run::rdzv {

void RendezvousClient::Impl::on_frames(const std::vector<std::string>& frames,
                                       const std::optional<ProtocolError>& error) {
  if (error) {
    fail(fmt::format(
        "{} did not answer as an npu_run rendezvous server ({}); is another program using "
        "that port?",
        endpoint(), error->message));
    return;
  }
  // Bytes arrived: the server is there, even when a large frame (a big job's peer table on a
  // slow link) takes longer than resume_after() to complete. Resuming then would only send it
  // again from the start.
  if (welcomed && !resuming) {
    watch(watchdog_timeout(), "sent nothing for longer than the heartbeat timeout");
    watch_silence();
  }
  for (const std::string& frame : frames) {
    if (done) return;
    on_frame(frame);
  }
}

void RendezvousClient::Impl::on_link_closed(const net::ConnectionClosed& why) {
  if (auto loss = link_loss(why, endpoint())) connection_error(loss->text, loss->server_closed);
}

void RendezvousClient::Impl::on_frame(const std::string& frame) {
  auto decoded = decode_server_message(frame);
  if (auto* error = std::get_if<ProtocolError>(&decoded)) {
    fail(fmt::format("bad message from the rendezvous server at {}: {}", endpoint(),
                     error->message));
    return;
  }
  const ServerMessage& message = std::get<ServerMessage>(decoded);
  if (const auto* error = std::get_if<ErrorReply>(&message)) {
    // The health gate's end of a static job is the job's outcome, not a refusal of this agent:
    // the agent prints it and exits with its own code.
    if (error->code == "health_gate" && handlers.message) {
      handlers.message(message);
      return;
    }
    fail(fmt::format("the rendezvous server at {} {}: {}", endpoint(),
                     resuming ? "refused to resume this agent's session" : "refused this agent",
                     error->message));
    return;
  }
  if (const auto* challenge = std::get_if<Challenge>(&message)) {
    answer(*challenge);
    return;
  }
  if (const auto* welcome = std::get_if<Welcome>(&message)) {
    on_welcome(*welcome);
    return;
  }
  if (!welcomed) {
    fail(fmt::format("the rendezvous server at {} sent '{}' before 'welcome'", endpoint(),
                     message_name(message)));
    return;
  }
  watch(watchdog_timeout(), "sent nothing for longer than the heartbeat timeout");
  if (const auto* r = std::get_if<Resumed>(&message)) {
    if (!resuming) {
      fail(fmt::format("the rendezvous server at {} sent 'resumed' unasked", endpoint()));
      return;
    }
    resumed(*r);
    return;
  }
  if (resuming) {
    fail(fmt::format("the rendezvous server at {} sent '{}' before 'resumed'", endpoint(),
                     message_name(message)));
    return;
  }
  if (const auto* ack = std::get_if<HeartbeatAck>(&message)) {
    if (!ledger.acknowledge(ack->received)) {
      fail(fmt::format("the rendezvous server at {} acknowledged {} messages of the {} sent",
                       endpoint(), ack->received, ledger.sent_count()));
    }
    return;
  }
  if (sequenced(message)) ledger.received_one();
  if (handlers.message) handlers.message(message);
}

void RendezvousClient::Impl::on_welcome(const Welcome& welcome) {
  const std::optional<Welcome> session =
      established ? std::optional(Welcome{heartbeat_interval.count(), heartbeat_timeout.count()})
                  : std::nullopt;
  if (auto refusal =
          welcome_refusal(options, welcome, {challenged, welcomed}, session, endpoint())) {
    fail(*refusal);
    return;
  }
  welcome_timer.cancel();
  welcomed = true;
  heartbeat_interval = milliseconds(welcome.heartbeat_interval_ms);
  heartbeat_timeout = milliseconds(welcome.heartbeat_timeout_ms);
  const net::TcpTimeouts timeouts = link->bound_tcp_timeouts(watchdog_timeout());
  watch(watchdog_timeout(), "sent nothing for longer than the heartbeat timeout");
  if (resuming) {
    transmit(Resume{session_key, ledger.received_count()});
    return;
  }
  spdlog::debug("rendezvous link: TCP retransmissions {}, user timeout {}",
                timeouts.rto_max_set ? "capped at 1 s (TCP_RTO_MAX_MS)"
                                     : "not capped (no TCP_RTO_MAX_MS before Linux 6.15)",
                timeouts.user_timeout_set ? "set" : "not set");
  established = true;
  heartbeat();
  watch_silence();
  if (handlers.connected) handlers.connected(local_addr);
}

void RendezvousClient::Impl::answer(const Challenge& challenge) {
  auto answer =
      answer_challenge(options, agent_nonce, challenge, {challenged, welcomed}, endpoint());
  if (const auto* refusal = std::get_if<std::string>(&answer)) {
    fail(*refusal);
    return;
  }
  challenged = true;
  transmit(std::get<Auth>(answer));
}

void RendezvousClient::Impl::heartbeat() {
  heartbeat_timer.expires_after(heartbeat_interval);
  heartbeat_timer.async_wait(
      [weak = std::weak_ptr<Impl>(shared_from_this())](boost::system::error_code ec) {
        auto self = weak.lock();
        if (ec || !self || self->done) return;
        if (!self->resuming) {
          Heartbeat beat{self->ledger.received_count()};
          if (self->handlers.heartbeat_ranks) beat.ranks = self->handlers.heartbeat_ranks();
          if (self->handlers.heartbeat_etcd) beat.etcd = self->handlers.heartbeat_etcd();
          self->transmit(beat);
        }
        self->heartbeat();
      });
}

// The agent's messages. Sequenced ones are kept until the server confirms them (at most a few
// per round: the join and the reports), and wait for a resume to finish.
void RendezvousClient::Impl::send(const ClientMessage& message) {
  if (done) return;
  if (!established || !sequenced(message)) {
    transmit(message);
    return;
  }
  auto frame = std::make_shared<const std::string>(encode_frame(encode(message)));
  ledger.sent(frame);
  if (!resuming && link && link->is_open()) link->send(std::move(frame));
}

// On the current connection, now.
void RendezvousClient::Impl::transmit(const ClientMessage& message) {
  if (done || !link || !link->is_open()) return;
  auto frame = std::make_shared<const std::string>(encode_frame(encode(message)));
  // A heartbeat behind other frames says nothing they do not.
  if (std::holds_alternative<Heartbeat>(message))
    link->send_unless_busy(std::move(frame));
  else
    link->send(std::move(frame));
}
}  // namespace npu_run::rdzv
