// Where worker output goes: untouched by default, per-rank files and prefixed console lines on
// request, filters for the console.
#include <boost/asio/ip/host_name.hpp>
#include <catch2/catch.hpp>
#include <filesystem>

#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/private_mounts.hpp"
#include "support/temp_dir.hpp"

namespace test_logs {

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
  return run_dir(dir.file("logs")) + "/attempt_0/" + std::to_string(rank) + "/" + stream + ".log";
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
    // torchrun's prefix: role and local rank, no space.
    CHECK(count_occurrences(f.out, "[default" + n + "]:out-" + n + "\n") == 1);
    CHECK(count_occurrences(f.err, "[default" + n + "]:err-" + n + "\n") == 1);
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

TEST_CASE("logs: --local-ranks-filter 0 with -t 3: rank 0 on the console, every rank in files",
          "[integration][logs]") {
  TempDir dir;
  const Finished f = run_npu_run(with_workers({"--nproc-per-node", "4", "--local-ranks-filter", "0",
                                               "-t", "3", "--log-dir", dir.file("logs")},
                                              kPrintBoth));
  REQUIRE(f.exit_code == 0);
  CHECK(count_occurrences(f.out, "out-") == 1);
  CHECK(count_occurrences(f.out, "[default0]:out-0") == 1);
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
  CHECK(count_occurrences(f.out, "[default11]:out-11") == 1);
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

TEST_CASE("logs: each run into one --log-dir gets a directory of its own", "[integration][logs]") {
  TempDir dir;
  const auto args = with_workers({"--log-dir", dir.file("logs"), "-t", "1"}, "echo hi-$RANK");
  const Finished first = run_npu_run(args);
  REQUIRE(first.exit_code == 0);
  const Finished second = run_npu_run(args);
  REQUIRE(second.exit_code == 0);
  const std::vector<std::string> runs = run_dirs(dir.file("logs"));
  REQUIRE(runs.size() == 2);
  for (const std::string& run : runs) {
    CHECK(read_file(run + "/attempt_0/0/stdout.log") == "hi-0\n");
    // The agent says where this run's logs are.
    CHECK_THAT(first.err + second.err, Contains("logs of this run: " + run));
  }
}

TEST_CASE("logs: --log-dir alone keeps error files only and leaves the console untouched",
          "[integration][logs]") {
  TempDir dir;
  const Finished f = run_npu_run(
      with_workers({"--nproc-per-node", "2", "--log-dir", dir.file("logs")}, kPrintBoth));
  REQUIRE(f.exit_code == 0);
  CHECK(count_occurrences(f.out, "out-0\n") == 1);
  CHECK(f.out.find("]:") == std::string::npos);
  CHECK_FALSE(std::filesystem::exists(rank_file(dir, 0, "stdout")));
  CHECK(std::filesystem::is_directory(run_dir(dir.file("logs")) + "/attempt_0/0"));
}

TEST_CASE("logs: -r 3 -t 3 tees and the prefix template comes from torchrun's variable",
          "[integration][logs]") {
  TempDir dir;
  const Finished f = run_npu_run(
      with_workers({"--nproc-per-node", "2", "-r", "3", "-t", "3", "--log-dir", dir.file("logs")},
                   kPrintBoth),
      {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "${role_name}:${rank}@${hostname}| "}});
  REQUIRE(f.exit_code == 0);
  const std::string host = boost::asio::ip::host_name();
  CHECK(count_occurrences(f.out, "default:1@" + host + "| out-1\n") == 1);
  CHECK(read_file(rank_file(dir, 1, "stderr")) == "err-1\n");
}

TEST_CASE("logs: a progress bar reaches the console before its newline", "[integration][logs]") {
  TempDir dir;
  const std::string gate = make_gate(dir.file("gate"));
  NpuRunProcess p(with_workers({"--tee", "3", "--log-dir", dir.file("logs")},
                               "printf ' 10%%|#\r 20%%|##'; read x < " + gate + "; echo"));
  // Shown while the worker still waits for the gate, with no newline written yet.
  p.wait_for_output("[default0]: 20%|##", 1, 10s);
  open_gate(gate);
  const Finished f = p.wait(10s);
  CHECK(f.exit_code == 0);
  CHECK(f.out == "[default0]: 10%|#\r[default0]: 20%|##\n");
  require_no_strays(p);
}

TEST_CASE("logs: --duplicate-*-filters copy the matching console lines of every rank to one file",
          "[integration][logs]") {
  // torchrun 2.x's habit: `-t 3 --duplicate-stdout-filters loss` keeps the loss lines of all
  // ranks in attempt_<n>/filtered_stdout.log, each with its rank's prefix.
  TempDir dir;
  const std::string script =
      "echo \"step 1 loss 0.$RANK\"; echo noise-$RANK; echo \"a,b $RANK\"; "
      "echo \"Error on $RANK\" >&2; echo quiet >&2";
  Finished f = run_npu_run(with_workers(
      {"--nproc-per-node", "2", "-t", "3", "--log-dir", dir.file("logs"),
       "--duplicate-stdout-filters", "loss,a,,b", "--duplicate_stderr_filters", "Error"},
      script));
  INFO(f.out << f.err);
  REQUIRE(f.exit_code == 0);
  const std::string attempt = run_dir(dir.file("logs")) + "/attempt_0/";
  const std::string out = read_file(attempt + "filtered_stdout.log");
  for (const std::string n : {"0", "1"}) {
    CHECK(count_occurrences(out, "[default" + n + "]:step 1 loss 0." + n + "\n") == 1);
    CHECK(count_occurrences(out, "[default" + n + "]:a,b " + n + "\n") == 1);  // ",," is a comma
    CHECK(count_occurrences(f.out, "[default" + n + "]:noise-" + n + "\n") == 1);
  }
  CHECK(count_occurrences(out, "\n") == 4);  // the noise is not copied
  const std::string err = read_file(attempt + "filtered_stderr.log");
  CHECK(err.size() == std::string("[default0]:Error on 0\n[default1]:Error on 1\n").size());
  CHECK(count_occurrences(err, "[default1]:Error on 1\n") == 1);

  // Without -t the console shows the output as it would have (no prefix); the copy has them.
  TempDir plain;
  f = run_npu_run(with_workers({"--nproc-per-node", "2", "--log-dir", plain.file("logs"),
                                "--duplicate-stdout-filters", "loss"},
                               script));
  REQUIRE(f.exit_code == 0);
  CHECK(count_occurrences(f.out, "step 1 loss 0.1\n") == 1);
  CHECK(count_occurrences(f.out, "[default") == 0);
  const std::string copied =
      read_file(run_dir(plain.file("logs")) + "/attempt_0/filtered_stdout.log");
  CHECK(count_occurrences(copied, "[default1]:step 1 loss 0.1\n") == 1);
  CHECK(count_occurrences(copied, "\n") == 2);
}

TEST_CASE(
    "logs: a full log disk is named once, the console keeps every line, the logs that lost "
    "output are listed",
    "[integration][logs]") {
  TempDir dir;
  const std::string logs = dir.file("small");
  INFO("a mount namespace with a small tmpfs needs root, as the suite's namespace tests do");
  REQUIRE(mount_small_tmpfs(logs, "256k"));
  // 40,000 numbered lines (about 600 KiB) to a 256 KiB file system.
  const std::string chatty = "i=0; while [ $i -lt 40000 ]; do echo line-$RANK-$i; i=$((i+1)); done";
  SECTION("teed: npu_run's own write fails, the console copy goes on") {
    const Finished f = run_npu_run(with_workers({"--log-dir", logs, "-t", "3"}, chatty));
    INFO(f.err);
    CHECK(f.exit_code == 0);
    CHECK_THAT(f.out, Contains("line-0-39999"));  // the console has it all
    CHECK_THAT(f.err, Contains("cannot write " + logs) &&
                          Contains("stdout.log: No space left on device (ENOSPC); the file is "
                                   "incomplete from here on, the console still gets this stream"));
    CHECK_THAT(f.err, Contains("log file of this attempt lost output: " + logs) &&
                          Contains("choose another --log-dir"));
    // Once per file, not once per line: the worker's log, and the job's timeline at the end.
    size_t said = 0;
    for (auto at = f.err.find("cannot write"); at != std::string::npos;
         at = f.err.find("cannot write", at + 1))
      ++said;
    CHECK(said == 2);
    CHECK_THAT(f.err, Contains("cannot write the job's timeline " + logs) &&
                          Contains("free space there, or give --timeline another file"));
  }
  SECTION("redirected: the worker's own writes fail; the summary says its logs are incomplete") {
    // dash's echo ignores the write error, as much code does; the worker then fails.
    const Finished f =
        run_npu_run(with_workers({"--log-dir", logs, "-r", "3"}, chatty + "; exit 3"));
    INFO(f.err);
    CHECK(f.exit_code == 3);
    CHECK_THAT(f.err, Contains("2 log files of this attempt lost output"));
    // In the failure summary, under the root cause's row.
    CHECK_THAT(f.err, Contains("      incomplete: " + logs) &&
                          Contains("stderr.log (may be incomplete: its file system is full"));
  }
}

// Before the rendezvous gives this node a rank, its lines name its host alone: not "node ?".
TEST_CASE("logs: a node without a rank yet is its host in the log lines", "[integration][logs]") {
  const Finished f =
      run_npu_run({"--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:" + std::to_string(unused_port()),
                   "--rdzv-timeout", "1", "--no-python", "/bin/true"},
                  {{kHostNameVariable, "lg-host"}});
  INFO(f.err);
  CHECK(f.exit_code == 125);
  CHECK_THAT(f.err, Contains("[npu_run lg-host] ") && !Contains("node ?"));
}

}  // namespace test_logs
