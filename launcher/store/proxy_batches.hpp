// What a node's store proxy (store/store_proxy.hpp) coalesces, as pure bookkeeping: waits on the
// same keys become one upstream wait (SharedWaits), and adds to one key while an earlier sum is
// on its way become one upstream add of their sum (AddBatches), each client answered as if the
// adds had run one after another.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store/key_value_store.hpp"

namespace npu_run::store {

class SharedWaits {
 public:
  // `id` waits on the key set named `name` (key_set_name): the tag of a new upstream wait to
  // send, or nothing when it joins one already under way.
  std::optional<uint32_t> park(ClientId id, const std::string& name);
  // The upstream wait `tag` ended: the clients parked on it (none if it was cancelled).
  std::vector<ClientId> woken(uint32_t tag);
  // `id` no longer waits on `name`: the tag of the upstream wait to cancel when nobody else does.
  std::optional<uint32_t> leave(ClientId id, const std::string& name);
  void clear();

 private:
  struct Shared {
    uint32_t tag = 0;
    std::vector<ClientId> clients;
  };
  std::unordered_map<std::string, Shared> waits_;
  std::unordered_map<uint32_t, std::string> names_;
  uint32_t next_tag_ = 1;
};

// One name for a set of keys (their order kept: torch waits on a list), for coalescing.
std::string key_set_name(const std::vector<std::string>& keys);

class AddBatches {
 public:
  enum class Queued { kSendNow, kBehind, kOverflow };
  // `id` adds `delta` to `key`: sent at once when no sum of the key is on its way, else added to
  // the next sum (kOverflow: that sum would overflow; nothing was queued).
  Queued add(ClientId id, const std::string& key, int64_t delta);

  struct Landed {
    std::vector<std::pair<ClientId, int64_t>> results;  // each add's value, in order
    std::optional<int64_t> next_sum;                    // the next sum of the key to send
  };
  // The sum on its way for `key` came back as `total` (none: refused): what each of its adds
  // sees, and the sum of those behind it, now on its way.
  Landed landed(const std::string& key, std::optional<int64_t> total);
  void clear() { batches_.clear(); }

 private:
  struct Batch {
    std::vector<std::pair<ClientId, int64_t>> flying;
    std::vector<std::pair<ClientId, int64_t>> next;
    int64_t next_sum = 0;
  };
  std::unordered_map<std::string, Batch> batches_;
};

}  // namespace npu_run::store
