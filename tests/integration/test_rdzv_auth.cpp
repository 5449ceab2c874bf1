// The rendezvous token through the real binary: nodes prove they share it (HMAC challenge), a
// node with another token or none is refused with a message saying so, the job itself goes on,
// and the token shows up nowhere a stranger could read it (logs, ps, the workers' environment).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>

#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace test_rdzv_auth {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

const std::string kToken = "tok-3f9a1c-sixteen-secret";

std::string private_token_file(const TempDir& dir, const std::string& token) {
  const std::string path = dir.write("token", token + "\n");
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  return path;
}

std::string cmdline_of(pid_t pid) {
  std::string text = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

}  // namespace

TEST_CASE("rdzv auth: nodes sharing a token form the job and the token stays secret",
          "[integration][auth]") {
  TempDir dir;
  const int port = unused_port();
  const std::string token_file = private_token_file(dir, kToken);
  for (const char* rank : {"0", "1"}) make_gate(dir.file(std::string("gate.") + rank));
  // Each worker records its environment, says it runs, and waits for the test.
  const std::string script = "env > \"$OUT/env.$RANK\"; echo running; read x < \"$OUT/gate.$RANK\"";
  auto a = start_node(port, 2, 1, script, {"--node-rank", "0", "--rdzv-token-file", token_file},
                      {{"OUT", dir.path()}});
  auto b = start_node(port, 2, 1, script, {"--node-rank", "1", "--rdzv-token", kToken},
                      {{"OUT", dir.path()}});
  a->wait_for_output("running", 1, 30s);
  b->wait_for_output("running", 1, 30s);
  // What `ps` shows of the agent that got the token as a flag: the flag, not the token.
  const std::string shown = cmdline_of(b->pid());
  CHECK_THAT(shown, Contains("--rdzv-token ****"));
  CHECK(shown.find(kToken) == std::string::npos);
  open_gate(dir.file("gate.0"));
  open_gate(dir.file("gate.1"));
  const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 30s);
  INFO(done[0].err << "\n----\n" << done[1].err);
  CHECK(done[0].exit_code == 0);
  CHECK(done[1].exit_code == 0);
  CHECK_THAT(done[0].err, Contains("rendezvous token: --rdzv-token-file " + token_file));
  CHECK_THAT(done[1].err, Contains("rendezvous token: --rdzv-token"));
  for (const Finished& f : done) CHECK((f.out + f.err).find(kToken) == std::string::npos);
  for (const char* rank : {"0", "1"}) {
    const std::string env = read_file(dir.file(std::string("env.") + rank));
    CHECK_THAT(env, Contains("RANK=" + std::string(rank)));
    CHECK(env.find(kToken) == std::string::npos);
  }
  require_no_strays(*a);
  require_no_strays(*b);
}

TEST_CASE("rdzv auth: the token from NPU_RUN_RDZV_TOKEN is not passed to the workers",
          "[integration][auth]") {
  TempDir dir;
  const int port = unused_port();
  const EnvOverrides env = {{"OUT", dir.path()}, {"NPU_RUN_RDZV_TOKEN", kToken}};
  auto a = start_node(port, 2, 1, "env > \"$OUT/env.$RANK\"", {}, env);
  auto b = start_node(port, 2, 1, "env > \"$OUT/env.$RANK\"", {}, env);
  const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 30s);
  INFO(done[0].err << "\n----\n" << done[1].err);
  CHECK(done[0].exit_code == 0);
  CHECK(done[1].exit_code == 0);
  CHECK_THAT(done[0].err, Contains("rendezvous token: NPU_RUN_RDZV_TOKEN"));
  for (const char* rank : {"0", "1"}) {
    const std::string worker_env = read_file(dir.file(std::string("env.") + rank));
    CHECK(worker_env.find("NPU_RUN_RDZV_TOKEN") == std::string::npos);
    CHECK(worker_env.find(kToken) == std::string::npos);
  }
  require_no_strays(*a);
  require_no_strays(*b);
}

TEST_CASE("rdzv auth: an agent with another token or none is refused and the job goes on",
          "[integration][auth]") {
  TempDir dir;
  const int port = unused_port();
  const std::string script = "echo done-$RANK";
  auto a = start_node(port, 2, 1, script, {"--node-rank", "0"}, {{"NPU_RUN_RDZV_TOKEN", kToken}});
  a->wait_for_output("rendezvous server on", 1, 30s, true);

  struct Intruder {
    EnvOverrides env;
    std::string agent_says;
    std::string server_says;
  };
  const std::vector<Intruder> intruders = {
      {{{"NPU_RUN_RDZV_TOKEN", "another-token"}},
       "does not know this agent's token (its proof did not match); give every node the same token",
       "hung up instead of proving the token"},
      {{},
       "this job needs a rendezvous token and the agent has none",
       "this job needs a rendezvous token"},
  };
  for (const Intruder& intruder : intruders) {
    const Finished f = run_npu_run({"--nnodes", "2", "--node-rank", "1", "--master-port",
                                    std::to_string(port), "--no-python", "/bin/true"},
                                   intruder.env, 30s);
    INFO(f.err);
    CHECK(f.exit_code == 125);
    CHECK_THAT(f.err, Contains(intruder.agent_says));
  }
  // The real node 1 still joins and the job completes.
  auto b = start_node(port, 2, 1, script, {"--node-rank", "1"}, {{"NPU_RUN_RDZV_TOKEN", kToken}});
  const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 30s);
  INFO(done[0].err << "\n----\n" << done[1].err);
  CHECK(done[0].exit_code == 0);
  CHECK(done[1].exit_code == 0);
  CHECK_THAT(done[0].out, Contains("done-0"));
  CHECK_THAT(done[1].out, Contains("done-1"));
  // The server logged the first refusal at once and summarized the second.
  CHECK_THAT(done[0].err, Contains(intruders[0].server_says));
  CHECK_THAT(done[0].err, Contains(intruders[1].server_says));
  require_no_strays(*a);
  require_no_strays(*b);
}

