// --hosts, --hostfile, --include/--exclude, --env and env files: the hosts, slots and devices a
// launch over ssh picks, the variables it passes, the options each host's agent gets, and every
// mistake refused with the value and the fix.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>

#include "basics/env_file.hpp"
#include "basics/usage_error.hpp"
#include "cli/parse_launch.hpp"
#include "cluster/host_slots.hpp"
#include "cluster/node_ledger.hpp"
#include "support/temp_dir.hpp"

namespace test_hosts_options {

using namespace npu_run;
using Catch::Matchers::Contains;
using npu_run::testing::TempDir;

namespace {

std::string names(const std::vector<HostSlots>& hosts) {
  std::string out;
  for (const HostSlots& h : hosts) {
    out += (out.empty() ? "" : " ") + h.name;
    if (h.slots) out += ":" + std::to_string(*h.slots);
    if (!h.devices.empty()) {
      out += "[";
      for (size_t i = 0; i < h.devices.size(); ++i)
        out += (i ? "," : "") + std::to_string(h.devices[i]);
      out += "]";
    }
  }
  return out;
}

template <typename F>
std::string refusal(F f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  FAIL("no UsageError");
  return "";
}

struct HostsCli {
  TempDir dir;
  std::string script = dir.write("train.py", "print('hi')\n");
  EnvMap env{{"PATH", "/usr/bin:/bin"},
             {"PYTHON_EXEC", "/usr/bin/python3"},
             {"NPU_RUN_TEST_MARKER", "m"},
             {"NPU_RUN_RDZV_TOKEN", "secret"},
             {"HOME", "/nonexistent-home"},
             {"FROM_HERE", "here value"},
             {"UNRELATED", "x"}};

