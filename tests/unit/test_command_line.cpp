// The launch command line as npu_run parses it: torchrun's defaults and spellings, PET_
// variables, devices, errors in npu_run's words, argparse habits, what to run.
#include <catch2/catch.hpp>
#include <csignal>
#include <thread>

#include "cli/parse_launch.hpp"
#include "support/cli_parse.hpp"

namespace test_command_line {

using namespace npu_run;
using Catch::Matchers::Contains;
using npu_run::testing::Cli;
using npu_run::testing::ScopedEnv;
using npu_run::testing::TempDir;

TEST_CASE("cli: defaults match torchrun's", "[cli]") {
  Cli cli;
  const LaunchConfig c = cli.ok({cli.script});
  CHECK(c.worker.mode == WorkerMode::kPythonScript);
  CHECK(c.worker.program == "/bin/sh");  // PYTHON_EXEC
  CHECK(c.worker.entrypoint == cli.script);
  CHECK(c.worker.args.empty());
  CHECK(c.shape.nproc_per_node == 1);
  CHECK(c.shape.devices == std::vector<int>{0});
  CHECK(c.shape.min_nodes == 1);
  CHECK(c.shape.max_nodes == 1);
  CHECK_FALSE(c.shape.node_rank.has_value());
  CHECK(c.rendezvous.master_addr == "127.0.0.1");
  CHECK(c.rendezvous.master_port == 29500);
  CHECK(c.rendezvous.run_id == "none");
  CHECK(c.worker.role == "default");
  CHECK(c.supervision.max_restarts == 0);
  CHECK(c.supervision.term_timeout == std::chrono::seconds(30));
  CHECK(c.supervision.stop_signals == std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT});
  CHECK(c.output.redirects.empty());
  CHECK(c.output.tee.empty());
  CHECK_FALSE(c.output.log_dir.has_value());
  CHECK_FALSE(c.output.log_dir_is_temporary);
  CHECK_FALSE(c.agent.dry_run);
}

TEST_CASE("cli: parsing stops at the script, the rest belongs to it", "[cli]") {
  Cli cli;
  const LaunchConfig c =
      cli.ok({"--nproc", "2", cli.script, "--nproc", "3", "-x", "--", "${local_rank}"});
  CHECK(c.shape.nproc_per_node == 2);
  CHECK(c.worker.args == std::vector<std::string>{"--nproc", "3", "-x", "--", "${local_rank}"});
  // An explicit "--" separates options from the script.
  const LaunchConfig d = cli.ok({"--nproc", "2", "--", cli.script, "a"});
  CHECK(d.worker.entrypoint == cli.script);
  CHECK(d.worker.args == std::vector<std::string>{"a"});
}

TEST_CASE("cli: every flag has a dash and an underscore spelling and --nproc is short for workers",
          "[cli]") {
  Cli cli;
  for (const auto& args : std::vector<std::vector<std::string>>{{"--nproc-per-node", "4"},
                                                                {"--nproc_per_node", "4"},
                                                                {"--nproc_per_node=4"},
                                                                {"--nproc", "4"}}) {
    std::vector<std::string> full = args;
    full.push_back(cli.script);
    CHECK(cli.ok(full).shape.nproc_per_node == 4);
  }
  const LaunchConfig c = cli.ok({"--max_restarts",
                                 "2",
                                 "--master_addr",
                                 "localhost",
                                 "--master_port=1234",
                                 "--node_rank",
                                 "0",
                                 "--run_id",
                                 "job7",
                                 "--term_timeout",
                                 "1.5",
                                 "--log_level",
                                 "debug",
                                 "--rdzv_backend",
                                 "c10d",
                                 "--monitor_interval",
                                 "5",
                                 "--start_method",
                                 "fork",
                                 cli.script});
  CHECK(c.supervision.max_restarts == 2);
  CHECK(c.rendezvous.master_addr == "localhost");
  CHECK(c.rendezvous.master_port == 1234);
  CHECK(c.shape.node_rank == 0);
  CHECK(c.rendezvous.run_id == "job7");
  CHECK(c.supervision.term_timeout == std::chrono::milliseconds(1500));
  CHECK(c.agent.log_level == "debug");
  CHECK(cli.ok({"--rdzv-id", "abc", cli.script}).rendezvous.run_id == "abc");
  CHECK(cli.ok({"--shutdown-timeout", "2", cli.script}).supervision.term_timeout ==
        std::chrono::seconds(2));
}

