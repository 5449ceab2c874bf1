// etcd v3's JSON gateway as the etcd layer speaks it (etcd/requests.hpp, etcd/endpoints.hpp,
// etcd/base64.hpp): the shapes REFERENCE.md section 12 records from etcd 3.4.23, including the
// fields etcd leaves out when they are zero.
#include <catch2/catch.hpp>

#include "etcd/base64.hpp"
#include "etcd/endpoints.hpp"
#include "etcd/requests.hpp"

namespace test_etcd_requests {

using namespace npu_run::etcd;
using Catch::Matchers::Contains;

TEST_CASE("etcd: base64 both ways, padding and bytes above 127", "[etcd]") {
  CHECK(base64_encode("/npu/job1/foo") == "L25wdS9qb2IxL2Zvbw==");
  for (const std::string& text :
       std::vector<std::string>{"", "a", "ab", "abc", std::string("\xff\x00\x80", 3)})
    CHECK(base64_decode(base64_encode(text)) == text);
  CHECK_FALSE(base64_decode("abc").has_value());   // not a multiple of 4
  CHECK_FALSE(base64_decode("a*c=").has_value());  // not the alphabet
}

TEST_CASE("etcd: a prefix's range end is the next key after all of it", "[etcd]") {
  CHECK(prefix_end("/npu/job1/") == "/npu/job10");
  CHECK(prefix_end(std::string("a\xff", 2)) == "b");
  CHECK(prefix_end("") == std::string(1, '\0'));
}

TEST_CASE("etcd: endpoints as torchrun's --rdzv-endpoint writes them", "[etcd]") {
  const auto eps = parse_endpoints("h1:2379, h2,https://10.0.0.3:2381/,[::1]:2390");
  REQUIRE(eps.size() == 4);
  CHECK(eps[0].to_string() == "h1:2379");
  CHECK(eps[1].port == kDefaultPort);
  CHECK(eps[2].tls);
  CHECK(eps[2].to_string() == "10.0.0.3:2381");
  CHECK(eps[3].host == "::1");
  CHECK(eps[3].to_string() == "[::1]:2390");
  auto error = [](const std::string& text) {
    try {
      parse_endpoints(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(error("h1:2379,,h2"), Contains("an empty entry between commas"));
  CHECK_THAT(error("h1:99999"), Contains("'h1:99999': the port must be 1 to 65535"));
  CHECK_THAT(error("grpc://h1:2379"), Contains("the scheme must be http or https"));
  CHECK_THAT(error("::1:2379"), Contains("write an IPv6 address in brackets"));
  CHECK_THAT(error("h1:2379/v3"), Contains("without a path"));
}

TEST_CASE("etcd: requests in the gateway's JSON", "[etcd]") {
  CHECK(range_request("/a/", true) == Json::parse(R"({"key":"L2Ev","range_end":"L2Ew"})"));
  CHECK(put_request("k", "v", 7) == Json::parse(R"({"key":"aw==","value":"dg==","lease":"7"})"));
  CHECK_FALSE(put_request("k", "v").contains("lease"));
  const Json create = create_if_absent_request("/l", "me", 9);
  CHECK(create["compare"][0] ==
        Json::parse(R"({"target":"CREATE","key":"L2w=","result":"EQUAL","create_revision":"0"})"));
  CHECK(create["success"][0]["request_put"]["lease"] == "9");
  CHECK(create["failure"][0]["request_range"]["key"] == "L2w=");
  const Json guarded = guarded_txn_request("/l", 42, {{"/r", "1"}}, {"/x"});
  CHECK(guarded["compare"][0]["create_revision"] == "42");
  CHECK(guarded["success"].size() == 2);
  CHECK(lease_grant_request(5) == Json::parse(R"({"TTL":"5"})"));
}

TEST_CASE("etcd: answers with their zero fields left out", "[etcd]") {
  // An empty range has no kvs; numbers are strings.
  CHECK(range_kvs(Json::parse(R"({"header":{"revision":"12"}})")).empty());
  CHECK(header_revision(Json::parse(R"({"header":{"revision":"12"}})")) == 12);
  const auto kvs = range_kvs(Json::parse(
      R"({"kvs":[{"key":"L2w=","value":"bWU=","create_revision":"5","mod_revision":"6","version":"2"}]})"));
  REQUIRE(kvs.size() == 1);
  CHECK(kvs[0].key == "/l");
  CHECK(kvs[0].value == "me");
  CHECK(kvs[0].create_revision == 5);
  CHECK(kvs[0].lease == 0);  // absent
  // A failed txn has no "succeeded"; its failure branch read the holder.
  const TxnResult lost = txn_result(Json::parse(
      R"({"header":{"revision":"9"},"responses":[{"response_range":{"kvs":[{"key":"L2w=","value":"aGlt","create_revision":"3"}]}}]})"));
  CHECK_FALSE(lost.succeeded);
  CHECK(lost.read.at(0).value == "him");
  CHECK(txn_result(Json::parse(R"({"succeeded":true,"header":{"revision":"10"}})")).revision == 10);
  // A keepalive of an expired lease answers without TTL.
  CHECK(lease_result(Json::parse(R"({"result":{"ID":"77","TTL":"5"}})")).ttl == 5);
  CHECK(lease_result(Json::parse(R"({"result":{"ID":"77"}})")).ttl == 0);
  CHECK(lease_result(Json::parse(R"({"ID":"77","TTL":"2"})")).id == 77);
  CHECK_THROWS_AS(json_int(Json::parse(R"({"TTL":"x"})"), "TTL"), std::invalid_argument);
}

}  // namespace test_etcd_requests