TEST_CASE("rdzv auth: a token on the agent but not on the server is refused by name",
          "[integration][auth]") {
  const int port = unused_port();
  auto a = start_node(port, 2, 1, "true", {"--node-rank", "0", "--rdzv-timeout", "20"});
  a->wait_for_output("rendezvous server on", 1, 30s, true);
  const Finished f = run_npu_run({"--nnodes", "2", "--node-rank", "1", "--master-port",
                                  std::to_string(port), "--no-python", "/bin/true"},
                                 {{"NPU_RUN_RDZV_TOKEN", kToken}}, 30s);
  CHECK(f.exit_code == 125);
  CHECK_THAT(f.err, Contains("the agent has a rendezvous token but this job's server has none"));
  a->send_signal(SIGTERM);
  CHECK(a->wait(30s).exit_code == 143);
  require_no_strays(*a);
}

TEST_CASE("rdzv auth: token files must be private and both token flags are refused",
          "[integration][auth]") {
  TempDir dir;
  const std::string open_file = dir.write("open_token", kToken + "\n");
  REQUIRE(::chmod(open_file.c_str(), 0644) == 0);
  const std::string empty_file = dir.write("empty_token", "\n");
  REQUIRE(::chmod(empty_file.c_str(), 0600) == 0);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--rdzv-token-file", open_file},
       "group or others may access it (mode 0644); run chmod 600 " + open_file},
      {{"--rdzv-token-file", empty_file}, "the first line is empty"},
      {{"--rdzv-token-file", dir.file("missing")}, "cannot read it: No such file or directory"},
      {{"--rdzv-token-file", dir.path()}, "not a regular file"},
      {{"--rdzv-token-file", private_token_file(dir, kToken), "--rdzv-token", "x"},
       "both give a rendezvous token; keep one"},
      {{"--rdzv-token", ""}, "--rdzv-token is empty"},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> args = {"--nnodes", "2", "--master-port", "29999"};
    args.insert(args.end(), flags.begin(), flags.end());
    for (const char* a : {"--no-python", "/bin/true"}) args.emplace_back(a);
    const Finished f = run_npu_run(args);
    INFO(f.err);
    CHECK(f.exit_code == 2);
    CHECK_THAT(f.err, Contains(message));
    CHECK(f.err.find(kToken) == std::string::npos);
  }
}

TEST_CASE("rdzv auth: inside a Slurm step every node derives the same token by itself",
          "[integration][auth]") {
  TempDir dir;
  const int port = unused_port();
  auto slurm_node = [&](int node_id) {
    EnvOverrides env = slurm_step_env(node_id, 1, "4243");
    env["XDG_CONFIG_HOME"] = dir.path();
    return std::make_unique<NpuRunProcess>(
        std::vector<std::string>{"--master-addr", "127.0.0.1", "--master-port",
                                 std::to_string(port), "--no-python", "/bin/true"},
        env);
  };
  auto a = slurm_node(0);
  auto b = slurm_node(1);
  const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 30s);
  INFO(done[0].err << "\n----\n" << done[1].err);
  CHECK(done[0].exit_code == 0);
  CHECK(done[1].exit_code == 0);
  const std::string secret = dir.file("npu_run/rdzv_secret");
  CHECK_THAT(done[0].err,
             Contains("rendezvous token: derived for Slurm step 4243.0 from " + secret));
  struct stat st {};
  REQUIRE(::stat(secret.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat(dir.file("npu_run").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  require_no_strays(*a);
  require_no_strays(*b);
}

TEST_CASE("rdzv auth: the dry-run plan says where the token comes from, never what it is",
          "[integration][auth]") {
  const Finished text = run_npu_run(
      {"--nnodes", "2", "--rdzv-token", kToken, "--dry-run", "--no-python", "/bin/true"});
  CHECK(text.exit_code == 0);
  CHECK_THAT(text.out, Contains("rendezvous token: --rdzv-token"));
  const Finished json =
      run_npu_run({"--nnodes", "2", "--dry-run", "--json", "--no-python", "/bin/true"},
                  {{"NPU_RUN_RDZV_TOKEN", kToken}});
  CHECK(json.exit_code == 0);
  CHECK_THAT(json.out, Contains("\"rdzv_token_source\": \"NPU_RUN_RDZV_TOKEN\""));
  for (const Finished& f : {text, json}) CHECK((f.out + f.err).find(kToken) == std::string::npos);
}

}  // namespace test_rdzv_auth
