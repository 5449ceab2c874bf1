#include <catch2/catch.hpp>

#include "agent/plan/worker_plan.hpp"

namespace test_worker_spec {

using namespace npu_run;

namespace {

LaunchConfig config(int nproc) {
  LaunchConfig cfg;
  cfg.shape.nproc_per_node = nproc;
  for (int i = 0; i < nproc; ++i) cfg.shape.devices.push_back(i);
  cfg.worker.program = "/usr/bin/python3";
  cfg.worker.entrypoint = "train.py";
  cfg.worker.args = {"--out", "ckpt_${local_rank}.pt", "--lr", "0.1"};
  return cfg;
}

Assignment assignment(int nproc) {
  Assignment a;
  a.world_size = nproc;
  a.host = "h1";
  a.worker_master_addr = "127.0.0.1";
  a.worker_master_port = 40000;
  return a;
}

const AttemptLayout kLogs{"/logs/none", true, 2};
const AttemptLayout kErrorFilesOnly{"/tmp/npu_run_x", false, 0};

}  // namespace

TEST_CASE("specs: commands for script, module and executable modes", "[spec]") {
  LaunchConfig cfg = config(2);
  auto specs = make_worker_specs(cfg, assignment(2), kErrorFilesOnly, {});
  REQUIRE(specs.size() == 2);
  CHECK(specs[1].program == "/usr/bin/python3");
  CHECK(specs[1].argv ==
        std::vector<std::string>{"-u", "train.py", "--out", "ckpt_1.pt", "--lr", "0.1"});
  cfg.worker.mode = WorkerMode::kPythonModule;
  cfg.worker.entrypoint = "pkg.train";
  specs = make_worker_specs(cfg, assignment(2), kErrorFilesOnly, {});
  CHECK(specs[0].argv ==
        std::vector<std::string>{"-u", "-m", "pkg.train", "--out", "ckpt_0.pt", "--lr", "0.1"});
  cfg.worker.mode = WorkerMode::kExecutable;
  cfg.worker.program = "/bin/sh";
  specs = make_worker_specs(cfg, assignment(2), kErrorFilesOnly, {});
  CHECK(specs[0].argv == std::vector<std::string>{"--out", "ckpt_0.pt", "--lr", "0.1"});
}

TEST_CASE("specs: ${local_rank} is replaced everywhere in an argument", "[spec]") {
  CHECK(substitute_local_rank({"${local_rank}/${local_rank}", "x", "$local_rank"}, 12) ==
        std::vector<std::string>{"12/12", "x", "$local_rank"});
}

TEST_CASE("specs: ranks, devices, env and files per local rank", "[spec]") {
  LaunchConfig cfg = config(2);
  cfg.shape.devices = {6, 7};
  Assignment a = assignment(4);
  a.rank_offset = 2;
  a.node_rank = 1;
  const auto specs = make_worker_specs(cfg, a, kLogs, {{"HOME", "/root"}});
  CHECK(specs[1].global_rank == 3);
  CHECK(specs[1].device_id == 7);
  CHECK(specs[1].env.at("HOME") == "/root");
  CHECK(specs[1].env.at("RANK") == "3");
  CHECK(specs[1].contract_env.at("TORCHELASTIC_RESTART_COUNT") == "2");
  CHECK_FALSE(specs[1].contract_env.count("HOME"));
  CHECK(specs[1].log_dir == "/logs/none/attempt_2/1");
  CHECK(specs[1].error_file == "/logs/none/attempt_2/1/error.json");
  CHECK(specs[1].env.at("TORCHELASTIC_ERROR_FILE") == "/logs/none/attempt_2/1/error.json");
  CHECK(specs[1].console_prefix == "[default1]:");  // torchrun's: role and local rank
}

TEST_CASE("specs: stream routing for every combination of flags", "[spec]") {
  LaunchConfig cfg = config(4);
  SECTION("default: zero-copy console for stdout; stderr passes through unprefixed") {
    const auto s = make_worker_specs(cfg, assignment(4), kErrorFilesOnly, {});
    CHECK(s[0].out.sink == StreamSink::kInherit);
    CHECK(s[0].err.sink == StreamSink::kRelay);
    CHECK_FALSE(s[0].err.prefixed);
    CHECK(s[0].err.keep_tail);
    CHECK(s[0].out.file.empty());
  }
  SECTION("--tee 3: relayed to console and files") {
    cfg.output.tee = RankStreamMap(StdStreams::kBoth);
    const auto s = make_worker_specs(cfg, assignment(4), kLogs, {});
    CHECK(s[3].out.sink == StreamSink::kRelay);
    CHECK(s[3].out.file == "/logs/none/attempt_2/3/stdout.log");
    CHECK(s[3].err.file == "/logs/none/attempt_2/3/stderr.log");
  }
  SECTION("-r 3 -t 3: tee wins, as in torchrun") {
    cfg.output.redirects = RankStreamMap(StdStreams::kBoth);
    cfg.output.tee = RankStreamMap(StdStreams::kBoth);
    const auto s = make_worker_specs(cfg, assignment(4), kLogs, {});
    CHECK(s[1].out.sink == StreamSink::kRelay);
    CHECK(s[1].out.to_console);
    CHECK(s[1].err.file == "/logs/none/attempt_2/1/stderr.log");
  }
  SECTION("--redirects 1: stdout only to the file, stderr untouched") {
    cfg.output.redirects = RankStreamMap(StdStreams::kOut);
    const auto s = make_worker_specs(cfg, assignment(4), kLogs, {});
    CHECK(s[0].out.sink == StreamSink::kFile);
    CHECK_FALSE(s[0].out.to_console);
    CHECK(s[0].err.sink == StreamSink::kRelay);
    CHECK(s[0].err.file.empty());
  }
  SECTION("per-rank tee map") {
    cfg.output.tee = RankStreamMap::parse("0:3,3:2", "-t");
    const auto s = make_worker_specs(cfg, assignment(4), kLogs, {});
    CHECK(s[0].out.sink == StreamSink::kRelay);
    CHECK(s[1].out.sink == StreamSink::kInherit);
    CHECK(s[3].out.sink == StreamSink::kInherit);
    CHECK(s[3].err.sink == StreamSink::kRelay);
  }
  SECTION("--local-ranks-filter 0 without log files: the others are discarded") {
    cfg.output.local_ranks_filter = std::set<int>{0};
    const auto s = make_worker_specs(cfg, assignment(4), kErrorFilesOnly, {});
    CHECK(s[0].out.sink == StreamSink::kInherit);
    CHECK(s[1].out.sink == StreamSink::kDiscard);
    CHECK(s[1].err.sink == StreamSink::kRelay);  // to its kept tail only
    CHECK_FALSE(s[1].err.to_console);
  }
  SECTION("--local-ranks-filter 0 with --log-dir: rank 0 on the console, every rank in files") {
    cfg.output.local_ranks_filter = std::set<int>{0};
    cfg.output.tee = RankStreamMap(StdStreams::kBoth);
    const auto s = make_worker_specs(cfg, assignment(4), kLogs, {});
    CHECK(s[0].out.sink == StreamSink::kRelay);
    CHECK(s[2].out.sink == StreamSink::kFile);
    CHECK(s[2].out.file == "/logs/none/attempt_2/2/stdout.log");
  }
  SECTION("--duplicate-stdout-filters: console-bound stdout is relayed and copied") {
    cfg.output.stdout_filters = {"loss"};
    cfg.output.local_ranks_filter = std::set<int>{0, 1};
    cfg.output.redirects = RankStreamMap::parse("1:1", "-r");
    const auto s = make_worker_specs(cfg, assignment(4), kLogs, {});
    // Shown plainly before, so shown plainly still: relayed only to see the lines.
    CHECK(s[0].out.sink == StreamSink::kRelay);
    CHECK_FALSE(s[0].out.prefixed);
    CHECK(s[0].out.file.empty());
    CHECK(s[0].out.filters == std::vector<std::string>{"loss"});
    CHECK(s[0].out.filtered_file == "/logs/none/attempt_2/filtered_stdout.log");
    CHECK_FALSE(s[0].err.prefixed);  // no stderr filters: passed through for its tail only
    CHECK(s[0].err.filters.empty());
    // Not on the console (redirected, or filtered off it): torchrun copies teed lines only.
    CHECK(s[1].out.sink == StreamSink::kFile);
    CHECK(s[1].out.filters.empty());
    CHECK(s[2].out.filters.empty());
    cfg.output.tee = RankStreamMap(StdStreams::kOut);
    const auto teed = make_worker_specs(cfg, assignment(4), kLogs, {});
    CHECK(teed[0].out.prefixed);
    CHECK(teed[0].out.file == "/logs/none/attempt_2/0/stdout.log");
    CHECK(teed[0].out.filtered_file == "/logs/none/attempt_2/filtered_stdout.log");
  }
  SECTION("every stderr reaches the agent, which keeps its tail (traceback, stack dump)") {
    cfg.output.local_ranks_filter = std::set<int>{0, 1};
    cfg.output.redirects = RankStreamMap::parse("1:2", "-r");
    const auto s = make_worker_specs(cfg, assignment(4), kLogs, {});
    // The console's stderr: relayed unprefixed, so the console shows what it showed.
    CHECK(s[0].err.sink == StreamSink::kRelay);
    CHECK_FALSE(s[0].err.prefixed);
    CHECK(s[0].err.to_console);
    CHECK(s[0].err.file.empty());
    CHECK(s[0].err.keep_tail);
    // Redirected: the worker still writes its file itself, which is read back.
    CHECK(s[1].err.sink == StreamSink::kFile);
    CHECK(s[1].err.keep_tail);
    // Filtered off the console with no file to keep it: relayed to the tail only.
    const auto bare = make_worker_specs(cfg, assignment(4), kErrorFilesOnly, {});
    CHECK(bare[2].err.sink == StreamSink::kRelay);
    CHECK_FALSE(bare[2].err.to_console);
    CHECK(bare[2].err.file.empty());
    // stdout is never touched for it.
    CHECK(s[0].out.sink == StreamSink::kInherit);
    CHECK_FALSE(s[0].out.keep_tail);
  }
  SECTION("an explicit prefix relays console output even without files") {
    cfg.output.prefix_template = "${rank}> ";
    const auto s = make_worker_specs(cfg, assignment(4), kErrorFilesOnly, {});
    CHECK(s[2].out.sink == StreamSink::kRelay);
    CHECK(s[2].out.file.empty());
    CHECK(s[2].console_prefix == "2> ");
  }
}

TEST_CASE("specs: msrun's files, one per rank for both streams, the console as --tail_worker_log",
          "[spec][msrun]") {
  LaunchConfig cfg = config(2);
  cfg.worker.framework = Framework::kMindSpore;
  cfg.output.msrun_logs = MsrunLogs{"msrun_log", "worker", std::set<int>{5}, true};
  Assignment a = assignment(2);
  a.world_size = 4;
  a.rank_offset = 4;  // node 2 of a job of 2-worker nodes
  auto specs = make_worker_specs(cfg, a, AttemptLayout{"/tmp/run", false, 0}, {});
  for (const WorkerSpec& spec : specs) {
    const std::string file = "msrun_log/worker_" + std::to_string(spec.global_rank) + ".log";
    for (const StreamRoute* route : {&spec.out, &spec.err}) {
      CHECK(route->file == file);
      CHECK(route->shared_file);  // O_APPEND: neither stream overwrites the other
      CHECK_FALSE(route->keep_file);
      // Rank 5 is tailed to the console (a relay writes its file too); rank 4 only in its file.
      CHECK(route->to_console == (spec.global_rank == 5));
      CHECK(route->sink == (spec.global_rank == 5 ? StreamSink::kRelay : StreamSink::kFile));
    }
    CHECK(spec.err.keep_tail);  // the failure's traceback is read back from the file
  }
  // A restart adds to the files; detached (--join False) nothing goes to a console.
  cfg.output.msrun_logs->console = false;
  specs = make_worker_specs(cfg, a, AttemptLayout{"/tmp/run", false, 1}, {});
  CHECK(specs[1].out.keep_file);
  CHECK_FALSE(specs[1].out.to_console);
  // The scheduler's both streams in scheduler.log, never on the console.
  const auto sched =
      make_scheduler_spec(cfg, Assignment{}, AttemptLayout{"/tmp/run", false, 0}, {});
  REQUIRE(sched.has_value());
  CHECK(sched->out.file == "msrun_log/scheduler.log");
  CHECK(sched->err.file == "msrun_log/scheduler.log");
  CHECK_FALSE(sched->err.to_console);
}

TEST_CASE("specs: a dry run's files are named after the rank it simulates", "[spec][msrun]") {
  LaunchConfig cfg = config(2);
  cfg.worker.framework = Framework::kMindSpore;
  cfg.output.msrun_logs = MsrunLogs{"", "10.0.0.2_h1", std::nullopt, true};
  cfg.worker.ms_simulation = MindSporeSimulation{1, -1, 6, 8};
  auto specs = make_worker_specs(cfg, assignment(2), kErrorFilesOnly, {});
  CHECK(specs[1].out.file == "10.0.0.2_h1_7.log");
  CHECK(specs[1].env.at("RANK_ID") == "7");
  cfg.worker.ms_simulation->rank_id = 3;
  specs = make_worker_specs(cfg, assignment(2), kErrorFilesOnly, {});
  CHECK(specs[0].out.file == "10.0.0.2_h1_3.log");
  // No cluster: no scheduler beside a dry run.
  CHECK_FALSE(make_scheduler_spec(cfg, Assignment{}, kErrorFilesOnly, {}).has_value());
}

}  // namespace test_worker_spec
