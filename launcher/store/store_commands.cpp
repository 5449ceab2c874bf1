// The workers' store's commands (store/store_server_impl.hpp): one handler per command of the
// wire protocol, answering into the call's reply, and the wake-up of the waits its writes ended,
// a tier's tagged waits included.
#include <fmt/format.h>

#include <stdexcept>

#include "store/store_server_impl.hpp"

namespace npu_run::store {

namespace {

// A tier holds a wait per distinct key set its workers wait on at once.
constexpr size_t kMaxTaggedWaits = size_t{1} << 20;

}  // namespace

StoreServer::Impl::Handler StoreServer::Impl::handler_for(Command command) {
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

bool StoreServer::Impl::handle_validate(Call& /*call*/) {
  return true;
}

bool StoreServer::Impl::handle_set(Call& c) {
  values.set(c.key(), c.request.values[0], c.woken);
  return true;
}

bool StoreServer::Impl::handle_compare_set(Call& c) {
  append_bytes(c.reply,
               values.compare_set(c.key(), c.request.values[0], c.request.values[1], c.woken));
  return true;
}

bool StoreServer::Impl::handle_get(Call& c) {
  append_bytes(c.reply, values.get(c.key()));
  return true;
}

bool StoreServer::Impl::handle_add(Call& c) {
  append_i64(c.reply, values.add(c.key(), c.request.delta, c.woken));
  return true;
}

bool StoreServer::Impl::handle_check(Call& c) {
  const bool ready = values.check(c.request.keys);
  append_byte(c.reply, static_cast<uint8_t>(ready ? CheckReply::kReady : CheckReply::kNotReady));
  return true;
}

bool StoreServer::Impl::handle_wait(Call& c) {
  if (values.wait(c.id, c.request.keys))
    append_byte(c.reply, static_cast<uint8_t>(WaitReply::kStopWaiting));
  return true;
}

bool StoreServer::Impl::handle_num_keys(Call& c) {
  append_i64(c.reply, values.num_keys());
  return true;
}

bool StoreServer::Impl::handle_watch_key(Call& c) {
  drop(c.id,
       "watch_key, which npu_run's store does not serve (torch 1.13's Python API never sends "
       "it)");
  return false;
}

bool StoreServer::Impl::handle_delete_key(Call& c) {
  append_i64(c.reply, values.delete_key(c.key()) ? 1 : 0);
  return true;
}

bool StoreServer::Impl::handle_append(Call& c) {
  values.append(c.key(), c.request.values[0], c.woken);
  return true;
}

bool StoreServer::Impl::handle_multi_get(Call& c) {
  for (const auto& value : values.multi_get(c.request.keys)) append_bytes(c.reply, value);
  return true;
}

bool StoreServer::Impl::handle_multi_set(Call& c) {
  values.multi_set(c.request.keys, c.request.values, c.woken);
  return true;
}

bool StoreServer::Impl::handle_cancel_wait(Call& c) {
  values.forget_wait(c.id);
  append_byte(c.reply, static_cast<uint8_t>(WaitReply::kWaitCanceled));
  return true;
}

bool StoreServer::Impl::handle_ping(Call& c) {
  append_u32(c.reply, c.request.number);
  return true;
}

bool StoreServer::Impl::handle_cancel_tagged(Call& c) {
  if (const auto tag = c.session.tags.find(c.request.number); tag != c.session.tags.end()) {
    values.forget_wait(tag->second);
    tagged.erase(tag->second);
    c.session.tags.erase(tag);
  }
  return true;
}

void StoreServer::Impl::wake(Call& c) {
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

void StoreServer::Impl::wake_tagged(Call& c, TaggedWait woke) {
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

bool StoreServer::Impl::handle_wait_tagged(Call& c) {
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

void StoreServer::Impl::append_woken(std::string& out, uint32_t tag) {
  append_byte(out, static_cast<uint8_t>(TierReply::kWoken));
  append_u32(out, tag);
}

}  // namespace npu_run::store
