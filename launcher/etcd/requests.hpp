// The etcd v3 gateway's requests and answers as JSON (REFERENCE.md section 12), pure: keys and
// values base64, 64-bit numbers as strings, fields with zero values left out (defaulted here).
// What the rendezvous needs: ranges (a key or a prefix), puts with a lease, the transaction that
// creates a key only if it is absent (the leader's election; its create revision is the epoch),
// a transaction guarded by a key's create revision (every write of a leader), deletes, leases.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace npu_run::etcd {

using Json = nlohmann::json;

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

// The smallest key after every key that starts with `prefix` (etcd's range_end for a prefix).
std::string prefix_end(const std::string& prefix);

Json range_request(const std::string& key, bool whole_prefix);
Json put_request(const std::string& key, const std::string& value, int64_t lease = 0);
Json delete_request(const std::string& key, bool whole_prefix);
// Puts `key` only if no such key exists; otherwise reads it.
Json create_if_absent_request(const std::string& key, const std::string& value, int64_t lease);
// Runs `puts` (key, value; tied to `lease` unless 0) and `deletes` only while `guard` exists
// with `create_revision`: a leader's writes, fenced by its epoch.
Json guarded_txn_request(const std::string& guard, int64_t create_revision,
                         const std::vector<std::pair<std::string, std::string>>& puts,
                         const std::vector<std::string>& deletes = {}, int64_t lease = 0);
Json lease_grant_request(int64_t ttl_seconds);
Json lease_id_request(int64_t id);  // keepalive, revoke, timetolive

// Parsers: std::invalid_argument when the answer is not what etcd sends.
int64_t json_int(const Json& object, const char* name);  // "123" or 123; absent: 0
int64_t header_revision(const Json& answer);
std::vector<KeyValue> range_kvs(const Json& answer);
struct TxnResult {
  bool succeeded = false;
  int64_t revision = 0;        // the header's: after the txn
  std::vector<KeyValue> read;  // the failure branch's range (create_if_absent: the holder)
};
TxnResult txn_result(const Json& answer);
struct Lease {
  int64_t id = 0;
  int64_t ttl = 0;  // 0: expired (a keepalive of an expired lease has no TTL field)
};
Lease lease_result(const Json& answer);

}  // namespace npu_run::etcd
