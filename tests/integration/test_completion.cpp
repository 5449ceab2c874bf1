// `npu_run completion bash|zsh|tcsh` (and torchrun 2.14's --print-completion), through the
// shells themselves: each script must parse, offer every option that each command's --help
// shows, and complete values, subcommands and scripts as a user expects. zsh's completion
// system is stood in for by functions that print what the script hands it (compadd, _describe,
// _files, compset), matched against the word as zsh would.
#include <catch2/catch.hpp>
#include <regex>
#include <set>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_completion {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// The completions bash offers for `words` (the last one is being completed).
std::string complete(const std::string& script, const std::vector<std::string>& words) {
  TempDir dir;
  std::string quoted;
  for (const auto& w : words) quoted += " '" + w + "'";
  const std::string runner =
      dir.write("run.sh", "source " + script + "\nCOMP_WORDS=(" + quoted +
                              ")\nCOMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n"
                              "COMPREPLY=()\n_npu_run\n"
                              "[ ${#COMPREPLY[@]} -eq 0 ] || printf '%s\\n' \"${COMPREPLY[@]}\"\n");
  const Finished f = run_npu_run({"--no-python", "/bin/bash", runner}, {}, 20s, source_dir());
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  return f.out;
}

// Every --option spelled at the start of a --help line.
std::set<std::string> options_in_help(const std::string& help) {
  std::set<std::string> names;
  const std::regex option_line(
      R"(^\s+((-[A-Za-z],)?--[A-Za-z][-_A-Za-z0-9]*(,--?[-_A-Za-z0-9]+)*))");
  std::istringstream lines(help);
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, option_line)) continue;
    std::istringstream spellings(m[1].str());
    std::string name;
    while (std::getline(spellings, name, ',')) names.insert(name);
  }
  return names;
}

}  // namespace

TEST_CASE("completion: the bash script parses and offers every option of every command",
          "[integration][completion]") {
  TempDir dir;
  const Finished generated = run_npu_run({"completion", "bash"});
  REQUIRE(generated.exit_code == 0);
  const std::string script = dir.write("npu_run.bash", generated.out);
  const Finished syntax = run_npu_run({"--no-python", "/bin/bash", "-n", script});
  INFO(syntax.err);
  CHECK(syntax.exit_code == 0);

  for (const std::string command : {"", "rdzv-server", "rank-table", "doctor"}) {
    INFO("command '" << command << "'");
    std::vector<std::string> help_args;
    if (!command.empty()) help_args.emplace_back(command);
    help_args.emplace_back("--help");
    const std::set<std::string> in_help = options_in_help(run_npu_run(help_args).out);
    CHECK(in_help.size() > 5);
    std::vector<std::string> words = {"npu_run"};
    if (!command.empty()) words.emplace_back(command);
    words.emplace_back("-");
    const std::string offered = complete(script, words);
    for (const std::string& option : in_help) {
      INFO(option);
      CHECK(count_occurrences(offered, option + "\n") == 1);
    }
  }
}

TEST_CASE("completion: values, subcommands and the script complete as expected",
          "[integration][completion]") {
  TempDir dir;
  const std::string script = dir.write("npu_run.bash", run_npu_run({"completion", "bash"}).out);
  CHECK(complete(script, {"npu_run", "--log-level", "d"}) == "debug\n");
  CHECK(complete(script, {"npu_run", "--log_level=w"}) == "warn\n");
  CHECK(complete(script, {"npu_run", "--cluster", ""}) == "auto\nslurm\nmpi\nk8s\nnone\n");
  CHECK(complete(script, {"npu_run", "rank-table", "--version", ""}) == "1.0\n1.2\n");
  CHECK(complete(script, {"npu_run", "rank-table", "--me"}) == "--merge\n");
  CHECK(complete(script, {"npu_run", "doct"}) == "doctor\n");
  CHECK(complete(script, {"npu_run", "completion", ""}) == "bash\nzsh\ntcsh\n");
  // Files where a file is expected (the tests run in the source tree).
  CHECK_THAT(complete(script, {"npu_run", "--nproc-per-node", "2", "examples/train_"}),
             Contains("examples/train_ddp.py"));
  CHECK_THAT(complete(script, {"npu_run", "--log-dir", "exam"}), Contains("examples"));
  // A flag takes no value: the word after it is the script.
  CHECK_THAT(complete(script, {"npu_run", "--standalone", "examples/train_"}),
             Contains("examples/train_ddp.py"));
  // After the script, options are the script's: npu_run offers nothing of its own.
  CHECK(complete(script, {"npu_run", "--nproc-per-node", "2", "train.py", "--lo"}).empty());
}

TEST_CASE("completion: shells without a script are refused with the usage",
          "[integration][completion]") {
  const Finished f = run_npu_run({"completion", "fish"});
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.err, Contains("usage: npu_run completion {bash,zsh,tcsh}"));
  const Finished typed = run_npu_run({"--print-completion", "fish"});
  CHECK(typed.exit_code == 2);
  CHECK_THAT(typed.err, Contains("--print-completion 'fish': there are completion scripts for "
                                 "bash, zsh, tcsh"));
  CHECK(typed.out.empty());
}

TEST_CASE("completion: torchrun 2.14's --print-completion prints the same scripts",
          "[integration][completion]") {
  for (const std::string shell : {"bash", "zsh", "tcsh"}) {
    INFO(shell);
    const Finished subcommand = run_npu_run({"completion", shell});
    REQUIRE(subcommand.exit_code == 0);
    // As torchrun's users type it: before (or instead of) a script, in either spelling.
    for (const std::string spelling : {"--print-completion", "--print_completion"}) {
      const Finished typed = run_npu_run({spelling, shell});
      CHECK(typed.exit_code == 0);
      CHECK(typed.out == subcommand.out);
    }
    const Finished with_script =
        run_npu_run({"--nproc-per-node", "2", "--print-completion", shell, "train.py"});
    CHECK(with_script.exit_code == 0);
    CHECK(with_script.out == subcommand.out);
  }
}

}  // namespace test_completion
