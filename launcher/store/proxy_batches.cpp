#include "store/proxy_batches.hpp"

#include <algorithm>

#include "store/wire.hpp"

namespace npu_run::store {

std::optional<uint32_t> SharedWaits::park(ClientId id, const std::string& name) {
  if (const auto shared = waits_.find(name); shared != waits_.end()) {
    shared->second.clients.push_back(id);
    return std::nullopt;
  }
  const uint32_t tag = next_tag_++;
  waits_.emplace(name, Shared{tag, {id}});
  names_.emplace(tag, name);
  return tag;
}

std::vector<ClientId> SharedWaits::woken(uint32_t tag) {
  const auto name = names_.find(tag);
  if (name == names_.end()) return {};  // cancelled meanwhile
  const auto shared = waits_.find(name->second);
  std::vector<ClientId> parked = std::move(shared->second.clients);
  waits_.erase(shared);
  names_.erase(name);
  return parked;
}

std::optional<uint32_t> SharedWaits::leave(ClientId id, const std::string& name) {
  const auto shared = waits_.find(name);
  if (shared == waits_.end()) return std::nullopt;
  auto& parked = shared->second.clients;
  std::erase(parked, id);
  if (!parked.empty()) return std::nullopt;
  const uint32_t tag = shared->second.tag;
  names_.erase(tag);
  waits_.erase(shared);
  return tag;
}

void SharedWaits::clear() {
  waits_.clear();
  names_.clear();
}

std::string key_set_name(const std::vector<std::string>& keys) {
  std::string name;
  for (const auto& key : keys) append_bytes(name, key);
  return name;
}

AddBatches::Queued AddBatches::add(ClientId id, const std::string& key, int64_t delta) {
  auto [it, fresh] = batches_.try_emplace(key);
  Batch& batch = it->second;
  if (fresh) {
    batch.flying.emplace_back(id, delta);
    return Queued::kSendNow;
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(batch.next_sum, delta, &sum)) return Queued::kOverflow;
  batch.next_sum = sum;
  batch.next.emplace_back(id, delta);
  return Queued::kBehind;
}

AddBatches::Landed AddBatches::landed(const std::string& key, std::optional<int64_t> total) {
  Landed landed;
  const auto it = batches_.find(key);
  if (it == batches_.end()) return landed;
  std::vector<std::pair<ClientId, int64_t>> flying = std::move(it->second.flying);
  if (it->second.next.empty()) {
    batches_.erase(it);
  } else {
    it->second.flying = std::move(it->second.next);
    it->second.next.clear();
    landed.next_sum = std::exchange(it->second.next_sum, 0);
  }
  // As if they ran one after another: each sees the total less the deltas after it. A refused
  // sum gives each its own delta back, for the caller to name the clients it refuses.
  landed.results.resize(flying.size());
  int64_t after = total.value_or(0);
  for (size_t i = flying.size(); i-- > 0;) {
    landed.results[i] = {flying[i].first, total ? after : flying[i].second};
    if (total) after -= flying[i].second;
  }
  return landed;
}

}  // namespace npu_run::store
