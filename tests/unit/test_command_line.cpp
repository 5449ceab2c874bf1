#include <catch2/catch.hpp>
#include <csignal>
#include <thread>

#include "cli/parse_launch.hpp"
#include "npu_run/version.hpp"
#include "support/build_paths.hpp"
#include "support/temp_dir.hpp"

namespace test_command_line {

using namespace npu_run;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using npu_run::testing::ScopedEnv;
using npu_run::testing::TempDir;

namespace {

// A working directory with a training script and an env where PYTHON_EXEC exists.
struct Cli {
  TempDir dir;
  std::string script = dir.write("train.py", "print('hi')\n");
  EnvMap env{{"PATH", "/usr/bin:/bin"}, {"PYTHON_EXEC", "/bin/sh"}};

  ParseResult parse(const std::vector<std::string>& args) const {
    return parse_command_line(args, env);
  }

  LaunchConfig ok(const std::vector<std::string>& args) const {
    ParseResult r = parse(args);
    if (auto* e = std::get_if<EarlyExit>(&r)) FAIL("unexpected early exit: " << e->text);
    return std::get<ParsedLaunch>(r).config;
  }

  // The usage error text; fails unless parsing ended with exit code 2 on stderr.
  std::string error(const std::vector<std::string>& args) const {
    ParseResult r = parse(args);
    REQUIRE(std::holds_alternative<EarlyExit>(r));
    const auto& e = std::get<EarlyExit>(r);
    CHECK(e.exit_code == 2);
    CHECK(e.to_stderr);
    CHECK_THAT(e.text, StartsWith("npu_run: error: ") && Contains("Run 'npu_run --help'"));
    return e.text;
  }
};

}  // namespace

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
  CHECK_THAT(cli.error({"--frobnicate", cli.script}),
             Contains("unknown option '--frobnicate'; see 'npu_run --help'") &&
                 Contains("script must come after"));
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

TEST_CASE("cli: node counts, node rank, standalone", "[cli]") {
  Cli cli;
  LaunchConfig c = cli.ok({"--nnodes", "1:4", cli.script});
  CHECK(c.shape.min_nodes == 1);
  CHECK(c.shape.max_nodes == 4);
  c = cli.ok({"--nnodes", "2", "--node-rank", "1", cli.script});
  CHECK(c.shape.min_nodes == 2);
  CHECK(c.shape.node_rank == 1);
  CHECK_THAT(cli.error({"--nnodes", "4:2", cli.script}),
             Contains("the minimum is above the maximum; write 2:4"));
  CHECK_THAT(cli.error({"--nnodes", "0", cli.script}),
             Contains("--nnodes '0': expected a node count"));
  CHECK_THAT(cli.error({"--nnodes", "2:20:30", cli.script}),
             Contains("a range MIN:MAX like 2:4 (one colon)"));
  CHECK_THAT(cli.error({"--nnodes", "2", "--node-rank", "2", cli.script}),
             Contains("--node-rank 2: node ranks run from 0 to 1"));
  CHECK_THAT(cli.error({"--node-rank", "-1", cli.script}), Contains("--node-rank -1"));
  CHECK_THAT(cli.error({"--standalone", "--nnodes", "2", cli.script}),
             Contains("--standalone runs a single node"));
  CHECK(cli.ok({"--standalone", cli.script}).rendezvous.standalone);
  // torchrun --standalone: a fresh uuid4 run id per launch, unless the user chose one.
  const std::string id = cli.ok({"--standalone", cli.script}).rendezvous.run_id;
  CHECK(id.size() == 36);
  CHECK(id[14] == '4');
  CHECK(id.find_first_not_of("0123456789abcdef-") == std::string::npos);
  CHECK(cli.ok({"--standalone", cli.script}).rendezvous.run_id != id);
  CHECK(cli.ok({"--standalone", "--rdzv-id", "mine", cli.script}).rendezvous.run_id == "mine");
  CHECK(cli.ok({cli.script}).rendezvous.run_id == "none");
}

TEST_CASE("cli: rendezvous address, port, endpoint and conf", "[cli]") {
  Cli cli;
  CHECK_THAT(cli.error({"--master-port", "70000", cli.script}),
             Contains("--master-port 70000: a port must be"));
  CHECK_THAT(cli.error({"--master-addr", "", cli.script}), Contains("--master-addr is empty"));
  LaunchConfig c = cli.ok({"--rdzv-endpoint", "10.1.2.3:29400", cli.script});
  CHECK(c.rendezvous.master_addr == "10.1.2.3");
  CHECK(c.rendezvous.master_port == 29400);
  c = cli.ok({"--rdzv-endpoint", "[fe80::1]:29401", cli.script});
  CHECK(c.rendezvous.master_addr == "fe80::1");
  CHECK(c.rendezvous.master_port == 29401);
  c = cli.ok({"--rdzv-endpoint", "head", "--master-port", "1111", cli.script});
  CHECK(c.rendezvous.master_addr == "head");
  CHECK(c.rendezvous.master_port == 1111);
  CHECK_THAT(cli.error({"--rdzv-endpoint", "a:1", "--master-addr", "b", cli.script}),
             Contains("disagree about the rendezvous host"));
  CHECK_THAT(cli.error({"--rdzv-endpoint", "a:1", "--master-port", "2", cli.script}),
             Contains("disagree about the rendezvous port"));
  CHECK_THAT(cli.error({"--rdzv-endpoint", "a:x", cli.script}), Contains("expected a port"));
  CHECK_THAT(cli.error({"--rdzv-backend", "zookeeper", cli.script}),
             Contains("expected static, c10d"));

  c = cli.ok({"--rdzv-conf", "join_timeout=600,last_call_timeout=30", cli.script});
  CHECK(c.rendezvous.conf.at("join_timeout") == "600");
  CHECK(c.rendezvous.conf.at("last_call_timeout") == "30");
  CHECK(cli.ok({cli.script}).rendezvous.timing.last_call == std::chrono::seconds(30));
  CHECK(cli.ok({"--rdzv-conf", "last_call_timeout=2.5", cli.script}).rendezvous.timing.last_call ==
        std::chrono::milliseconds(2500));
  CHECK(cli.ok({"--rdzv-last-call", "1", "--rdzv-conf", "last_call_timeout=9", cli.script})
            .rendezvous.timing.last_call == std::chrono::seconds(1));  // the flag wins
  CHECK_THAT(cli.error({"--rdzv-last-call", "-1", cli.script}),
             Contains("--rdzv-last-call -1") && Contains("expected seconds"));
  CHECK_THAT(cli.error({"--rdzv-conf", "last_call_timeout=soon", cli.script}),
             Contains("last_call_timeout=soon: expected a number"));
  CHECK_THAT(cli.error({"--rdzv-conf", "jion_timeout=5", cli.script}),
             Contains("unknown key 'jion_timeout'; known keys:") && Contains("join_timeout"));
  CHECK_THAT(cli.error({"--rdzv-conf", "timeout", cli.script}),
             Contains("item 'timeout' is not key=value"));
}

TEST_CASE("cli: --worker-store agent (the default), tiered (above 1024 nodes) or torch", "[cli]") {
  Cli cli;
  CHECK(cli.ok({cli.script}).rendezvous.worker_store == WorkerStore::kAgent);
  CHECK(cli.ok({"--worker-store", "tiered", cli.script}).rendezvous.worker_store ==
        WorkerStore::kTiered);
  CHECK(cli.ok({"--worker-store", "torch", cli.script}).rendezvous.worker_store ==
        WorkerStore::kTorch);
  CHECK_THAT(cli.error({"--worker-store", "rank0", cli.script}),
             Contains("--worker-store 'rank0': expected agent, tiered or torch"));
  // Above 1,024 nodes the default is tiered; a choice stays a choice.
  CHECK(cli.ok({"--nnodes", "1024", cli.script}).rendezvous.worker_store == WorkerStore::kAgent);
  CHECK(cli.ok({"--nnodes", "1025", cli.script}).rendezvous.worker_store == WorkerStore::kTiered);
  CHECK(cli.ok({"--nnodes", "1:2000", cli.script}).rendezvous.worker_store == WorkerStore::kTiered);
  CHECK(
      cli.ok({"--nnodes", "2000", "--worker-store", "agent", cli.script}).rendezvous.worker_store ==
      WorkerStore::kAgent);
  // torchrun 2.x's switch picks torch's own store unless the command line says otherwise.
  cli.env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1";
  CHECK(cli.ok({cli.script}).rendezvous.worker_store == WorkerStore::kTorch);
  CHECK(cli.ok({"--worker-store", "tiered", cli.script}).rendezvous.worker_store ==
        WorkerStore::kTiered);
}

TEST_CASE("cli: torchrun's rendezvous habits: c10d's port, free ports, etcd, conf spellings",
          "[cli]") {
  Cli cli;
  // An endpoint without a port means 29400 for c10d, as in torchrun.
  CHECK(cli.ok({"--rdzv-backend", "c10d", "--rdzv-endpoint", "head", cli.script})
            .rendezvous.master_port == 29400);
  // Kubeflow exports PET_MASTER_PORT beside the endpoint: the endpoint decides, no conflict.
  Cli kubeflow;
  kubeflow.env["PET_MASTER_PORT"] = "23456";
  kubeflow.env["PET_MASTER_ADDR"] = "elsewhere";
  const LaunchConfig k = kubeflow.ok(
      {"--rdzv-backend", "c10d", "--rdzv-endpoint", "head:29400", "--nnodes", "2", cli.script});
  CHECK(k.rendezvous.master_addr == "head");
  CHECK(k.rendezvous.master_port == 29400);
  CHECK(kubeflow.ok({"--rdzv-backend", "c10d", "--rdzv-endpoint", "head", kubeflow.script})
            .rendezvous.master_port == 29400);
  // Port 0: a free port, for single-node jobs only (others could not find it).
  CHECK(cli.ok({"--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", cli.script})
            .rendezvous.master_port == 0);
  CHECK_THAT(cli.error({"--rdzv-endpoint", "localhost:0", "--nnodes", "2", cli.script}),
             Contains("port 0 asks for a free port, which only a single-node job can use"));
  // etcd: torchrun's etcd command lines (its docs', its run_test suite's) as they are; the
  // endpoint is etcd's, never the master's.
  for (const char* backend : {"etcd", "etcd-v2"}) {
    const LaunchConfig e = cli.ok({"--nnodes=1:4", "--nproc-per-node=2", "--rdzv-id=job7",
                                   std::string("--rdzv-backend=") + backend,
                                   "--rdzv-endpoint=etcd-host:2379", cli.script});
    REQUIRE(e.rendezvous.etcd);
    CHECK(e.rendezvous.etcd->endpoints == "etcd-host:2379");
    CHECK(e.rendezvous.etcd->prefix == "/torchelastic/p2p/job7");
    CHECK(e.rendezvous.master_addr == "127.0.0.1");
  }
  const LaunchConfig legacy =
      cli.ok({"--rdzv_backend=etcd", "--rdzv_endpoint=localhost:2379,localhost:2381",
              "--rdzv_id=r1", "--rdzv_conf=timeout=600,last_call_timeout=30,etcd_prefix=/elastic/",
              "--nnodes=2:3", cli.script});
  CHECK(legacy.rendezvous.etcd->prefix == "/elastic/r1");
  CHECK(legacy.rendezvous.timing.join_timeout == std::chrono::seconds(600));
  CHECK(legacy.rendezvous.etcd->lease_ttl == std::chrono::seconds(5));
  CHECK(cli.ok({"--rdzv-backend", "etcd-v2", "--rdzv-endpoint", "h", "--rdzv-conf",
                "protocol=http,read_timeout=60,lease_ttl=3", cli.script})
            .rendezvous.etcd->lease_ttl == std::chrono::seconds(3));
  CHECK(cli.ok({"--rdzv-backend", "c10d", "--rdzv-endpoint", "h", cli.script}).rendezvous.etcd ==
        std::nullopt);
  // The default lease grows with the job: its renewals stay near 100 a second.
  const auto ttl_of = [&](const std::string& nnodes, const std::string& spares) {
    return cli
        .ok({"--rdzv-backend", "etcd", "--rdzv-endpoint", "h", "--nnodes", nnodes, "--spares",
             spares, cli.script})
        .rendezvous.etcd->lease_ttl;
  };
  CHECK(ttl_of("64", "0") == std::chrono::seconds(5));
  CHECK(ttl_of("1000:1024", "0") == std::chrono::seconds(30));
  CHECK(ttl_of("2000", "48") == std::chrono::seconds(61));
  CHECK(cli.ok({"--rdzv-backend", "etcd", "--rdzv-endpoint", "h", "--nnodes", "1024", "--rdzv-conf",
                "lease_ttl=5", cli.script})
            .rendezvous.etcd->lease_ttl == std::chrono::seconds(5));
  // What cannot work is refused by name.
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--nnodes", "2", cli.script}),
             Contains("needs the etcd members: --rdzv-endpoint host1:2379"));
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--rdzv-endpoint", "h:2379", "--rdzv-conf",
                        "password=hunter2", cli.script}),
             Contains("a password on the command line is seen by every user"));
  // TLS: etcd-v2's protocol=https puts every member on https; its file keys and etcd's.
  const std::string pem = cli.dir.write("ca.pem", "not read while parsing\n");
  const LaunchConfig v2 = cli.ok(
      {"--rdzv-backend", "etcd-v2", "--rdzv-endpoint", "a:2379,b:2379", "--rdzv-conf",
       "protocol=https,ca_cert=" + pem + ",ssl_cert=" + pem + ",ssl_cert_key=" + pem, cli.script});
  CHECK(v2.rendezvous.etcd->endpoints == "https://a:2379,https://b:2379");
  CHECK(v2.rendezvous.etcd->ca_file == pem);
  CHECK(v2.rendezvous.etcd->key_file == pem);
  const LaunchConfig v3 =
      cli.ok({"--rdzv-backend", "etcd", "--rdzv-endpoint", "https://a:2379,b:2379", "--rdzv-conf",
              "cert=" + pem, cli.script});
  CHECK(v3.rendezvous.etcd->endpoints == "https://a:2379,b:2379");
  CHECK(v3.rendezvous.etcd->ca_file.empty());  // the system's CA store
  CHECK(v3.rendezvous.etcd->key_file == pem);  // one PEM with both, as torchrun takes it
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--rdzv-endpoint", "https://h:2379",
                        "--rdzv-conf", "cacert=/no/ca.pem", cli.script}),
             Contains("cacert=/no/ca.pem: no such file"));
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--rdzv-endpoint", "h:2379", "--rdzv-conf",
                        "cacert=" + pem, cli.script}),
             Contains("gives TLS files, but every etcd member is plain http"));
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--rdzv-endpoint", "https://h:2379",
                        "--rdzv-conf", "key=" + pem, cli.script}),
             Contains("has no certificate; add cert=PATH"));
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--rdzv-endpoint", "https://h:2379",
                        "--rdzv-conf", "protocol=http", cli.script}),
             Contains("protocol=http, but the member https://h:2379 asks for TLS"));
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--rdzv-endpoint", "h:2379", "--rdzv-conf",
                        "protocol=grpc", cli.script}),
             Contains("protocol=grpc: etcd is reached over http or https"));
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--rdzv-endpoint", "h:2379", "--rdzv-conf",
                        "user=root", cli.script}),
             Contains("etcd user 'root' has no password"));
  CHECK_THAT(cli.error({"--rdzv-conf", "etcd_prefix=/x", cli.script}),
             Contains("an etcd setting, but --rdzv-backend is static"));
  // Blanks and quotes around values, as torchrun's parser takes them; torch's boolean words.
  const LaunchConfig q =
      cli.ok({"--rdzv-conf", " join_timeout = '600' ,is_host=\"False\",use_libuv=1", cli.script});
  CHECK(q.rendezvous.conf.at("join_timeout") == "600");
  CHECK(q.rendezvous.is_host == false);
  CHECK(cli.ok({"--rdzv-conf", "is_host=yes", cli.script}).rendezvous.is_host == true);
  CHECK_FALSE(cli.ok({cli.script}).rendezvous.is_host.has_value());
  CHECK_THAT(cli.error({"--rdzv-conf", "is_host=maybe", cli.script}),
             Contains("is_host=maybe: expected true or false"));
  CHECK_THAT(cli.error({"--rdzv-conf", "timeout= ", cli.script}),
             Contains("'timeout' has no value"));
}