  HostsLaunch ok(const std::vector<std::string>& args) const {
    const ParseResult r = parse_command_line(args, env);
    if (const auto* e = std::get_if<EarlyExit>(&r)) FAIL("unexpected early exit: " << e->text);
    REQUIRE(std::holds_alternative<ParsedHosts>(r));
    return std::get<ParsedHosts>(r).launch;
  }
  std::string error(const std::vector<std::string>& args) const {
    const ParseResult r = parse_command_line(args, env);
    REQUIRE(std::holds_alternative<EarlyExit>(r));
    CHECK(std::get<EarlyExit>(r).exit_code == 2);
    return std::get<EarlyExit>(r).text;
  }
};

}  // namespace

TEST_CASE("hosts: --hosts takes horovod's HOST:SLOTS and Slurm hostlists", "[hosts]") {
  CHECK(names(parse_hosts_list("a:8,b", "--hosts")) == "a:8 b");
  CHECK(names(parse_hosts_list("node[01-03]:4,login", "--hosts")) ==
        "node01:4 node02:4 node03:4 login");
  CHECK(names(parse_hosts_list(" n[1,3]:2 , user@x ", "--hosts")) == "n1:2 n3:2 user@x");
  CHECK_THAT(refusal([] { parse_hosts_list("a:0", "--hosts"); }),
             Contains("--hosts 'a:0': slots '0' is not a number from 1 to 1024"));
  CHECK_THAT(refusal([] { parse_hosts_list("a:x", "--hosts"); }), Contains("slots 'x'"));
  CHECK_THAT(refusal([] { parse_hosts_list("a,,b", "--hosts"); }), Contains("an empty host"));
  CHECK_THAT(refusal([] { parse_hosts_list("a:8,n[1-2],a", "--hosts"); }),
             Contains("host 'a' is named twice"));
  CHECK_THAT(refusal([] { parse_hosts_list("-oProxyCommand=x", "--hosts"); }),
             Contains("cannot start with '-'"));
}

TEST_CASE("hosts: DeepSpeed's hostfile", "[hosts]") {
  const auto hosts = parse_hostfile(
      "# the cluster\n\nworker-1 slots=8\nworker-2\tslots=4   # half\n  worker-3\n", "hf");
  CHECK(names(hosts) == "worker-1:8 worker-2:4 worker-3");
  CHECK(hosts[1].origin == "hostfile hf line 4");
  CHECK_THAT(refusal([] { parse_hostfile("a slots=8\nb gpus=2\n", "hf"); }),
             Contains("hostfile hf line 2: 'b gpus=2' is not 'HOST slots=N'"));
  CHECK_THAT(refusal([] { parse_hostfile("a slots=8 slots=4\n", "hf"); }), Contains("line 1"));
  CHECK_THAT(refusal([] { parse_hostfile("a slots=-1\n", "hf"); }), Contains("slots '-1'"));
  CHECK_THAT(refusal([] { parse_hostfile("# nothing\n\n", "hf"); }),
             Contains("hostfile hf names no host"));
  CHECK_THAT(refusal([] { parse_hostfile("a slots=1\nb slots=1\na slots=2\n", "hf"); }),
             Contains("host 'a' is named twice (hostfile hf line 1; hostfile hf line 3)"));
}

TEST_CASE("hosts: --include and --exclude as DeepSpeed reads them", "[hosts]") {
  const auto hosts = parse_hosts_list("a:4,b:4,c:2", "--hosts");
  CHECK(names(filter_hosts(hosts, "b@a:1,3", "", std::nullopt)) == "a:2[1,3] b:4");
  CHECK(names(filter_hosts(hosts, "", "a:0@c", std::nullopt)) == "a:3[1,2,3] b:4");
  CHECK(names(filter_hosts(hosts, "", "c:0,1", std::nullopt)) == "a:4 b:4");  // c left empty
  // A host without slots counts --nproc-per-node's.
  CHECK(names(filter_hosts(parse_hosts_list("x,y", "--hosts"), "x:2", "", 4)) == "x:1[2]");
  CHECK_THAT(refusal([&] { filter_hosts(hosts, "a", "b", std::nullopt); }),
             Contains("--include and --exclude were both given"));
  CHECK_THAT(refusal([&] { filter_hosts(hosts, "d:0", "", std::nullopt); }),
             Contains("--include: host 'd' is not one of the job's hosts (a, b, c)"));
  CHECK_THAT(refusal([&] { filter_hosts(hosts, "c:2", "", std::nullopt); }),
             Contains("--include: host 'c' has no slot 2 (its slots: 0,1)"));
  CHECK_THAT(refusal([&] { filter_hosts(hosts, "", "a@b@c", std::nullopt); }),
             Contains("--exclude leaves no host to run on"));
  CHECK_THAT(refusal([&] { filter_hosts(hosts, "a:x", "", std::nullopt); }),
             Contains("slot 'x' of host 'a' is not a device number"));
  CHECK_THAT(refusal([&] { filter_hosts(hosts, "a@a", "", std::nullopt); }),
             Contains("host 'a' is named twice"));
  CHECK_THAT(
      refusal([] { filter_hosts(parse_hosts_list("x", "--hosts"), "x:0", "", std::nullopt); }),
      Contains("names slots of host 'x', which has no slot count"));
}

TEST_CASE("hosts: env files are NAME=VALUE lines", "[hosts]") {
  const auto vars = parse_env_file("# comment\n\nA=1\nB = two words=3\r\n  C=\n", "f");
  REQUIRE(vars.size() == 3);
  CHECK(vars[0] == std::pair<std::string, std::string>{"A", "1"});
  CHECK(vars[1] == std::pair<std::string, std::string>{"B", " two words=3"});
  CHECK(vars[2] == std::pair<std::string, std::string>{"C", ""});
  CHECK_THAT(refusal([] { parse_env_file("A=1\nexport B=2\n", "f"); }),
             Contains("f line 2: 'export B=2' is not NAME=VALUE"));
  CHECK_THAT(refusal([] { parse_env_file("1A=1\n", "f"); }), Contains("f line 1"));
  CHECK(is_variable_name("_A1"));
  CHECK_FALSE(is_variable_name("A-B"));
}

TEST_CASE("hosts: each host's agent gets the options given here, not the launcher's own",
          "[hosts]") {
  HostsCli cli;
  const std::string vars = cli.dir.write("vars.env", "FROM_FILE=1\nPATH=/file/path\n");
  const HostsLaunch l = cli.ok({"--hosts",
                                "a:2,b:2",
                                "--max-restarts",
                                "3",
                                "--ssh-option",
                                "User=me",
                                "--ssh-port",
                                "2222",
                                "--env",
                                "FROM_HERE",
                                "--env",
                                "SET=v",
                                "--env-file",
                                vars,
                                "--rdzv-id",
                                "job7",
                                "-t",
                                "3",
                                "--log-line-prefix-template",
                                "[${rank}]",
                                cli.script,
                                "--lr",
                                "0.1"});
  CHECK(names(l.hosts) == "a:2 b:2");
  CHECK(l.agent_options ==
        std::vector<std::string>{"--run-id=job7", "--max-restarts=3", "--tee=3", "--cluster=none"});
  CHECK(l.script_and_args == std::vector<std::string>{cli.script, "--lr", "0.1"});
  CHECK(l.prefix_template == "[${rank}]");
  CHECK(l.ssh.port == 2222);
  CHECK(l.ssh.options == std::vector<std::string>{"User=me"});
  CHECK(l.ssh.fanout == 32);
  // The token goes by itself, never among the variables.
  REQUIRE(std::holds_alternative<GivenToken>(l.token));
  CHECK(std::get<GivenToken>(l.token).value == "secret");
  std::map<std::string, std::string> passed;
  for (const PassedVariable& v : l.env) passed[v.name] = v.value + " <" + v.source + ">";
  CHECK(passed == std::map<std::string, std::string>{{"NPU_RUN_TEST_MARKER", "m <default>"},
                                                     {"PATH", "/file/path <" + vars + " (2)>"},
                                                     {"PYTHON_EXEC", "/usr/bin/python3 <default>"},
                                                     {"FROM_FILE", "1 <" + vars + " (1)>"},
                                                     {"FROM_HERE", "here value <--env>"},
                                                     {"SET", "v <--env>"}});
  CHECK_FALSE(l.rendezvous_given);
}

TEST_CASE("hosts: --spares makes the last hosts spares, the ledger leaves bad hosts out",
          "[hosts][spares]") {
  HostsCli cli;
  HostsLaunch l = cli.ok({"--hosts", "a,b,c", "--spares", "1", cli.script});
  CHECK(l.spares == 1);
  CHECK(names(l.hosts) == "a b c");
  CHECK(std::count(l.agent_options.begin(), l.agent_options.end(), "--spares=1") == 1);
  CHECK_THAT(cli.error({"--hosts", "a,b", "--spares", "2", cli.script}),
             Contains("--spares 2: the spares are the last of the 2 hosts"));
  CHECK_THAT(cli.error({"--hosts", "a,b,c", "--spares", "1", "--nnodes", "3", cli.script}),
             Contains("--nnodes 3 with --spares 1 but 3 hosts are named"));
  // b lost an hour ago, c cleared after its loss; an entry older than the TTL is void.
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  LedgerEntry lost{"b", "10.0.0.2", 1, now_ms - 3'600'000, "lost", "agent lost", "job", false};
  LedgerEntry old = lost;
  old.host = "a";
  old.time_ms = now_ms - 2 * 86'400'000LL;
  LedgerEntry c = lost;
  c.host = "c";
  LedgerEntry cleared{"c", "", -1, now_ms - 60'000, "", "", "", true};
  const std::string ledger = cli.dir.write(
      "ledger.jsonl", ledger_line(lost) + ledger_line(old) + ledger_line(c) + ledger_line(cleared));
  l = cli.ok({"--hosts", "a,b,c", "--ledger", ledger, cli.script});
  CHECK(names(l.hosts) == "a c");
  REQUIRE(l.ledgered.size() == 1);
  CHECK_THAT(l.ledgered[0], Contains("b: lost at ") && Contains("job 'job', node 1, 10.0.0.2"));
  CHECK_THAT(cli.error({"--hosts", "b", "--ledger", ledger, cli.script}),
             Contains("every host is in the ledger of bad nodes"));
}

TEST_CASE("hosts: .npu_run_env is read from here when present", "[hosts]") {
  HostsCli cli;
  cli.dir.write(".npu_run_env", "DEFAULT_FILE=yes\n");
  const std::string cwd = std::filesystem::current_path();
  std::filesystem::current_path(cli.dir.path());
  const HostsLaunch l = cli.ok({"--hosts", "a", cli.script});
  std::filesystem::current_path(cwd);
  const bool found = std::any_of(l.env.begin(), l.env.end(), [](const PassedVariable& v) {
    return v.name == "DEFAULT_FILE" && v.value == "yes";
  });
  CHECK(found);
}

TEST_CASE("hosts: mistakes of a launch over ssh are refused with the fix", "[hosts]") {
  HostsCli cli;
  const std::string s = cli.script;
  CHECK_THAT(cli.error({"--hosts", "a", "--hostfile", "f", s}),
             Contains("--hosts and --hostfile both name the job's hosts"));
  CHECK_THAT(cli.error({"--hosts", "a:2,b:2", "--nproc-per-node", "4", s}),
             Contains("--nproc-per-node 4 but host 'a' has 2 slots"));
  CHECK_THAT(cli.error({"--hosts", "a,b", "--node-rank", "1", s}),
             Contains("--node-rank cannot be given with --hosts/--hostfile"));
  CHECK_THAT(cli.error({"--hosts", "a,b", "--nnodes", "3", s}),
             Contains("--nnodes 3 but 2 hosts are named"));
  CHECK_THAT(cli.error({"--hosts", "a,b", "--env", "NOT_SET_ANYWHERE", s}),
             Contains("--env NOT_SET_ANYWHERE: NOT_SET_ANYWHERE is not set here"));
  CHECK_THAT(cli.error({"--hosts", "a", "--env", "NPU_RUN_RDZV_TOKEN=x", s}),
             Contains("the token reaches the hosts by itself"));
  CHECK_THAT(cli.error({"--hosts", "a", "--env", "A-B=1", s}), Contains("--env 'A-B=1'"));
  CHECK_THAT(cli.error({"--hosts", "a", "--ssh-option", "-v", s}),
             Contains("--ssh-option '-v': expected OPTION=VALUE"));
  CHECK_THAT(cli.error({"--hosts", "a", "--ssh-fanout", "0", s}),
             Contains("--ssh-fanout 0: expected 1 to 1024"));
  CHECK_THAT(cli.error({"--hosts", "a:4", "--include", "a:0", "--devices", "0", s}),
             Contains("--devices and --include/--exclude both pick host 'a''s devices"));
  CHECK_THAT(cli.error({"--hosts", "a", "--include", "a", "--exclude", "a", s}),
             Contains("--include and --exclude cannot be combined"));
  CHECK_THAT(cli.error({"--hostfile", "/nonexistent/hosts", s}),
             Contains("--hostfile /nonexistent/hosts: cannot read it"));
  CHECK_THAT(cli.error({"--hosts", "a", "--env-file", "/nonexistent/vars", s}),
             Contains("--env-file /nonexistent/vars: cannot read it"));
  EnvMap no_ssh = cli.env;
  no_ssh["NPU_RUN_SSH"] = "/nonexistent/ssh";
  const ParseResult r = parse_command_line({"--hosts", "a", s}, no_ssh);
  REQUIRE(std::holds_alternative<EarlyExit>(r));
  CHECK_THAT(std::get<EarlyExit>(r).text, Contains("ssh ('/nonexistent/ssh') is not on PATH"));
}

}  // namespace test_hosts_options