TEST_CASE("cli: options come from PET_<NAME> and the command line wins", "[cli]") {
  {
    Cli cli;
    cli.env.insert(
        {{"PET_NPROC_PER_NODE", "4"}, {"PET_MAX_RESTARTS", "3"}, {"PET_RDZV_ID", "fromenv"}});
    const LaunchConfig c = cli.ok({cli.script});
    CHECK(c.shape.nproc_per_node == 4);
    CHECK(c.supervision.max_restarts == 3);
    CHECK(c.rendezvous.run_id == "fromenv");
    CHECK(
        cli.ok({"--nproc-per-node", "2", "--max-restarts", "0", cli.script}).shape.nproc_per_node ==
        2);
    CHECK(cli.ok({"--max-restarts", "0", cli.script}).supervision.max_restarts == 0);
  }
  {
    Cli cli;
    cli.env.insert({{"PET_NO_PYTHON", "1"}, {"PET_TEE", "3"}, {"PET_LOG_DIR", cli.dir.path()}});
    const LaunchConfig c = cli.ok({"sh", "-c", "true"});
    CHECK(c.worker.mode == WorkerMode::kExecutable);
    CHECK(c.output.tee.for_rank(0) == StdStreams::kBoth);
    CHECK(c.output.log_dir == cli.dir.path());
  }
  {
    // The process's own environment is not read: only the map handed to the parser counts.
    Cli cli;
    ScopedEnv process(
        std::map<std::string, std::optional<std::string>>{{"PET_NPROC_PER_NODE", "4"}});
    CHECK(cli.ok({cli.script}).shape.nproc_per_node == 1);
  }
}

TEST_CASE("cli: a bad value from the environment names the variable", "[cli]") {
  {
    Cli cli;
    cli.env["PET_NPROC_PER_NODE"] = "zero";
    CHECK_THAT(cli.error({cli.script}),
               Contains("PET_NPROC_PER_NODE 'zero': expected a number of workers"));
    // On the command line the same mistake names the flag.
    CHECK_THAT(cli.error({"--nproc-per-node", "zero", cli.script}),
               Contains("--nproc-per-node 'zero'"));
  }
  {
    Cli cli;
    cli.env["PET_MAX_RESTARTS"] = "x";
    CHECK_THAT(cli.error({cli.script}),
               Contains("--max-restarts") && Contains("PET_MAX_RESTARTS=x is set"));
  }
}

TEST_CASE("cli: --devices lists physical ids per local rank and must match the worker count",
          "[cli]") {
  Cli cli;
  LaunchConfig c = cli.ok({"--nproc-per-node", "4", "--devices", "4-7", cli.script});
  CHECK(c.shape.devices == std::vector<int>{4, 5, 6, 7});
  c = cli.ok({"--nproc-per-node", "3", cli.script});
  CHECK(c.shape.devices == std::vector<int>{0, 1, 2});
  c = cli.ok({"--nproc-per-node", "auto", "--devices", "0,2,4,6", cli.script});
  CHECK(c.shape.nproc_per_node == 4);
  CHECK(c.shape.devices == std::vector<int>{0, 2, 4, 6});
  CHECK_THAT(cli.error({"--devices", "0-3", "--nproc-per-node", "8", cli.script}),
             Contains("--devices 0-3 names 4 devices but --nproc-per-node is 8") &&
                 Contains("--devices 0-7"));
  CHECK_THAT(cli.error({"--devices", "0,0", "--nproc-per-node", "2", cli.script}),
             Contains("listed twice"));
}

TEST_CASE("cli: torchrun 2.x options: --virtual-local-rank, --event-log-handler, --logs-specs",
          "[cli]") {
  Cli cli;
  TempDir dev;
  for (int i = 0; i < 2; ++i) dev.write("davinci" + std::to_string(i), "");
  cli.env["NPU_RUN_DEV_ROOT"] = dev.path();
  LaunchConfig c = cli.ok({"--virtual-local-rank", "--nproc-per-node", "auto", cli.script});
  CHECK(c.worker.virtual_local_rank);
  CHECK(c.worker.visible_devices_variable == "ASCEND_RT_VISIBLE_DEVICES");
  CHECK(c.worker.accepted_notes.empty());
  c = cli.ok({"--event-log-handler", "console", "--logs-specs", "mine", cli.script});
  REQUIRE(c.worker.accepted_notes.size() == 2);
  CHECK_THAT(c.worker.accepted_notes[0], Contains("--event-log-handler console: npu_run has no"));
  CHECK_THAT(c.worker.accepted_notes[1], Contains("--logs-specs mine: npu_run loads no logging"));
  CHECK(cli.ok({"--event-log-handler", "null", cli.script}).worker.accepted_notes.empty());
}

