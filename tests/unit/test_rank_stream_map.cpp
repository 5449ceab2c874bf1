#include <catch2/catch.hpp>

#include "config/rank_stream_map.hpp"

namespace test_rank_stream_map {

using Catch::Matchers::Contains;
using npu_run::RankStreamMap;
using npu_run::StdStreams;

TEST_CASE("stream maps: one code applies to every local rank", "[streams]") {
  const auto map = RankStreamMap::parse("3", "--tee");
  CHECK(map.for_rank(0) == StdStreams::kBoth);
  CHECK(map.for_rank(31) == StdStreams::kBoth);
  CHECK(RankStreamMap::parse("0", "--tee").empty());
  CHECK(RankStreamMap::parse("1", "--tee").for_rank(5) == StdStreams::kOut);
  CHECK(RankStreamMap::parse("2", "--tee").for_rank(5) == StdStreams::kErr);
}

TEST_CASE("stream maps: per-rank maps accept multi-digit local ranks", "[streams]") {
  // torchrun's parser only handled single-digit ranks; 12 must mean twelve.
  const auto map = RankStreamMap::parse("0:3,12:1,7:2", "-t");
  CHECK(map.for_rank(0) == StdStreams::kBoth);
  CHECK(map.for_rank(12) == StdStreams::kOut);
  CHECK(map.for_rank(7) == StdStreams::kErr);
  CHECK(map.for_rank(1) == StdStreams::kNone);
  CHECK(map.for_rank(2) == StdStreams::kNone);
  CHECK(map.highest_named_rank() == 12);
  CHECK_FALSE(map.empty());
}

TEST_CASE("stream maps: bad values name the flag and show the syntax", "[streams]") {
  CHECK_THROWS_WITH(RankStreamMap::parse("4", "--tee"),
                    Contains("--tee '4': '4' is not a valid stream code"));
  CHECK_THROWS_WITH(RankStreamMap::parse("0:4", "-r"), Contains("'4' is not a valid stream code"));
  CHECK_THROWS_WITH(RankStreamMap::parse("x:1", "-r"), Contains("'x' is not a valid local rank"));
  CHECK_THROWS_WITH(RankStreamMap::parse("0:1,1", "-r"),
                    Contains("item '1' is not local_rank:code"));
  CHECK_THROWS_WITH(RankStreamMap::parse("0:1:2", "-r"),
                    Contains("item '0:1:2' is not local_rank:code"));
  CHECK_THROWS_WITH(RankStreamMap::parse("0:1,0:2", "-r"), Contains("local rank 0 appears twice"));
  CHECK_THROWS_WITH(RankStreamMap::parse("", "--tee"), Contains("0:3,12:1"));
}

}  // namespace test_rank_stream_map
