#include <iostream>

#include "basics/usage_error.hpp"
#include "cluster/hostlist.hpp"
#include "commands/commands.hpp"

namespace npu_run {

int print_hostnames(const std::vector<std::string>& args, const EnvMap& env) {
  if (!args.empty() && (args.front() == "-h" || args.front() == "--help")) {
    std::cout << "npu_run hostnames [EXPR]\n\nPrint the hosts of a Slurm hostlist expression (e.g. "
                 "node[01-04],gpu7) one "
                 "per line, as `scontrol show hostnames` does. Without EXPR, $SLURM_JOB_NODELIST "
                 "is expanded.\n";
    return 0;
  }
  if (args.size() > 1) {
    std::cerr << "npu_run: error: hostnames takes one expression; quote it if it holds spaces\n";
    return kExitUsage;
  }
  std::string expression;
  if (!args.empty()) {
    expression = args.front();
  } else if (const auto nodelist = lookup(env, "SLURM_JOB_NODELIST")) {
    expression = *nodelist;
  } else {
    std::cerr << "npu_run: error: hostnames: give an expression, or run inside a Slurm job "
                 "(SLURM_JOB_NODELIST)\n";
    return kExitUsage;
  }
  try {
    std::string out;
    for (const auto& host : expand_hostlist(expression)) out += host + "\n";
    std::cout << out;
    return 0;
  } catch (const UsageError& e) {
    std::cerr << "npu_run: error: " << e.what() << "\n";
    return kExitUsage;
  }
}

}  // namespace npu_run
