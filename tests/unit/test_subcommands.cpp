// The subcommands' option tables and the dispatch table: `rdzv-server` takes the agents' own
// rendezvous options with the same checks (they had drifted), and --help lists every subcommand.
#include <catch2/catch.hpp>

#include "cli/parse_launch.hpp"
#include "commands/commands.hpp"

namespace test_subcommands {

using namespace npu_run;
using Catch::Matchers::Contains;

namespace {

std::variant<ServerCommand, EarlyExit> server(const std::vector<std::string>& args,
                                              const EnvMap& env = {}) {
  return parse_server_command(args, env);
}

std::string server_error(const std::vector<std::string>& args) {
  auto r = server(args);
  REQUIRE(std::holds_alternative<EarlyExit>(r));
  CHECK(std::get<EarlyExit>(r).exit_code == 2);
  return std::get<EarlyExit>(r).text;
}

}  // namespace

TEST_CASE("rdzv-server: the agents' rendezvous options, checked as the agents check them",
          "[cli][server]") {
  auto r = server({"--port", "29500", "--nnodes", "2:4", "--run-id", "job7", "--max-restarts", "3",
                   "--heartbeat-interval", "1", "--heartbeat-timeout", "4", "--rdzv-last-call", "2",
                   "--log-level", "warning"});
  REQUIRE(std::holds_alternative<ServerCommand>(r));
  const ServerCommand& cmd = std::get<ServerCommand>(r);
  CHECK(cmd.settings.min_nodes == 2);
  CHECK(cmd.settings.max_nodes == 4);
  CHECK(cmd.settings.run_id == "job7");
  CHECK(cmd.settings.max_restarts == 3);
  CHECK(cmd.settings.heartbeat_timeout == std::chrono::seconds(4));
  CHECK(cmd.settings.last_call == std::chrono::seconds(2));
  CHECK(cmd.log_level == "warn");  // launch accepted "warning", the server once refused it
  CHECK(cmd.options.port == 29500);

  // The same mistakes get the same messages as on the agents' command line.
  CHECK_THAT(server_error({"--port", "1", "--nnodes", "2", "--heartbeat-interval", "5",
                           "--heartbeat-timeout", "2"}),
             Contains("--heartbeat-timeout 2 must be longer than --heartbeat-interval 5"));
  CHECK_THAT(server_error({"--port", "1", "--nnodes", "2", "--rdzv-backlog", "-1"}),
             Contains("--rdzv-backlog -1: expected 0 (the kernel's somaxconn) up to 1000000"));
  CHECK_THAT(server_error({"--port", "1", "--nnodes", "3:2"}),
             Contains("--nnodes '3:2': the minimum is above the maximum"));
  CHECK_THAT(server_error({"--nnodes", "2"}),
             Contains("--port") && Contains("Run 'npu_run rdzv-server --help' for its options."));
}

TEST_CASE("rdzv-server: the token comes from NPU_RUN_RDZV_TOKEN, PET_ variables do not apply",
          "[cli][server]") {
  auto r = server({"--port", "29500", "--nnodes", "2"},
                  {{"NPU_RUN_RDZV_TOKEN", "s3cret"}, {"PET_NNODES", "7"}});
  REQUIRE(std::holds_alternative<ServerCommand>(r));
  CHECK(std::get<ServerCommand>(r).settings.token == "s3cret");
  CHECK(std::get<ServerCommand>(r).settings.max_nodes == 2);
}

TEST_CASE("help: npu_run --help lists every subcommand of the dispatch table", "[cli]") {
  auto r = parse_command_line({"--help"}, EnvMap{});
  REQUIRE(std::holds_alternative<EarlyExit>(r));
  REQUIRE(std::get<EarlyExit>(r).help);
  const std::string listing = subcommand_list();
  for (const Subcommand& sub : subcommands()) {
    CHECK_THAT(listing, Contains(std::string("  ") + sub.name) && Contains(sub.summary));
  }
  CHECK(subcommands().size() >= 5);
}

}  // namespace test_subcommands
