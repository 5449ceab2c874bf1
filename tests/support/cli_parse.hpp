// The command line parsed as npu_run parses it, for the cli unit tests: a working directory with a
// training script, an environment where PYTHON_EXEC exists, and what parsing gave (a config, or
// the usage error's text).
#pragma once

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "cli/parse_launch.hpp"
#include "support/temp_dir.hpp"

namespace npu_run::testing {

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
    CHECK_THAT(e.text, Catch::Matchers::StartsWith("npu_run: error: ") &&
                           Catch::Matchers::Contains("Run 'npu_run --help'"));
    return e.text;
  }
};

}  // namespace npu_run::testing
