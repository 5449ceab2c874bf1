#include <catch2/catch.hpp>

#include "support/temp_dir.hpp"
#include "workers/line_copy.hpp"

namespace test_line_copy {

using namespace npu_run;
using npu_run::testing::read_file;
using npu_run::testing::TempDir;

TEST_CASE("filtered copies: matching lines with the rank's prefix, however the bytes arrive",
          "[line-copy]") {
  TempDir dir;
  const std::string path = dir.file("filtered_stdout.log");
  {
    DuplicateLines copy(path, {"loss", "acc"}, "[default1]:");
    REQUIRE(copy.is_open());
    copy.feed("step 1 lo");
    copy.feed("ss 2.5\nnothing here\nacc 0.9\r\n");  // "\r\n" ends one line, not two
    copy.feed("bar 10% loss\rbar 20% loss\r");       // each redraw is a line of its own
    copy.feed("\nlast loss without newline");
    copy.finish();
  }
  CHECK(read_file(path) ==
        "[default1]:step 1 loss 2.5\n[default1]:acc 0.9\n[default1]:bar 10% loss\n"
        "[default1]:bar 20% loss\n[default1]:last loss without newline\n");
}

TEST_CASE("filtered copies: ranks append to one file and a long line is cut, not held",
          "[line-copy]") {
  TempDir dir;
  const std::string path = dir.file("filtered_stderr.log");
  DuplicateLines a(path, {"Error"}, "[0]:");
  DuplicateLines b(path, {"Error"}, "[1]:");
  a.feed("Error one\n");
  b.feed("Error two\n");
  const std::string huge(DuplicateLines::kMaxLine * 3, 'x');
  a.feed("Error " + huge);
  a.feed(huge + "\n");
  a.feed("ok\n");
  const std::string text = read_file(path);
  CHECK(text.rfind("[0]:Error one\n[1]:Error two\n[0]:Error xxx", 0) == 0);
  CHECK(text.size() == 2 * 14 + 4 + DuplicateLines::kMaxLine + 1);
}

TEST_CASE("filtered copies: a file that cannot be opened copies nothing and harms nothing",
          "[line-copy]") {
  DuplicateLines copy("/nonexistent/dir/filtered_stdout.log", {"x"}, "");
  CHECK_FALSE(copy.is_open());
  copy.feed("x\n");
  copy.finish();
}

}  // namespace test_line_copy
