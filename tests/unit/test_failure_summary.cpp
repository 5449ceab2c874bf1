#include <catch2/catch.hpp>
#include <csignal>

#include "agent/failure_summary.hpp"
#include "support/temp_dir.hpp"

using namespace npu_run;
using Catch::Matchers::Contains;
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
  const std::string text = format_failure_summary(
      failed_group(), SummaryContext{"node-a", 2, 0, ""}, {{2, "ValueError: bad batch"}});
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
  CHECK(read_error_file_message(good) == "RuntimeError: boom");
  CHECK(read_error_file_message(dir.write("s.json", R"({"message": "plain"})")) == "plain");
  CHECK(read_error_file_message(dir.write("bad.json", "not json")).empty());
  CHECK(read_error_file_message(dir.write("other.json", R"([1,2])")).empty());
  CHECK(read_error_file_message(dir.file("missing.json")).empty());
}