TEST_CASE("cli: run id and role become directory names, so they are checked", "[cli]") {
  Cli cli;
  CHECK_THAT(cli.error({"--run-id", "../etc", cli.script}),
             Contains("--run-id '../etc': a run id"));
  CHECK_THAT(cli.error({"--run-id", "", cli.script}), Contains("--run-id ''"));
  CHECK_THAT(cli.error({"--role", "a b", cli.script}), Contains("--role 'a b': a role name"));
  CHECK(cli.ok({"--run-id", "job-42.step_0", cli.script}).rendezvous.run_id == "job-42.step_0");
}

TEST_CASE("cli: supervision settings", "[cli]") {
  Cli cli;
  CHECK(cli.ok({"--term-timeout", "0", cli.script}).supervision.term_timeout ==
        std::chrono::milliseconds(0));
  CHECK_THAT(cli.error({"--term-timeout", "-1", cli.script}), Contains("--term-timeout -1"));
  CHECK_THAT(cli.error({"--max-restarts", "-2", cli.script}),
             Contains("--max-restarts -2: must be 0 or more"));
  CHECK(cli.ok({"--signals-to-handle", "SIGTERM,USR1,SIGTERM", cli.script})
            .supervision.stop_signals == std::vector<int>{SIGTERM, SIGUSR1});
  CHECK_THAT(cli.error({"--signals-to-handle", "SIGKILL", cli.script}),
             Contains("cannot handle 'KILL'"));
  CHECK_THAT(cli.error({"--start-method", "threads", cli.script}),
             Contains("expected spawn, fork or forkserver"));
  CHECK_THAT(cli.error({"--log-level", "loud", cli.script}), Contains("--log-level 'loud'"));
  CHECK(cli.ok({"--log-level", "warning", cli.script}).agent.log_level == "warn");
}

