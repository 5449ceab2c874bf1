#include <catch2/catch.hpp>

#include "basics/usage_error.hpp"
#include "devices/device_list.hpp"

namespace test_device_list {

using Catch::Matchers::Contains;
using npu_run::format_device_list;
using npu_run::parse_device_list;
using npu_run::UsageError;

TEST_CASE("device lists: ranges, lists and mixtures keep the given order", "[devices]") {
  CHECK(parse_device_list("4-7", "--devices") == std::vector<int>{4, 5, 6, 7});
  CHECK(parse_device_list("0,2,4,6", "--devices") == std::vector<int>{0, 2, 4, 6});
  CHECK(parse_device_list("0-1,4-5", "--devices") == std::vector<int>{0, 1, 4, 5});
  CHECK(parse_device_list("6,3,0", "--devices") == std::vector<int>{6, 3, 0});
  CHECK(parse_device_list("12", "--devices") == std::vector<int>{12});
  CHECK(parse_device_list("3-3", "--devices") == std::vector<int>{3});
}

TEST_CASE("device lists: malformed text is rejected with the flag, the text and the fix",
          "[devices]") {
  CHECK_THROWS_WITH(parse_device_list("", "--devices"), Contains("--devices is empty"));
  CHECK_THROWS_WITH(parse_device_list("7-4", "--devices"), Contains("runs backwards; write 4-7"));
  CHECK_THROWS_WITH(parse_device_list("0,1,1", "--devices"), Contains("device 1 is listed twice"));
  CHECK_THROWS_WITH(parse_device_list("0-3,2", "--devices"), Contains("device 2 is listed twice"));
  CHECK_THROWS_WITH(parse_device_list("a-b", "PET_DEVICES"),
                    Contains("PET_DEVICES 'a-b': 'a' is not a device id"));
  CHECK_THROWS_WITH(parse_device_list("0,,1", "--devices"), Contains("'' is not a device id"));
  CHECK_THROWS_WITH(parse_device_list("-1", "--devices"), Contains("is not a device id"));
  CHECK_THROWS_WITH(parse_device_list("0-99999", "--devices"),
                    Contains("'99999' is not a device id"));
  CHECK_THROWS_AS(parse_device_list("1 2", "--devices"), UsageError);
}

TEST_CASE("device lists format back compactly", "[devices]") {
  CHECK(format_device_list({4, 5, 6, 7}) == "4-7");
  CHECK(format_device_list({0, 2, 4}) == "0,2,4");
  CHECK(format_device_list({3}) == "3");
  CHECK(format_device_list({}).empty());
}

}  // namespace test_device_list
