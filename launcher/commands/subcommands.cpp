// The table of subcommands: main() dispatches from it; --help, the completion and the man page
// list the same names.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/launch_options.hpp"
#include "commands/commands.hpp"

namespace npu_run {

std::unique_ptr<OptionTable> serve_options();
std::unique_ptr<OptionTable> rank_table_options();
std::unique_ptr<OptionTable> doctor_options();
std::unique_ptr<OptionTable> status_options();

namespace {

// Parses with `parse`, then runs `run` on the parsed command (or prints the early exit).
template <typename Parse, typename Run>
int parse_and_run(Parse parse, Run run) {
  auto parsed = parse();
  if (auto* early = std::get_if<EarlyExit>(&parsed)) return report_early_exit(*early);
  return run_guarded([&] { return run(std::get<0>(parsed)); });
}

class LaunchOptionTable : public OptionTable {
 public:
  CLI::App& app() override { return options_.app(); }

 private:
  LaunchOptions options_;
};

}  // namespace

const std::vector<Subcommand>& subcommands() {
  static const std::vector<Subcommand> table = {
      {"rdzv-server", "run the rendezvous alone, on a host of its own", serve_options,
       [](const std::vector<std::string>& args, const EnvMap& env) {
         return parse_and_run([&] { return parse_server_command(args, env); }, serve);
       }},
      {"rank-table", "write this server's HCCL rank table, or merge several", rank_table_options,
       [](const std::vector<std::string>& args, const EnvMap& env) {
         return parse_and_run([&] { return parse_rank_table_command(args, env); }, make_rank_table);
       }},
      {"doctor", "check this host for large or Ascend jobs, with the fix for each finding",
       doctor_options,
       [](const std::vector<std::string>& args, const EnvMap& env) {
         return parse_and_run([&] { return parse_doctor_command(args, env); }, doctor);
       }},
      {"status", "show a running job: nodes, ranks, each rank's last progress beat", status_options,
       [](const std::vector<std::string>& args, const EnvMap& env) {
         return parse_and_run([&] { return parse_status_command(args, env); }, show_status);
       }},
      {"msrun", "MindSpore's msrun command line, run by npu_run (change one word)", nullptr,
       msrun_command},
      {"hostnames", "expand a Slurm hostlist, one host per line", nullptr, print_hostnames},
      {"ledger", "list or clear the ledger of bad nodes (--spares, --ledger)", nullptr,
       ledger_command},
      {"report", "write a job's HTML report (rounds, beats, failures, goodput) from its timeline",
       nullptr, report_command},
      {"completion", "print the bash, zsh or tcsh completion script", nullptr, print_completion},
  };
  return table;
}

std::string subcommand_list() {
  std::string text = "Subcommands (npu_run SUBCOMMAND --help for their options):\n";
  for (const Subcommand& sub : subcommands())
    text += fmt::format("  {:<12} {}\n", sub.name, sub.summary);
  return text;
}

std::unique_ptr<OptionTable> launch_options() {
  return std::make_unique<LaunchOptionTable>();
}

int report_early_exit(const EarlyExit& early) {
  if (!early.completion.empty()) {
    std::cout << completion_script_for(early.completion);
    return 0;
  }
  std::string text = early.version ? version_report() : early.text;
  if (early.help) text += subcommand_list();
  (early.to_stderr ? std::cerr : std::cout) << text;
  return early.exit_code;
}

int run_guarded(const std::function<int()>& command) {
  try {
    return command();
  } catch (const UsageError& e) {
    std::cerr << "npu_run: error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const RendezvousConflict& e) {
    std::cerr << "npu_run: error: " << e.what() << "\n";
    return kExitRendezvous;
  } catch (const std::exception& e) {
    std::cerr << "npu_run: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace npu_run
