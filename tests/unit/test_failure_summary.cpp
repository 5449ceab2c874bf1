#include <catch2/catch.hpp>
#include <csignal>

#include "agent/records/failure_summary.hpp"
#include "support/temp_dir.hpp"

namespace test_failure_summary {

using namespace npu_run;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using npu_run::testing::TempDir;

namespace {

GroupResult failed_group() {
  GroupResult r;
  r.outcome = GroupResult::Outcome::kFailed;
  r.elapsed = std::chrono::milliseconds(2500);
  for (int i = 0; i < 4; ++i) {
    WorkerOutcome w;
    w.local_rank = i;
    w.global_rank = 8 + i;
    w.pid = 1000 + i;
    w.status = ExitStatus::exited(0);
    w.stderr_log = "/logs/attempt_0/" + std::to_string(i) + "/stderr.log";
    r.workers.push_back(w);
  }
  r.workers[2].status = ExitStatus::exited(3);
  r.workers[0].status = ExitStatus::signaled(SIGTERM);
  r.workers[0].stopped_by_agent = true;
  r.root_cause = 2;
  return r;
}

}  // namespace

TEST_CASE("summary: root cause first, then the other unclean exits, clean ones counted",
          "[summary]") {
  const std::string text =
      format_failure_summary(failed_group(), SummaryContext{"node-a", 2, 0, ""},
                             {{2, WorkerError{"ValueError: bad batch", "", "/e2.json"}}});
  CHECK_THAT(text,
             Contains("job failed on node 2 (node-a) after 2.5 s, attempt 0; root cause first"));
  const auto root = text.find("exit code 3");
  const auto other = text.find("signal SIGTERM (15), stopped by npu_run");
  REQUIRE(root != std::string::npos);
  REQUIRE(other != std::string::npos);
  CHECK(root < other);
  CHECK_THAT(text,
             Contains("1002") && Contains("node-a") && Contains("error: ValueError: bad batch"));
  CHECK_THAT(text, Contains("log: /logs/attempt_0/2/stderr.log"));
  CHECK_THAT(text, Contains("(2 other workers exited 0)"));
  CHECK(text.find("1001") == std::string::npos);  // clean exits are not listed
}

TEST_CASE("summary: a stop by signal lists every worker it stopped", "[summary]") {
  GroupResult r = failed_group();
  r.outcome = GroupResult::Outcome::kStopped;
  r.stop_signal = SIGTERM;
  r.root_cause.reset();
  r.workers[3].survived_kill = true;
  const std::string text = format_failure_summary(r, SummaryContext{"h", 0, 1, ""}, {});
  CHECK_THAT(text, Contains("npu_run stopped by SIGTERM on node 0 (h)") && Contains("attempt 1"));
  CHECK_THAT(text, Contains("survived SIGKILL"));
}

TEST_CASE("error files: torchelastic's format, first line only, garbage ignored", "[summary]") {
  TempDir dir;
  const auto good = dir.write(
      "e.json", R"({"message": {"message": "RuntimeError: boom\nmore", "extraInfo": {}}})");
  CHECK(read_worker_error(good).message == "RuntimeError: boom");
  CHECK(read_worker_error(dir.write("s.json", R"({"message": "plain"})")).message == "plain");
  CHECK(read_worker_error(dir.write("bad.json", "not json")).message.empty());
  CHECK(read_worker_error(dir.write("other.json", R"([1,2])")).message.empty());
  CHECK(read_worker_error(dir.file("missing.json")).message.empty());
  // A worker could write anything there: a huge file is not read whole.
  CHECK(
      read_worker_error(dir.write("huge.json", std::string(size_t{2} << 20, ' '))).message.empty());
}

TEST_CASE("error files: the root cause's traceback is shown, its last lines when long",
          "[summary]") {
  TempDir dir;
  std::string stack = "Traceback (most recent call last):\\n";
  for (int i = 0; i < 50; ++i)
    stack += "  File \\\"train.py\\\", line " + std::to_string(i) + "\\n";
  stack += "ValueError: bad batch\\n";
  const std::string path = dir.write(
      "e.json",
      R"({"message": {"message": "ValueError: bad batch", "extraInfo": {"py_callstack": ")" +
          stack + R"(", "timestamp": "1700000000"}}})");
  const WorkerError error = read_worker_error(path);
  CHECK(error.message == "ValueError: bad batch");
  CHECK(error.path == path);
  CHECK_THAT(error.traceback, StartsWith("... (12 lines left out)\n"));
  CHECK_THAT(error.traceback, Contains("line 49\nValueError: bad batch\n"));
  const std::string text = format_failure_summary(
      failed_group(), SummaryContext{"node-a", 2, 0, ""}, {{2, error}, {0, error}});
  CHECK_THAT(text,
             Contains("      traceback (from " + path + "):\n        ... (12 lines left out)\n"));
  CHECK_THAT(text,
             Contains("        ValueError: bad batch\n      log: /logs/attempt_0/2/stderr.log"));
  // Only the root cause's: the others keep their one-line error.
  CHECK(text.find("traceback (from") == text.rfind("traceback (from"));
}

}  // namespace test_failure_summary