TEST_CASE("cli: output routing flags", "[cli]") {
  Cli cli;
  LaunchConfig c = cli.ok({"-r", "3", cli.script});
  CHECK(c.output.log_dir_is_temporary);  // files were asked for without a directory
  c = cli.ok({"--log-dir", cli.dir.path(), cli.script});
  // As torchrun: a log directory alone asks for error files, not for the streams.
  CHECK(c.output.tee.empty());
  CHECK(c.output.redirects.empty());
  CHECK(c.output.log_dir == cli.dir.path());
  c = cli.ok({"--log-dir", cli.dir.path(), "-r", "2", cli.script});
  CHECK(c.output.tee.empty());
  CHECK(c.output.redirects.for_rank(0) == StdStreams::kErr);
  c = cli.ok({"--nproc", "16", "-t", "0:3,12:1", "--log-dir", cli.dir.path(), cli.script});
  CHECK(c.output.tee.for_rank(12) == StdStreams::kOut);
  CHECK_THAT(cli.error({"--nproc", "4", "-t", "0:3,12:1", cli.script}),
             Contains("-t '0:3,12:1': local rank 12 does not exist with 4 workers per node"));
  c = cli.ok({"--nproc", "4", "--local-ranks-filter", "0,2", cli.script});
  CHECK(*c.output.local_ranks_filter == std::set<int>{0, 2});
  CHECK_THAT(cli.error({"--nproc", "2", "--local-ranks-filter", "5", cli.script}),
             Contains("local rank 5 does not exist with 2 workers"));
  CHECK_THAT(cli.error({"--local-ranks-filter", "a", cli.script}),
             Contains("'a' is not a local rank"));
  c = cli.ok({"--log-line-prefix-template", "${host}:${rank}> ", cli.script});
  CHECK(c.output.prefix_template == "${host}:${rank}> ");
  CHECK_THAT(cli.error({"--log-line-prefix-template", "${nope}", cli.script}),
             Contains("is not a placeholder"));
  // torchrun 2.x's filters: ',,' is a comma inside a filter; empty items copy nothing.
  c = cli.ok({"--duplicate_stdout_filters", "loss,,acc,,step,", "--duplicate-stderr-filters",
              "Error", cli.script});
  CHECK(c.output.stdout_filters == std::vector<std::string>{"loss,acc,step"});
  CHECK(c.output.stderr_filters == std::vector<std::string>{"Error"});
  CHECK(c.output.log_dir_is_temporary);  // the copies need a directory, as under torchrun
  c = cli.ok({"--duplicate-stdout-filters", "a,b,,c,,,d", cli.script});
  CHECK(c.output.stdout_filters == std::vector<std::string>{"a", "b,c,", "d"});
  c = cli.ok({"--duplicate-stdout-filters", "", cli.script});
  CHECK(c.output.stdout_filters.empty());
  CHECK_FALSE(c.output.log_dir_is_temporary);
  CHECK_THAT(cli.error({"--json", cli.script}),
             Contains("--json only changes the output of --dry-run"));
  c = cli.ok({"--dry-run", "--json", cli.script});
  CHECK(c.agent.dry_run);
  CHECK(c.agent.json);
}

