#include "etcd/requests.hpp"

#include <stdexcept>

#include "etcd/base64.hpp"

namespace npu_run::etcd {

namespace {

Json range_part(const std::string& key, bool whole_prefix) {
  Json r{{"key", base64_encode(key)}};
  if (whole_prefix) r["range_end"] = base64_encode(prefix_end(key));
  return r;
}

std::string decoded(const Json& kv, const char* name) {
  if (!kv.contains(name)) return "";
  const auto text = base64_decode(kv.at(name).get<std::string>());
  if (!text) throw std::invalid_argument(std::string("etcd answer: ") + name + " is not base64");
  return *text;
}

}  // namespace

std::string prefix_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key: etcd's "\0" range end
}

Json range_request(const std::string& key, bool whole_prefix) {
  return range_part(key, whole_prefix);
}

Json put_request(const std::string& key, const std::string& value, int64_t lease) {
  Json r{{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease != 0) r["lease"] = std::to_string(lease);
  return r;
}

Json delete_request(const std::string& key, bool whole_prefix) {
  return range_part(key, whole_prefix);
}

Json create_if_absent_request(const std::string& key, const std::string& value, int64_t lease) {
  return Json{{"compare", Json::array({{{"target", "CREATE"},
                                        {"key", base64_encode(key)},
                                        {"result", "EQUAL"},
                                        {"create_revision", "0"}}})},
              {"success", Json::array({{{"request_put", put_request(key, value, lease)}}})},
              {"failure", Json::array({{{"request_range", range_request(key, false)}}})}};
}

Json guarded_txn_request(const std::string& guard, int64_t create_revision,
                         const std::vector<std::pair<std::string, std::string>>& puts,
                         const std::vector<std::string>& deletes, int64_t lease) {
  Json success = Json::array();
  for (const auto& [key, value] : puts)
    success.push_back({{"request_put", put_request(key, value, lease)}});
  for (const std::string& key : deletes)
    success.push_back({{"request_delete_range", delete_request(key, false)}});
  return Json{{"compare", Json::array({{{"target", "CREATE"},
                                        {"key", base64_encode(guard)},
                                        {"result", "EQUAL"},
                                        {"create_revision", std::to_string(create_revision)}}})},
              {"success", std::move(success)}};
}

Json lease_grant_request(int64_t ttl_seconds) {
  return Json{{"TTL", std::to_string(ttl_seconds)}};
}

Json lease_id_request(int64_t id) {
  return Json{{"ID", std::to_string(id)}};
}

int64_t json_int(const Json& object, const char* name) {
  if (!object.is_object() || !object.contains(name)) return 0;
  const Json& v = object.at(name);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_string()) throw std::invalid_argument(std::string("etcd answer: ") + name);
  try {
    return std::stoll(v.get<std::string>());
  } catch (const std::exception&) {
    throw std::invalid_argument(std::string("etcd answer: ") + name + " is not a number");
  }
}

int64_t header_revision(const Json& answer) {
  return answer.contains("header") ? json_int(answer.at("header"), "revision") : 0;
}

std::vector<KeyValue> range_kvs(const Json& answer) {
  std::vector<KeyValue> out;
  if (!answer.contains("kvs")) return out;  // an empty range has no kvs
  for (const Json& kv : answer.at("kvs")) {
    out.push_back(KeyValue{decoded(kv, "key"), decoded(kv, "value"),
                           json_int(kv, "create_revision"), json_int(kv, "mod_revision"),
                           json_int(kv, "version"), json_int(kv, "lease")});
  }
  return out;
}

TxnResult txn_result(const Json& answer) {
  TxnResult r;
  r.succeeded = answer.value("succeeded", false);  // absent when false
  r.revision = header_revision(answer);
  if (answer.contains("responses")) {
    for (const Json& response : answer.at("responses")) {
      if (response.contains("response_range")) {
        const auto kvs = range_kvs(response.at("response_range"));
        r.read.insert(r.read.end(), kvs.begin(), kvs.end());
      }
    }
  }
  return r;
}

Lease lease_result(const Json& answer) {
  const Json& body = answer.contains("result") ? answer.at("result") : answer;  // keepalive
  return Lease{json_int(body, "ID"), json_int(body, "TTL")};
}

}  // namespace npu_run::etcd
