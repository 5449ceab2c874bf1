// The zsh and tcsh completion scripts (`npu_run completion zsh|tcsh`) in their own shells: zsh's
// reads the command line as bash's does and hands zsh every option with its help, each value
// and subcommand; tcsh's `complete` rule is taken by tcsh and names options, values and
// subcommands.
#include <catch2/catch.hpp>
#include <regex>
#include <set>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_completion_shells {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// What zsh's completion system does with the script's calls: a candidate is offered when it
// starts with PREFIX (the word being completed; compset -P '*=' moves what precedes the '='
// out of it), and _files stands for the files zsh would offer.
constexpr const char* kZshStandIns = R"(
compdef() { : }
compadd() {
  while (( $# )); do [[ $1 == -- ]] && { shift; break }; shift; done
  local w; for w in "$@"; do [[ $w == ${PREFIX}* ]] && print -r -- "$w"; done
}
_describe() {
  local e; for e in "${(@P)${@[-1]}}"; do [[ ${e%%:*} == ${PREFIX}* ]] && print -r -- "$e"; done
}
_files() { print -r -- "<files${*:+ $*}>" }
compset() { [[ $1 == -P ]] && PREFIX=${PREFIX#*=} }
)";

// What zsh is handed when completing the last of `words` (options come with their help).
std::string zsh_complete(const std::string& script, const std::vector<std::string>& words) {
  TempDir dir;
  std::string quoted;
  for (const auto& w : words) quoted += " '" + w + "'";
  // zsh's own complaints go to a file of their own: npu_run's log shares stderr.
  const std::string errors = dir.file("zsh.err");
  const std::string runner = dir.write(
      "run.zsh", "exec 2>" + errors + "\n" + kZshStandIns + "source " + script + "\nwords=(" +
                     quoted + ")\nCURRENT=${#words}\nPREFIX=${words[CURRENT]}\n_npu_run\n");
  const Finished f =
      run_npu_run({"--no-python", "/usr/bin/zsh", "-f", runner}, {}, 20s, source_dir());
  CHECK(read_file(errors).empty());
  return f.out;
}

// The names of "name:description" lines.
std::set<std::string> names_of(const std::string& lines) {
  std::set<std::string> names;
  std::istringstream in(lines);
  std::string line;
  while (std::getline(in, line)) names.insert(line.substr(0, line.find(':')));
  return names;
}

}  // namespace

TEST_CASE("completion: the zsh script parses and hands zsh every option of every command",
          "[integration][completion]") {
  TempDir dir;
  const Finished generated = run_npu_run({"completion", "zsh"});
  REQUIRE(generated.exit_code == 0);
  CHECK_THAT(generated.out, Contains("#compdef npu_run"));
  const std::string script = dir.write("_npu_run", generated.out);
  const Finished syntax = run_npu_run({"--no-python", "/usr/bin/zsh", "-n", script});
  INFO(syntax.err);
  CHECK(syntax.exit_code == 0);
  const std::string bash_script =
      dir.write("npu_run.bash", run_npu_run({"completion", "bash"}).out);

  for (const std::string command : {"", "rdzv-server", "rank-table", "doctor", "status"}) {
    INFO("command '" << command << "'");
    std::vector<std::string> words = {"npu_run"};
    if (!command.empty()) words.emplace_back(command);
    words.emplace_back("-");
    const std::set<std::string> offered = names_of(zsh_complete(script, words));
    CHECK(offered.size() > 5);
    // The same options as bash's script offers, which its own test holds to --help.
    const Finished bash = run_npu_run(
        {"--no-python", "/bin/bash", "-c",
         "source " + bash_script + "; _npu_run_options '" + command + "' | tr ' ' '\\n'"});
    std::set<std::string> bash_options;
    std::istringstream in(bash.out);
    for (std::string name; in >> name;) bash_options.insert(name);
    CHECK(offered == bash_options);
  }
  // With the help's first sentence as the description.
  CHECK_THAT(zsh_complete(script, {"npu_run", "--nnod"}),
             Contains("--nnodes:Number of nodes, N or MIN:MAX (default 1)"));
}

TEST_CASE("completion: zsh completes values, subcommands and the script",
          "[integration][completion]") {
  TempDir dir;
  const std::string script = dir.write("_npu_run", run_npu_run({"completion", "zsh"}).out);
  CHECK(zsh_complete(script, {"npu_run", "--log-level", "d"}) == "debug\n");
  CHECK(zsh_complete(script, {"npu_run", "--log_level=w"}) == "warn\n");
  CHECK(zsh_complete(script, {"npu_run", "--cluster", ""}) == "auto\nslurm\nmpi\nk8s\nnone\n");
  CHECK(zsh_complete(script, {"npu_run", "rank-table", "--version", ""}) == "1.0\n1.2\n");
  CHECK(zsh_complete(script, {"npu_run", "completion", ""}) == "bash\nzsh\ntcsh\n");
  CHECK(zsh_complete(script, {"npu_run", "--print-completion", "z"}) == "zsh\n");
  CHECK_THAT(zsh_complete(script, {"npu_run", "doct"}), Contains("doctor:") && Contains("<files>"));
  CHECK(zsh_complete(script, {"npu_run", "--log-dir", "exam"}) == "<files -/>\n");
  CHECK(zsh_complete(script, {"npu_run", "--rank-table", "x"}) == "<files>\n");
  // A flag takes no value: the word after it is the script.
  CHECK(zsh_complete(script, {"npu_run", "--standalone", "examples/train_"}) == "<files>\n");
  // After the script, the words are the script's: files, never npu_run's options.
  CHECK(zsh_complete(script, {"npu_run", "--nproc-per-node", "2", "train.py", "--lo"}) ==
        "<files>\n");
  // An option's value the script cannot guess: nothing.
  CHECK(zsh_complete(script, {"npu_run", "--nproc-per-node", ""}).empty());
}

TEST_CASE("completion: tcsh takes its script's rule", "[integration][completion]") {
  TempDir dir;
  const std::string script = dir.write("npu_run.tcsh", run_npu_run({"completion", "tcsh"}).out);
  const Finished f = run_npu_run(
      {"--no-python", "/usr/bin/tcsh", "-f", "-c", "source " + script + " && complete npu_run"});
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("n/--log-level/(trace debug info warn error critical off)/"));
  CHECK_THAT(f.out, Contains("n/--log-dir/d/"));
  CHECK_THAT(f.out, Contains("n/completion/(bash zsh tcsh)/"));
  CHECK_THAT(f.out, Contains(" nproc-per-node ") || Contains("(nproc-per-node "));
  CHECK_THAT(f.out, Contains("p/1/(") && Contains(" doctor "));
  CHECK_THAT(f.out, Contains("p/*/f/"));
}

}  // namespace test_completion_shells
