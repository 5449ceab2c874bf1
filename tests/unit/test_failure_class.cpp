// The restart classification and what feeds it: the table of device and link faults (a test
// for each row), Python tracebacks, the OOM killer's counter, and the rules themselves.
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "agent/core/failure_evidence.hpp"
#include "agent/core/oom_kills.hpp"
#include "basics/exit_status.hpp"
#include "health/fault_patterns.hpp"
#include "rendezvous/state/failure_class.hpp"
#include "workers/python_traceback.hpp"

namespace test_failure_class {

using namespace npu_run;
using Catch::Matchers::Contains;
using rdzv::FailureClass;
using rdzv::FailureReport;
using namespace std::chrono_literals;

TEST_CASE("fault patterns: every row of the table is found in a line that names it", "[classify]") {
  // One line per row, as the tools print them; the table and this list grow together.
  const std::vector<std::pair<std::string, std::string>> lines = {
      {"EI0006", "[ERROR] HCCL(1234): EI0006: Getting socket times out. Reason: 1. The remote"},
      {"EI0016", "RuntimeError: HCCL function error: EI0016: link setup refused by peer"},
      {"UCE", "RuntimeError: UCE ERROR happened. [ERROR] 2026-11-26 ERR00100 PTA call acl api"},
      {"multi-bit ECC", "RuntimeError: HBM MULTI BIT ECC ERROR happened."},
      {"suspected device memory", "RuntimeError: SUSPECT MEM ERROR happened."},
      {"HCCS link", "RuntimeError: HCCS LINK ERROR happened."},
      {"retry", "RuntimeError: HCCL OP RETRY FAILED happened."},
      {"peer's device", "RuntimeError: SUSPECT REMOTE ERROR happened."},
      {"507053", "RuntimeError: ACL stream synchronize failed, error code:507053"},
      {"507054", "RuntimeError: ACL stream synchronize failed, error code:507054"},
      {"was lost", "ascend driver: Device lost (device 3)"},
      {"heartbeat lost", "[ERROR] DRV: device 5 heartbeat lost"},
      {"ECC error (CUDA)", "RuntimeError: CUDA error: uncorrectable ECC error encountered"},
      {"NVLink", "NCCL WARN NVLink error detected on link 2"},
  };
  REQUIRE(lines.size() == fault_patterns().size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& [meaning, line] = lines[i];
    INFO(line);
    const auto match = find_fault("loss 0.3\n" + line + "\nTraceback (most recent call last):\n");
    REQUIRE(match.has_value());
    CHECK_THAT(match->meaning, Catch::Matchers::Contains(meaning));
    CHECK(match->meaning == fault_patterns()[i].meaning);
    CHECK(match->line == line);
  }
}

TEST_CASE("fault patterns: ordinary failures and a peer's timeout name no fault", "[classify]") {
  CHECK_FALSE(find_fault("ValueError: bad value\n"));
  CHECK_FALSE(
      find_fault("RuntimeError: EI0002: The wait execution of the Notify register times out"));
  CHECK_FALSE(find_fault("RuntimeError: CUDA error: an illegal memory access was encountered"));
  CHECK_FALSE(find_fault("RuntimeError: FORCE STOP happened."));
  CHECK_FALSE(find_fault(""));
  const auto cut = find_fault("  EI0006 " + std::string(1000, 'x'));
  REQUIRE(cut);
  CHECK(cut->line.size() == kMaxFaultLine);
  CHECK(cut->line.starts_with("EI0006 xxx"));
}

TEST_CASE("python tracebacks: the last exception, its type and innermost frame", "[classify]") {
  const std::string trace =
      "step 1\n"
      "Traceback (most recent call last):\n"
      "  File \"/work/examples/train.py\", line 120, in <module>\n"
      "    main()\n"
      "  File \"/work/examples/train.py\", line 88, in step\n"
      "    raise ValueError(f\"bad batch {i}\")\n"
      "ValueError: bad batch 3\n";
  auto e = last_python_exception(trace);
  REQUIRE(e);
  CHECK(e->type == "ValueError");
  CHECK(e->frame == "train.py:88 in step");
  // Chained: the last one counts; a bare exception line; carriage returns.
  e = last_python_exception(trace +
                            "\nDuring handling of the above exception, another exception "
                            "occurred:\n\nTraceback (most recent call last):\r\n  File \"x/y.py\", "
                            "line 7, in f\r\n    g()\r\nKeyboardInterrupt\r\n");
  REQUIRE(e);
  CHECK(e->type == "KeyboardInterrupt");
  CHECK(e->frame == "y.py:7 in f");
  // A dotted type; a frame from a SyntaxError without a traceback header.
  e = last_python_exception(
      "Traceback (most recent call last):\n  File \"a.py\", line 1, in "
      "<module>\ntorch.OutOfMemoryError: CUDA out of memory\n");
  REQUIRE(e);
  CHECK(e->type == "torch.OutOfMemoryError");
  e = last_python_exception(
      "  File \"/tmp/train.py\", line 4\n    def (\n        ^\nSyntaxError: "
      "invalid syntax\n");
  REQUIRE(e);
  CHECK(e->type == "SyntaxError");
  CHECK(e->frame == "train.py:4");
  CHECK_FALSE(last_python_exception("loss 0.5\nValueError: not after a traceback\n"));
  CHECK_FALSE(last_python_exception(""));
}

TEST_CASE("python tracebacks: argparse's usage error", "[classify]") {
  CHECK(
      names_usage_error("usage: train.py [-h] --cfg CFG\ntrain.py: error: the following "
                        "arguments are required: --cfg\n"));
  CHECK_FALSE(names_usage_error("train.py: error: no usage line before\n"));
  CHECK_FALSE(names_usage_error("usage: train.py [-h]\n"));
}

namespace {

FailureReport failure_with(const rdzv::FailureEvidence& evidence) {
  FailureReport f;
  f.host = "host-b";
  f.node_rank = 1;
  f.rank = 5;
  f.evidence = evidence;
  return f;
}

}  // namespace

TEST_CASE("classification: the node's faults are infrastructure", "[classify]") {
  FailureReport lost = failure_with({});
  lost.lost = true;
  CHECK(rdzv::classify_failure(lost, nullptr).reason == "infrastructure: node 1 (host-b) was lost");
  FailureReport gate = failure_with({});
  gate.exit_code = kExitHealth;
  CHECK(rdzv::classify_failure(gate, nullptr).kind == FailureClass::kInfrastructure);
  rdzv::FailureEvidence oom;
  oom.oom = true;
  CHECK(rdzv::classify_failure(failure_with(oom), nullptr).reason ==
        "infrastructure: rank 5 on node 1 (host-b) was killed by the kernel's OOM killer");
  rdzv::FailureEvidence fault;
  fault.fault = "HCCS link error between devices: RuntimeError: HCCS LINK ERROR happened.";
  fault.exception = "RuntimeError";  // a fault wins over the same exception twice
  const FailureReport faulted = failure_with(fault);
  CHECK(rdzv::classify_failure(faulted, &faulted).kind == FailureClass::kInfrastructure);
}

TEST_CASE("classification: broken at start, or the same failure twice, is deterministic",
          "[classify]") {
  rdzv::FailureEvidence e;
  e.exception = "ImportError";
  e.early = true;
  CHECK(rdzv::classify_failure(failure_with(e), nullptr).kind == FailureClass::kDeterministic);
  e.early = false;  // late: a lazy import may fail for a reason of the moment
  CHECK(rdzv::classify_failure(failure_with(e), nullptr).kind == FailureClass::kOther);
  rdzv::FailureEvidence usage;
  usage.usage = usage.early = true;
  CHECK(rdzv::classify_failure(failure_with(usage), nullptr).reason ==
        "deterministic: a usage error at start");
  rdzv::FailureEvidence twice;
  twice.exception = "ValueError";
  twice.frame = "train.py:88 in step";
  const FailureReport first = failure_with(twice);
  CHECK(rdzv::classify_failure(first, nullptr).kind == FailureClass::kOther);
  CHECK(rdzv::classify_failure(first, &first).reason ==
        "deterministic: ValueError at train.py:88 in step, twice");
  FailureReport later = first;
  later.evidence.last_beat = "step 4";  // it got further this time
  CHECK(rdzv::classify_failure(later, &first).kind == FailureClass::kOther);
  const FailureReport crash = failure_with({});  // nothing seen at all: never "the same"
  CHECK(rdzv::classify_failure(crash, &crash).kind == FailureClass::kOther);
}

TEST_CASE("classification: without a traceback, the last line and the exit tell it", "[classify]") {
  // `python -m no_such_module`: one line, exit 1, no traceback; at start it stops at once.
  rdzv::FailureEvidence module;
  module.last_line = "/usr/bin/python3: No module named no_such_module_xyz";
  module.early = true;
  const rdzv::Classification at_start = rdzv::classify_failure(failure_with(module), nullptr);
  CHECK(at_start.kind == FailureClass::kDeterministic);
  CHECK_THAT(at_start.reason, Contains("Python found no module 'no_such_module_xyz' at start") &&
                                  Contains("PYTHONPATH") && Contains("-m"));
  module.last_line = "ModuleNotFoundError: No module named 'apex'";  // quoted, as imports say
  CHECK_THAT(rdzv::classify_failure(failure_with(module), nullptr).reason,
             Contains("no module 'apex'"));
  // Any other last line: the same one and the same exit twice is deterministic.
  rdzv::FailureEvidence line;
  line.last_line = "cannot open /data/shard-0: No such file or directory";
  FailureReport first = failure_with(line);
  first.exit_code = 1;
  first.description = "exit code 1";
  CHECK(rdzv::classify_failure(first, nullptr).kind == FailureClass::kOther);
  CHECK(rdzv::classify_failure(first, &first).reason ==
        "deterministic: 'cannot open /data/shard-0: No such file or directory', then exit code 1, "
        "twice");
  FailureReport other_exit = first;
  other_exit.exit_code = 2;
  CHECK(rdzv::classify_failure(other_exit, &first).kind == FailureClass::kOther);
  FailureReport other_line = first;
  other_line.evidence.last_line = "cannot open /data/shard-1: No such file or directory";
  CHECK(rdzv::classify_failure(other_line, &first).kind == FailureClass::kOther);
  FailureReport old_peer = first;  // an agent from before last_line reports none
  old_peer.evidence.last_line.clear();
  CHECK(rdzv::classify_failure(old_peer, &old_peer).kind == FailureClass::kOther);
}

TEST_CASE("oom kills: the counter of the memory cgroup, v1, v2 or the container's root",
          "[classify]") {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("npu_run_oom_" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "memory" / "job");
  fs::create_directories(root / "slice");
  std::ofstream(root / "memory" / "job" / "memory.oom_control")
      << "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
  std::ofstream(root / "slice" / "memory.events")
      << "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\noom_group_kill 0\n";
  std::ofstream(root / "memory.events") << "oom_kill 7\n";
  CHECK(oom_kill_count("12:memory:/job\n0::/slice\n", root.string()) == 3u);
  CHECK(oom_kill_count("4:cpu,memory:/job\n", root.string()) == 3u);
  CHECK(oom_kill_count("0::/slice\n", root.string()) == 2u);
  CHECK(oom_kill_count("0::/elsewhere\n", root.string()) == 7u);  // the container's own
  CHECK_FALSE(oom_kill_count("1:cpu:/x\n", root.string()));
  fs::remove_all(root);
}

TEST_CASE("failure evidence: what the root cause's files and output say", "[classify]") {
  WorkerOutcome w;
  w.status = ExitStatus::exited(1);
  const auto start = std::chrono::system_clock::now();
  w.finished_at = start + 5s;
  w.stderr_tail =
      "Traceback (most recent call last):\n  File \"/w/train.py\", line 88, in step\n"
      "ValueError: bad\n";
  WorkerError error;
  rdzv::FailureEvidence e = failure_evidence({w, error, "step 3", start, 60s, false});
  CHECK(e.exception == "ValueError");
  CHECK(e.frame == "train.py:88 in step");
  CHECK(e.last_beat == "step 3");
  CHECK(e.early);
  CHECK(e.fault.empty());
  CHECK_FALSE(e.oom);
  // The error file's traceback wins over stderr's; a fault in either is found.
  error.message = "RuntimeError: HBM MULTI BIT ECC ERROR happened.";
  error.traceback =
      "Traceback (most recent call last):\n  File \"/w/model.py\", line 9, in fwd\n"
      "RuntimeError: HBM MULTI BIT ECC ERROR happened.\n";
  w.finished_at = start + 61s;
  e = failure_evidence({w, error, "", start, 60s, false});
  CHECK(e.frame == "model.py:9 in fwd");
  CHECK(e.fault ==
        "uncorrectable multi-bit ECC error in device memory: RuntimeError: HBM MULTI "
        "BIT ECC ERROR happened.");
  CHECK_FALSE(e.early);
  // SIGKILL with the counter moved is the OOM killer's, unless npu_run sent it.
  w.status = ExitStatus::signaled(SIGKILL);
  CHECK(failure_evidence({w, WorkerError{}, "", start, 60s, true}).oom);
  w.stopped_by_agent = true;
  CHECK_FALSE(failure_evidence({w, WorkerError{}, "", start, 60s, true}).oom);
  // argparse's exit 2.
  WorkerOutcome usage;
  usage.status = ExitStatus::exited(2);
  usage.stderr_tail = "usage: train.py [-h]\ntrain.py: error: unrecognized arguments: --x\n";
  usage.finished_at = start + 1s;
  CHECK(failure_evidence({usage, WorkerError{}, "", start, 60s, false}).usage);
  // No traceback: the last line with text, trimmed; with one, none.
  WorkerOutcome plain;
  plain.status = ExitStatus::exited(1);
  plain.stderr_tail = "loading\n  /usr/bin/python3: No module named x  \n\n";
  plain.finished_at = start + 1s;
  CHECK(failure_evidence({plain, WorkerError{}, "", start, 60s, false}).last_line ==
        "/usr/bin/python3: No module named x");
  CHECK(failure_evidence({w, WorkerError{}, "", start, 60s, false}).last_line.empty());
}

}  // namespace test_failure_class