TEST_CASE("cli: --help shows examples and --version the version", "[cli]") {
  Cli cli;
  ParseResult r = cli.parse({"--help"});
  REQUIRE(std::holds_alternative<EarlyExit>(r));
  CHECK(std::get<EarlyExit>(r).exit_code == 0);
  CHECK_THAT(std::get<EarlyExit>(r).text, Contains("Examples:") && Contains("--nproc-per-node") &&
                                              Contains("PET_<NAME>") && Contains("Exit status"));
  r = cli.parse({"--version"});
  REQUIRE(std::holds_alternative<EarlyExit>(r));
  CHECK(std::get<EarlyExit>(r).exit_code == 0);
  CHECK(std::get<EarlyExit>(r).text == std::string("npu_run ") + kVersion + "\n");
}

TEST_CASE("cli: Ascend options --soc, --rank-table and --hccn-conf", "[cli]") {
  Cli cli;
  const std::string data = std::string(testing::build_paths::kTestData) + "/rank_table/";
  LaunchConfig c =
      cli.ok({"--soc", "atlas-training", "--nproc", "4", "--devices", "4-7", cli.script});
  CHECK(c.ascend.soc == Soc::kAtlasTraining);
  CHECK(c.wants_peers());
  CHECK_THAT(cli.error({"--soc", "atlas-training", "--nproc", "4", "--devices", "2-5", cli.script}),
             Contains("cross the rings"));
  CHECK_THAT(cli.error({"--soc", "tpu", cli.script}), Contains("--soc 'tpu'"));

  c = cli.ok({"--nproc", "2", "--devices", "6,7", "--rank-table", "auto", "--hccn-conf",
              data + "hccn.conf", cli.script});
  CHECK(c.ascend.rank_table_auto());
  CHECK(c.ascend.device_ips() == std::vector<std::string>{"192.168.102.100", "192.168.103.100"});
  CHECK_THAT(cli.error({"--nproc", "2", "--devices", "7,8", "--rank-table", "auto", "--hccn-conf",
                        data + "hccn.conf", cli.script}),
             Contains("has no address_8 for this node's devices 7-8"));
  cli.env["NPU_RUN_HCCN_CONF"] = "/nonexistent/hccn.conf";
  CHECK_THAT(cli.error({"--rank-table", "auto", cli.script}),
             Contains("cannot read /nonexistent/hccn.conf"));
  CHECK_THAT(cli.error({"--hccn-conf", data + "hccn.conf", cli.script}),
             Contains("add --rank-table auto"));

  c = cli.ok({"--nproc", "4", "--devices", "4-7", "--rank-table",
              data + "hccl_4p_4567_127.0.0.1.json", cli.script});
  REQUIRE(c.ascend.given_rank_table() != nullptr);
  CHECK(c.ascend.given_rank_table()->path == data + "hccl_4p_4567_127.0.0.1.json");
  // Read once, here, and kept: the agent matches it against its ranks without reading it again.
  CHECK(c.ascend.given_rank_table()->table.device_count() == 4);
  CHECK_FALSE(c.wants_peers());
  CHECK_THAT(cli.error({"--rank-table", data + "hccn.conf", cli.script}),
             Contains("not valid JSON"));
  CHECK_THAT(cli.error({"--rank-table", "/nonexistent.json", cli.script}),
             Contains("cannot read the rank table"));
}

}  // namespace test_command_line
