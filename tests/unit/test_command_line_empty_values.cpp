// `--name=` is the empty value, as argparse reads it, for every option that takes a value: never
// the next word of the command line (CLI11 alone would take the script as the value).
#include <catch2/catch.hpp>
#include <CLI/CLI.hpp>

#include "cli/launch_options.hpp"
#include "support/cli_parse.hpp"

namespace test_command_line_empty_values {

using namespace npu_run;
using Catch::Matchers::Contains;
using npu_run::testing::Cli;

TEST_CASE("cli: --role= and --log-line-prefix-template= are the empty value, not the script",
          "[cli]") {
  Cli cli;
  // A role names the workers' folders: the empty one is refused in its own name, where it used
  // to take the script as the role and call "X" the script (docs/guide/differences.md).
  CHECK_THAT(cli.error({"--role=", cli.script, "X"}),
             Contains("--role '': a role name may not be empty") && !Contains("'X'"));
  CHECK_THAT(cli.error({"--role", "", cli.script}), Contains("--role '': a role name may not"));
  // '' means no prefix, the same as the separate form and the variable.
  const LaunchConfig joined = cli.ok({"--log-line-prefix-template=", "-t", "3", cli.script});
  const LaunchConfig separate = cli.ok({"--log-line-prefix-template", "", "-t", "3", cli.script});
  CHECK(joined.output.prefix_template == separate.output.prefix_template);
  CHECK(joined.worker.entrypoint == cli.script);
  // An abbreviation with '=' and the underscore spelling are read the same way.
  CHECK_THAT(cli.error({"--rol=", cli.script}), Contains("--role ''"));
  CHECK(cli.ok({"--log_line_prefix_template=", cli.script}).worker.entrypoint == cli.script);
}

// The walk over the whole option table: whatever an option makes of the empty value (taken,
// or refused in its own name), the script after it stays the script.
TEST_CASE("cli: no option with a value takes the next word for --name=", "[cli]") {
  Cli cli;
  const LaunchOptions table;
  int walked = 0;
  for (const CLI::Option* option : table.app().get_options()) {
    if (option->get_items_expected_max() == 0 || option->get_lnames().empty()) continue;
    const std::string name = "--" + option->get_lnames().front();
    ++walked;
    INFO(name);
    const ParseResult r = cli.parse({name + "=", cli.script, "NEXT"});
    if (const auto* parsed = std::get_if<ParsedLaunch>(&r)) {
      CHECK(parsed->config.worker.entrypoint == cli.script);
      CHECK(parsed->config.worker.args == std::vector<std::string>{"NEXT"});
    } else if (const auto* early = std::get_if<EarlyExit>(&r)) {
      INFO(early->text);
      CHECK_THAT(early->text, !Contains("NEXT") && !Contains("train.py"));
      if (early->exit_code != 0) CHECK_THAT(early->text, Contains(name));
    }
  }
  CHECK(walked > 60);
}

}  // namespace test_command_line_empty_values
