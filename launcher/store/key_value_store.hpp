// The workers' store as torch's own TCPStore server keeps it: keys and values, and the clients
// parked in a WAIT until their keys exist. Pure (no sockets, no clock): StoreServer feeds it
// requests and sends what it answers; the unit tests drive it directly.
//
// Semantics are torch's (TCPStoreBackend.cpp, checked against real clients):
// - compare_set on a missing key: with an empty expected value it creates the key; otherwise it
//   changes nothing and answers the *expected* value.
// - add on a missing key starts from 0; on a value that is not an integer (std::stoll's rules:
//   leading blanks, a sign, digits, anything after them ignored) it is an error that closes the
//   asking connection, and the value stays as it was.
// - get and multi_get of a missing key are errors (clients always wait first).
// - wait answers at once when every key exists, otherwise parks; set, add, append, multi_set
//   wake those whose keys now all exist. Unlike torch, compare_set creating a key wakes them too
//   (torch leaves such a waiter to time out although its key exists).
// - one parked wait per client; cancel_wait forgets it. A client that times out without
//   cancelling (torch 1.13) stays parked, as with torch, and is woken later.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace npu_run::store {

using ClientId = uint64_t;

// A request torch's server would fail on: the asking connection is closed.
class StoreRequestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class KeyValueStore {
 public:
  // Keys and values together may not pass `max_bytes`: a request that would is refused.
  explicit KeyValueStore(size_t max_bytes = size_t{1} << 30) : max_bytes_(max_bytes) {}

  // Writes; `woken` gets the clients whose wait they end.
  void set(const std::string& key, std::string value, std::vector<ClientId>& woken);
  std::string compare_set(const std::string& key, const std::string& expected, std::string desired,
                          std::vector<ClientId>& woken);
  int64_t add(const std::string& key, int64_t delta, std::vector<ClientId>& woken);
  void append(const std::string& key, const std::string& tail, std::vector<ClientId>& woken);
  void multi_set(const std::vector<std::string>& keys, std::vector<std::string> values,
                 std::vector<ClientId>& woken);
  bool delete_key(const std::string& key);

  // Reads.
  const std::string& get(const std::string& key) const;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys) const;
  bool check(const std::vector<std::string>& keys) const;
  int64_t num_keys() const { return static_cast<int64_t>(values_.size()); }

  // True: every key exists, answer now. False: `client` is parked until they do.
  bool wait(ClientId client, const std::vector<std::string>& keys);
  // Forgets the client's parked wait, if any (cancel_wait, or its connection closed).
  void forget_wait(ClientId client);
  size_t parked() const { return waits_.size(); }

  // A fresh key space (a new round of the job); parked waits are forgotten too.
  void clear();
  size_t bytes() const { return bytes_; }

 private:
  void store(const std::string& key, std::string value);
  void wake(const std::string& key, std::vector<ClientId>& woken);
  void drop_forgotten_mentions();

  struct Wait {
    size_t missing;   // mentions of keys that do not exist yet
    uint64_t serial;  // which wait of the client a mention belongs to
  };
  struct Mention {
    ClientId client;
    uint64_t serial;
  };

  size_t max_bytes_;
  size_t bytes_ = 0;
  std::unordered_map<std::string, std::string> values_;
  // Parked waits: per key the clients that wait for it (once per mention, as torch counts), and
  // per client what is still missing. A forgotten wait leaves its mentions behind (removing them
  // one by one would cost a scan per client when thousands leave at once); its serial no longer
  // matches, and they are dropped when their key is written or when they outnumber the live ones.
  std::unordered_map<std::string, std::vector<Mention>> waiting_on_;
  std::unordered_map<ClientId, Wait> waits_;
  uint64_t next_serial_ = 1;
  size_t live_mentions_ = 0;
  size_t forgotten_mentions_ = 0;
};

}  // namespace npu_run::store