TEST_CASE("cli: --nproc-per-node auto, npu, gpu and cpu", "[cli]") {
  Cli cli;
  TempDir dev;
  for (int i = 0; i < 8; ++i) dev.write("davinci" + std::to_string(i), "");
  cli.env["NPU_RUN_DEV_ROOT"] = dev.path();
  LaunchConfig c = cli.ok({"--nproc-per-node", "auto", cli.script});
  CHECK(c.shape.nproc_per_node == 8);
  CHECK(c.shape.devices == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK_THAT(c.shape.devices_source, Contains("8 Ascend NPUs"));
  cli.env["ASCEND_RT_VISIBLE_DEVICES"] = "4,5";
  c = cli.ok({"--nproc-per-node", "npu", cli.script});
  CHECK(c.shape.devices == std::vector<int>{4, 5});
  CHECK_THAT(cli.error({"--nproc-per-node", "gpu", cli.script}),
             Contains("--nproc-per-node gpu") && Contains("NPU"));

  TempDir empty;
  cli.env["NPU_RUN_DEV_ROOT"] = empty.path();
  c = cli.ok({"--nproc-per-node", "auto", cli.script});
  // torchrun's rule without accelerators: one worker per CPU.
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CHECK(c.shape.nproc_per_node == cpus);
  CHECK(c.shape.devices.size() == static_cast<size_t>(cpus));
  CHECK_THAT(c.shape.devices_source, Contains("one worker per CPU"));
  CHECK_THAT(cli.error({"--nproc-per-node", "npu", cli.script}),
             Contains("no Ascend or NVIDIA devices"));
  c = cli.ok({"--nproc-per-node", "cpu", cli.script});
  CHECK(c.shape.nproc_per_node ==
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  CHECK_THAT(cli.error({"--nproc-per-node", "0", cli.script}), Contains("between 1 and 1024"));
  CHECK_THAT(cli.error({"--nproc-per-node", "5000", cli.script}), Contains("between 1 and 1024"));
}

TEST_CASE("cli: unknown options are named, with a suggestion when one is close", "[cli]") {
  Cli cli;
  CHECK_THAT(cli.error({"--nproc-per-nodes", "4", cli.script}),
             Contains("unknown option '--nproc-per-nodes'; did you mean '--nproc-per-node'?"));
  CHECK_THAT(cli.error({"--max-restrats=3", cli.script}),
             Contains("did you mean '--max-restarts'?"));
  const std::string unknown = cli.error({"--frobnicate", cli.script});
  CHECK_THAT(unknown, Contains("unknown option '--frobnicate' (the training script must come "
                               "after all npu_run options)"));
  // One pointer to --help, the line every usage error ends with, not a second in the message.
  size_t hints = 0;
  for (size_t at = unknown.find("--help"); at != std::string::npos;
       at = unknown.find("--help", at + 1))
    ++hints;
  CHECK(hints == 1);
}

TEST_CASE("cli: malformed options are explained in npu_run's words, never CLI11's", "[cli]") {
  Cli cli;
  const std::string missing = cli.error({"--nnodes"});
  CHECK_THAT(missing, Contains("--nnodes needs a value; write it after the option"));
  CHECK(missing.find("required TEXT missing") == std::string::npos);
  CHECK_THAT(cli.error({"--rdzv-backend"}), Contains("needs one of {static,c10d,etcd,etcd-v2}"));
  const std::string convert = cli.error({"--max-restarts", "abc", cli.script});
  CHECK_THAT(convert, Contains("--max-restarts 'abc': expected a whole number"));
  CHECK(convert.find("Could not convert") == std::string::npos);
  CHECK_THAT(cli.error({"--heartbeat-timeout", "soon", cli.script}),
             Contains("'soon': expected a number"));
}

TEST_CASE("cli: argparse habits: last value wins and long options may be abbreviated", "[cli]") {
  Cli cli;
  // A repeated option takes its last value, as argparse (scripts append overrides).
  CHECK(
      cli.ok({"--nproc-per-node", "2", "--nproc_per_node", "3", cli.script}).shape.nproc_per_node ==
      3);
  // Unique prefixes, as PyTorch's own launcher tests type them.
  const LaunchConfig c = cli.ok({"--max_restart", "2", "--redirect", "3", "--nproc_per=4",
                                 "--rdzv_endp", "h:29400", "--nnodes", "1", cli.script});
  CHECK(c.supervision.max_restarts == 2);
  CHECK(c.shape.nproc_per_node == 4);
  CHECK(c.rendezvous.master_addr == "h");
  CHECK(has_stdout(c.output.redirects.for_rank(0)));
  // A prefix that fits several options is refused, naming them; one spelling each.
  const std::string ambiguous = cli.error({"--rdzv", "x", cli.script});
  CHECK_THAT(ambiguous, Contains("ambiguous option '--rdzv' could be --rdzv-backend, ") &&
                            Contains("--rdzv-endpoint"));
  CHECK(ambiguous.find("--rdzv_endpoint") == std::string::npos);
  // After the script, nothing is npu_run's: its arguments are left alone.
  CHECK(cli.ok({cli.script, "--max_rest", "1"}).worker.args ==
        std::vector<std::string>{"--max_rest", "1"});
}

TEST_CASE("cli: what to run: script, module, executable, interpreter", "[cli]") {
  Cli cli;
  CHECK_THAT(cli.error({}), Contains("no training script given"));
  CHECK_THAT(cli.error({"--nproc", "2"}), Contains("no training script given"));
  CHECK_THAT(
      cli.error({"missing_script.py"}),
      Contains("training script 'missing_script.py' not found") && Contains("-m for a module"));
  LaunchConfig c = cli.ok({"-m", "pkg.train", "--lr", "1"});
  CHECK(c.worker.mode == WorkerMode::kPythonModule);
  CHECK(c.worker.entrypoint == "pkg.train");
  c = cli.ok({"--no-python", "sh", "-c", "true"});
  CHECK(c.worker.mode == WorkerMode::kExecutable);
  CHECK_THAT(c.worker.program, Contains("/sh"));
  CHECK_THAT(cli.error({"--no-python", "no-such-program-xyz"}),
             Contains("'no-such-program-xyz' is not an executable file on PATH"));
  CHECK_THAT(cli.error({"--no-python", cli.script}), Contains("is not an executable file;"));
  CHECK_THAT(cli.error({"--no-python", "-m", "x"}),
             Contains("--no-python and --module cannot be combined"));
  CHECK_THAT(cli.error({"--no-python", "--run-path", "sh"}),
             Contains("--no-python and --run-path"));
  CHECK(cli.ok({"--run-path", cli.script}).worker.mode == WorkerMode::kPythonScript);

  cli.env["PYTHON_EXEC"] = "python-that-does-not-exist";
  CHECK_THAT(cli.error({cli.script}),
             Contains("cannot find the python interpreter 'python-that-does-not-exist' on "
                      "PATH (from PYTHON_EXEC)") &&
                 Contains("PYTHON_EXEC=/usr/bin/python3"));
  // `python DIR` runs DIR/__main__.py: a directory is a script only with one.
  const Cli fresh;
  fresh.dir.write("app/__main__.py", "print('hi')\n");
  CHECK(fresh.ok({fresh.dir.file("app")}).worker.entrypoint == fresh.dir.file("app"));
  fresh.dir.write("lib/x.py", "");
  CHECK_THAT(fresh.error({fresh.dir.file("lib")}),
             Contains("is a directory without a __main__.py"));
}

TEST_CASE("cli: --hang-timeout 0 and off are none, as its help and its message say", "[cli]") {
  Cli cli;
  for (const char* none : {"0", "off"})
    CHECK(cli.ok({"--hang-timeout", none, cli.script}).supervision.hang.timeout.count() == 0);
  CHECK(cli.ok({"--hang-timeout", "2.5", cli.script}).supervision.hang.timeout ==
        std::chrono::milliseconds(2500));
  CHECK_THAT(cli.error({"--hang-timeout", "never", cli.script}),
             Contains("--hang-timeout 'never': expected seconds (more than 0") &&
                 Contains("0 or 'off' for none"));
}

}  // namespace test_command_line
