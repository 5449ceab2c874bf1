#include "store/tier_upstream.hpp"

#include <fmt/format.h>

#include <cstring>
#include <optional>

namespace npu_run::store {

namespace {

template <typename T>
T load_le(std::string_view bytes) {
  T value{};
  std::memcpy(&value, bytes.data(), sizeof(T));
  return value;
}

// A reason that does not fit is cut, not refused: it is only text for a log line.
constexpr size_t kMaxReason = 4096;

// The length of the answer at the start of `bytes` for `command`, or nullopt while it has not
// fully arrived. Throws std::runtime_error when it cannot be within the limits.
std::optional<size_t> answer_length(Command command, size_t values, std::string_view bytes,
                                    const StoreLimits& limits) {
  const auto counted = [&](size_t items) -> std::optional<size_t> {
    size_t at = 0;
    for (size_t i = 0; i < items; ++i) {
      if (bytes.size() - at < 8) return std::nullopt;
      const auto length = load_le<uint64_t>(bytes.substr(at));
      if (length > limits.max_value)
        throw std::runtime_error(fmt::format("an answer with a value of {} bytes", length));
      at += 8;
      if (bytes.size() - at < length) return std::nullopt;
      at += length;
    }
    return at;
  };
  const auto fixed = [&](size_t n) -> std::optional<size_t> {
    return bytes.size() >= n ? std::optional<size_t>(n) : std::nullopt;
  };
  switch (command) {
    case Command::kValidate:
    case Command::kSet:
    case Command::kAppend:
    case Command::kMultiSet:
      return 0;
    case Command::kCompareSet:
    case Command::kGet:
      return counted(1);
    case Command::kMultiGet:
      return counted(values);
    case Command::kAdd:
    case Command::kNumKeys:
    case Command::kDeleteKey:
      return fixed(8);
    case Command::kCheck:
      return fixed(1);
    case Command::kPing:
      return fixed(4);
    default:
      throw std::runtime_error(
          fmt::format("an answer to {}, which gets none", command_name(command)));
  }
}

}  // namespace

TierUpstream::TierUpstream(StoreLimits limits, Handlers handlers)
    : limits_(limits), handlers_(std::move(handlers)) {}

std::shared_ptr<TierUpstream> TierUpstream::start(boost::asio::ip::tcp::socket socket,
                                                  StoreLimits limits, Handlers handlers) {
  auto upstream = std::make_shared<TierUpstream>(limits, std::move(handlers));
  // Node 0's answers to a whole node's requests may queue up; its own queue is capped alike.
  const net::ConnectionLimits connection_limits{limits.max_request, size_t{64} * 1024,
                                                size_t{256} * 1024 * 1024};
  upstream->connection_ = net::StreamConnection::create(std::move(socket), connection_limits);
  std::weak_ptr<TierUpstream> weak = upstream;
  upstream->connection_->start_stream({[weak](std::string_view bytes) {
                                         if (auto self = weak.lock()) self->received(bytes);
                                       },
                                       [weak](const net::ConnectionClosed& why) {
                                         if (auto self = weak.lock())
                                           self->lose(
                                               fmt::format("node 0's store: {}", why.text()));
                                       }});
  Request validate;
  validate.command = Command::kValidate;
  validate.number = kTierMagic;
  upstream->send(validate, [weak](const TierOutcome& outcome) {
    auto self = weak.lock();
    if (!self) return;
    if (!outcome.refused.empty()) return self->lose("node 0's store: " + outcome.refused);
    self->accepted_ = true;
    if (self->handlers_.accepted) self->handlers_.accepted();
  });
  return upstream;
}

void TierUpstream::send(const Request& request, Answer answer) {
  if (lost_ || !connection_) return;
  if (tier_answers(request.command)) {
    pending_.push_back(Pending{request.command, request.keys.size(), std::move(answer)});
  }
  connection_->send(
      std::make_shared<const std::string>(encode_request(Generation::kTier, request)));
}

void TierUpstream::close() {
  lost_ = true;
  pending_.clear();
  if (connection_) connection_->close();
}

void TierUpstream::received(std::string_view bytes) {
  if (lost_) return;
  buffer_.append(bytes);
  size_t at = 0;
  const auto self = shared_from_this();  // a handler may drop the last other owner
  try {
    while (at < buffer_.size() && take_message(at)) {
      if (lost_) return;
    }
  } catch (const std::runtime_error& e) {
    lose(fmt::format("node 0's store sent {}", e.what()));
    return;
  }
  buffer_.erase(0, at);
  // Nothing waits unbounded: a partial answer is at most one value and its length fields.
  if (buffer_.size() > limits_.max_request + limits_.max_value)
    lose("node 0's store sent an answer larger than any request could ask for");
}

bool TierUpstream::take_message(size_t& at) {
  const std::string_view rest = std::string_view(buffer_).substr(at);
  const auto kind = static_cast<uint8_t>(rest[0]);
  if (kind == static_cast<uint8_t>(TierReply::kWoken)) {
    if (rest.size() < 5) return false;
    at += 5;
    handlers_.woken(load_le<uint32_t>(rest.substr(1)));
    return true;
  }
  if (pending_.empty()) throw std::runtime_error("an answer to no request");
  const std::string_view body = rest.substr(1);
  TierOutcome outcome;
  size_t length = 0;
  if (kind == static_cast<uint8_t>(TierReply::kAnswer)) {
    const Pending& front = pending_.front();
    const auto found = answer_length(front.command, front.values, body, limits_);
    if (!found) return false;
    length = *found;
    outcome.answer = body.substr(0, length);
  } else if (kind == static_cast<uint8_t>(TierReply::kRefused)) {
    if (body.size() < 8) return false;
    const auto reason = load_le<uint64_t>(body);
    if (reason > kMaxReason) throw std::runtime_error(fmt::format("a refusal of {} bytes", reason));
    if (body.size() - 8 < reason) return false;
    outcome.refused = std::string(body.substr(8, reason));
    if (outcome.refused.empty()) outcome.refused = "refused";
    length = 8 + reason;
  } else {
    throw std::runtime_error(fmt::format("a message of unknown kind {}", kind));
  }
  Pending done = std::move(pending_.front());
  pending_.pop_front();
  at += 1 + length;
  if (done.answer) done.answer(outcome);
  return true;
}

void TierUpstream::lose(const std::string& why) {
  if (lost_) return;
  lost_ = true;
  pending_.clear();
  if (connection_) connection_->close();
  if (handlers_.lost) handlers_.lost(why, accepted_);
}

}  // namespace npu_run::store
