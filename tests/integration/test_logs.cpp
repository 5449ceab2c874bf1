// Where worker output goes: untouched by default, per-rank files and prefixed console lines on
// request, filters for the console.
#include <catch2/catch.hpp>
#include <filesystem>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

const std::string kPrintBoth = "echo out-$RANK; echo err-$RANK >&2";

std::vector<std::string> with_workers(std::vector<std::string> flags, const std::string& script) {
  for (const char* a : {"--no-python", "/bin/sh", "-c"}) flags.emplace_back(a);
  flags.push_back(script);
  return flags;
}

std::string rank_file(const TempDir& dir, int rank, const char* stream) {
  return dir.file("logs/none/attempt_0/" + std::to_string(rank) + "/" + stream + ".log");
}

}  // namespace

TEST_CASE("logs: by default worker output reaches the console byte for byte",
          "[integration][logs]") {
  const Finished f = run_npu_run(
      with_workers({"--nproc-per-node", "2"}, "printf \"no-newline-$RANK\"; printf 'e' >&2"));
  REQUIRE(f.exit_code == 0);
  // Untouched: no prefix, no newline added.
  CHECK(count_occurrences(f.out, "no-newline-0") == 1);
  CHECK(count_occurrences(f.out, "no-newline-1") == 1);
  CHECK(f.out.size() == std::string("no-newline-0no-newline-1").size());
}

TEST_CASE("logs: --tee 3 writes raw files and prefixed console lines", "[integration][logs]") {
  TempDir dir;
  const Finished f = run_npu_run(with_workers(
      {"--nproc-per-node", "3", "--tee", "3", "--log-dir", dir.file("logs")}, kPrintBoth));
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  for (int r = 0; r < 3; ++r) {
    const std::string n = std::to_string(r);
    CHECK(count_occurrences(f.out, "[" + n + "]: out-" + n + "\n") == 1);
    CHECK(count_occurrences(f.err, "[" + n + "]: err-" + n + "\n") == 1);
    CHECK(read_file(rank_file(dir, r, "stdout")) == "out-" + n + "\n");
    CHECK(read_file(rank_file(dir, r, "stderr")) == "err-" + n + "\n");
  }
}

TEST_CASE("logs: --redirects 1 keeps stdout off the console, in the file", "[integration][logs]") {
  TempDir dir;
  const Finished f = run_npu_run(with_workers(
      {"--nproc-per-node", "2", "-r", "1", "--log-dir", dir.file("logs")}, kPrintBoth));
  REQUIRE(f.exit_code == 0);
  CHECK(f.out.find("out-") == std::string::npos);
  CHECK(count_occurrences(f.err, "err-0\n") == 1);  // stderr untouched: inherited, no prefix
  CHECK(f.err.find("]: err-") == std::string::npos);
  CHECK(read_file(rank_file(dir, 1, "stdout")) == "out-1\n");
  CHECK_FALSE(std::filesystem::exists(rank_file(dir, 1, "stderr")));
}

TEST_CASE("logs: --local-ranks-filter 0 with --log-dir: rank 0 on the console, every rank in files",
          "[integration][logs]") {
  TempDir dir;
  const Finished f = run_npu_run(with_workers(
      {"--nproc-per-node", "4", "--local-ranks-filter", "0", "--log-dir", dir.file("logs")},
      kPrintBoth));
  REQUIRE(f.exit_code == 0);
  CHECK(count_occurrences(f.out, "out-") == 1);
  CHECK(count_occurrences(f.out, "[0]: out-0") == 1);
  for (int r = 0; r < 4; ++r)
    CHECK(read_file(rank_file(dir, r, "stdout")) == "out-" + std::to_string(r) + "\n");
}

TEST_CASE("logs: --local-ranks-filter without files silences the other ranks",
          "[integration][logs]") {
  const Finished f =
      run_npu_run(with_workers({"--nproc-per-node", "3", "--local-ranks-filter", "1"}, kPrintBoth));
  REQUIRE(f.exit_code == 0);
  CHECK(f.out == "out-1\n");
  CHECK(count_occurrences(f.err, "err-") == 1);
}

TEST_CASE("logs: per-rank maps work for local ranks with two digits", "[integration][logs]") {
  TempDir dir;
  const Finished f = run_npu_run(with_workers(
      {"--nproc-per-node", "12", "-t", "0:3,11:1", "--log-dir", dir.file("logs")}, kPrintBoth));
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK(read_file(rank_file(dir, 11, "stdout")) == "out-11\n");
  CHECK_FALSE(std::filesystem::exists(rank_file(dir, 11, "stderr")));
  CHECK(read_file(rank_file(dir, 0, "stderr")) == "err-0\n");
  CHECK_FALSE(std::filesystem::exists(rank_file(dir, 5, "stdout")));
  CHECK(count_occurrences(f.out, "[11]: out-11") == 1);
  CHECK(count_occurrences(f.out, "out-5\n") == 1);  // not teed: straight to the console
}

TEST_CASE("logs: a prefix template relays console lines without files", "[integration][logs]") {
  const Finished f = run_npu_run(with_workers(
      {"--nproc-per-node", "2", "--log-line-prefix-template", "${role_name}/${local_rank}> "},
      "printf 'a\\nb'"));
  REQUIRE(f.exit_code == 0);
  // The unterminated last line still gets its prefix and a line of its own. Lines of different
  // ranks may interleave, but never within a line.
  for (const char* line :
       {"default/0> a\n", "default/0> b\n", "default/1> a\n", "default/1> b\n"}) {
    CHECK(count_occurrences(f.out, line) == 1);
  }
  CHECK(f.out.size() == 4 * std::string("default/0> a\n").size());
}

TEST_CASE("logs: -t without --log-dir writes to a kept temporary directory",
          "[integration][logs]") {
  TempDir tmp;
  const Finished f = run_npu_run(with_workers({"--nproc-per-node", "2", "-t", "1"}, kPrintBoth),
                                 {{"TMPDIR", tmp.path()}});
  REQUIRE(f.exit_code == 0);
  CHECK_THAT(f.err, Contains("worker log files go to " + tmp.path() + "/npu_run_none_"));
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(tmp.path())) {
    if (entry.path().filename() == "stdout.log") ++files;
  }
  CHECK(files == 2);
}

TEST_CASE("logs: a rerun with the same run id warns before overwriting", "[integration][logs]") {
  TempDir dir;
  const auto args = with_workers({"--log-dir", dir.file("logs")}, "echo hi");
  REQUIRE(run_npu_run(args).exit_code == 0);
  const Finished f = run_npu_run(args);
  REQUIRE(f.exit_code == 0);
  CHECK_THAT(f.err,
             Contains("holds logs of an earlier run with run id 'none'") && Contains("--run-id"));
}
