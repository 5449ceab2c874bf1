// The launch command line as npu_run parses it: run ids and roles, supervision, output routing,
// --help and --version, the Ascend options.
#include <catch2/catch.hpp>
#include <csignal>

#include "cli/parse_launch.hpp"
#include "npu_run/version.hpp"
#include "support/build_paths.hpp"
#include "support/cli_parse.hpp"

namespace test_command_line_outputs {

using namespace npu_run;
using Catch::Matchers::Contains;
using npu_run::testing::Cli;

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

}  // namespace test_command_line_outputs
