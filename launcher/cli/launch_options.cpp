#include "cli/launch_options.hpp"

#include <CLI/CLI.hpp>

#include "cli/value_parsers.hpp"
#include "npu_run/version.hpp"

namespace npu_run {

namespace {

const char* const kFooter = R"(Examples:
  npu_run --nproc-per-node 8 train.py --cfg a.yaml
  npu_run --nproc-per-node auto --devices 4-7 train.py          # 4 workers on NPUs 4..7
  npu_run --nproc-per-node 4 -m mypkg.train --lr 0.1              # python -u -m mypkg.train
  npu_run --nproc-per-node 2 --no-python ./run.sh                  # any executable
  npu_run --nproc-per-node 8 --log-dir logs -t 3 --local-ranks-filter 0 train.py
                                                # rank 0 on the console, every rank in logs/
  npu_run --nproc-per-node 8 --dry-run --json train.py            # show the plan, start nothing

Every option can also come from the environment as PET_<NAME> (e.g. PET_NPROC_PER_NODE=8);
the command line wins. Workers run $PYTHON_EXEC -u SCRIPT ARGS (PYTHON_EXEC defaults to python3).
"${local_rank}" in ARGS is replaced by each worker's local rank, as torchrun does.

Exit status: 0 when every worker succeeded; the root-cause worker's exit code (128+N for a
signal) when one failed; 128+N when npu_run was stopped by signal N; 2 for usage errors;
125 when the rendezvous failed (nodes missing, agents disagreeing, a node or the server lost).

Several nodes: run the same command on each with --nnodes N --master-addr NODE0 [--node-rank R];
node 0's agent hosts the rendezvous. `npu_run rdzv-server --help` runs it on a host of its own.
Or start them all from here over ssh: --hosts server0:8,server1:8 (or --hostfile FILE).
)";

// The app before any option registers: the options' defaults apply to options added after them.
std::unique_ptr<CLI::App> launch_app() {
  auto app = std::make_unique<CLI::App>(
      "npu_run [OPTIONS] SCRIPT [ARGS...]\n\nLaunch one worker per device, on one node or many; "
      "a drop-in for torchrun's command line.",
      "npu_run");
  app->set_version_flag("--version", std::string("npu_run ") + kVersion);
  app->footer(kFooter);
  app->prefix_command();  // parsing stops at the script; everything after it is the script's
  // As argparse: an option given twice takes the last value (scripts append overrides).
  app->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  return app;
}

}  // namespace

LaunchOptions::LaunchOptions() : OptionSet(launch_app()) {
  worker.no_python.option()->excludes(worker.module.option())->excludes(worker.run_path.option());
  hosts.include.option()->excludes(hosts.exclude.option());
}

LaunchOptions::~LaunchOptions() = default;

std::string LaunchOptions::exclusion_reason(const std::string& clash) const {
  // CLI11 says "--no-python excludes --module"; say why, too.
  if (clash.find("--include") != std::string::npos && clash.find("--exclude") != std::string::npos)
    return "--include and --exclude cannot be combined: one names what to use, the other what "
           "to leave out; drop one";
  if (clash.find("--no-python") == std::string::npos) return clash;
  if (clash.find("--module") != std::string::npos)
    return "--no-python and --module cannot be combined: a module needs python; drop one";
  if (clash.find("--run-path") != std::string::npos)
    return "--no-python and --run-path cannot be combined: --run-path runs python; drop one";
  return clash;
}

}  // namespace npu_run
