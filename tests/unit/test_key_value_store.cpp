// The workers' store's semantics, as torch's own server has them (TCPStoreBackend.cpp), checked
// without sockets. What real clients see is tested by the peer suite.
#include <catch2/catch.hpp>

#include "store/key_value_store.hpp"

namespace test_key_value_store {

using namespace npu_run::store;

TEST_CASE("store: compare_set on a missing key", "[unit][store]") {
  KeyValueStore s;
  std::vector<ClientId> woken;
  // A non-empty expected value: nothing changes and the expected value comes back.
  CHECK(s.compare_set("k", "x", "y", woken) == "x");
  CHECK_FALSE(s.check({"k"}));
  // An empty one creates the key.
  CHECK(s.compare_set("k", "", "y", woken) == "y");
  CHECK(s.get("k") == "y");
  // Present: swapped when it matches, and the current value is answered either way.
  CHECK(s.compare_set("k", "nope", "z", woken) == "y");
  CHECK(s.compare_set("k", "y", "z", woken) == "z");
}

TEST_CASE("store: add follows std::stoll and refuses what is not an integer", "[unit][store]") {
  KeyValueStore s;
  std::vector<ClientId> woken;
  CHECK(s.add("n", 5, woken) == 5);  // a missing key starts from 0
  CHECK(s.add("n", -7, woken) == -2);
  CHECK(s.get("n") == "-2");
  s.set("spaced", "  +12abc", woken);  // stoll: blanks, a sign, digits, the rest ignored
  CHECK(s.add("spaced", 1, woken) == 13);
  s.set("word", "abc", woken);
  CHECK_THROWS_AS(s.add("word", 1, woken), StoreRequestError);
  CHECK(s.get("word") == "abc");  // unchanged
  s.set("huge", "99999999999999999999", woken);
  CHECK_THROWS_AS(s.add("huge", 1, woken), StoreRequestError);  // stoll's out_of_range
  s.set("min", "-9223372036854775808", woken);
  CHECK(s.add("min", 0, woken) == INT64_MIN);
}

TEST_CASE("store: waits park and are woken by the writes that complete them", "[unit][store]") {
  KeyValueStore s;
  std::vector<ClientId> woken;
  CHECK(s.wait(1, {}));  // nothing to wait for
  CHECK_FALSE(s.wait(1, {"a", "b"}));
  CHECK_FALSE(s.wait(2, {"b"}));
  CHECK(s.parked() == 2);
  s.set("a", "1", woken);
  CHECK(woken.empty());  // 1 still misses b
  s.add("b", 1, woken);
  CHECK(woken == std::vector<ClientId>{1, 2});
  CHECK(s.parked() == 0);
  CHECK(s.wait(3, {"a", "b"}));  // present now: answered at once
  woken.clear();
  CHECK_FALSE(s.wait(4, {"c"}));
  s.append("c", "x", woken);
  CHECK(woken == std::vector<ClientId>{4});
  woken.clear();
  CHECK_FALSE(s.wait(5, {"d", "e"}));
  s.multi_set({"d", "e"}, {"1", "2"}, woken);
  CHECK(woken == std::vector<ClientId>{5});
  woken.clear();
  CHECK_FALSE(s.wait(6, {"f"}));
  CHECK(s.compare_set("f", "", "1", woken) == "1");  // unlike torch, this wakes too
  CHECK(woken == std::vector<ClientId>{6});
}

TEST_CASE("store: a cancelled or repeated wait is counted once", "[unit][store]") {
  KeyValueStore s;
  std::vector<ClientId> woken;
  CHECK_FALSE(s.wait(1, {"a"}));
  s.forget_wait(1);  // cancel_wait, or the connection closed
  CHECK(s.parked() == 0);
  s.set("a", "1", woken);
  CHECK(woken.empty());
  CHECK_FALSE(s.wait(2, {"x", "y"}));
  CHECK_FALSE(s.wait(2, {"y"}));  // torch 1.13 after a client-side timeout: the new wait counts
  s.set("y", "1", woken);
  CHECK(woken == std::vector<ClientId>{2});
  // Waiting and cancelling in a loop on a key nobody writes keeps memory bounded.
  for (int i = 0; i < 100'000; ++i) {
    CHECK_FALSE(s.wait(7, {"never"}));
    s.forget_wait(7);
  }
  CHECK(s.parked() == 0);
}

TEST_CASE("store: get, multi_get, check, num_keys, delete_key and clear", "[unit][store]") {
  KeyValueStore s;
  std::vector<ClientId> woken;
  CHECK_THROWS_AS(s.get("missing"), StoreRequestError);
  s.multi_set({"a", "b"}, {"1", "2"}, woken);
  CHECK(s.multi_get({"b", "a"}) == std::vector<std::string>{"2", "1"});
  CHECK_THROWS_AS(s.multi_get({"a", "missing"}), StoreRequestError);
  CHECK(s.check({"a", "b"}));
  CHECK_FALSE(s.check({"a", "zz"}));
  CHECK(s.num_keys() == 2);
  CHECK(s.delete_key("a"));
  CHECK_FALSE(s.delete_key("a"));
  CHECK(s.num_keys() == 1);
  CHECK_FALSE(s.wait(1, {"later"}));
  s.clear();
  CHECK(s.num_keys() == 0);
  CHECK(s.parked() == 0);
  CHECK(s.bytes() == 0);
}

TEST_CASE("store: the store's size is capped", "[unit][store]") {
  KeyValueStore s(64);
  std::vector<ClientId> woken;
  s.set("k", std::string(60, 'v'), woken);
  CHECK_THROWS_AS(s.set("k2", "0123456789", woken), StoreRequestError);
  s.set("k", "small", woken);  // replacing frees what the old value took
  s.set("k2", "0123456789", woken);
  CHECK_THROWS_AS(s.append("k2", std::string(60, 'x'), woken), StoreRequestError);
  CHECK(s.get("k2") == "0123456789");
}

}  // namespace test_key_value_store
