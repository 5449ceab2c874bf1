// The dry run tells all (issue 64): every variable a worker of the same command line receives,
// variable by variable, compared against what real workers found in their environment at exec
// (/proc/self/environ, before Python or a sitecustomize touched it). A value npu_run chooses at
// launch is shown as a template (XXXXXX, <pid>, a held port) and matched as one.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_dry_run_env {

using namespace npu_run::testing;
using nlohmann::json;

namespace {

// Each rank writes its own environment and its agent's (its parent), as exec gave them.
constexpr const char* kEnvDumpScript = R"(import json, os
def env_of(pid):
    raw = open('/proc/%s/environ' % pid, 'rb').read().split(b'\0')
    return dict(e.decode().split('=', 1) for e in raw if e)
rank = os.environ['LOCAL_RANK']
with open(os.path.join(os.environ['DUMP_DIR'], 'env.' + rank), 'w') as f:
    json.dump({'worker': env_of('self'), 'agent': env_of(os.getppid())}, f)
print('out-line-' + rank)
print('err-line-' + rank, file=__import__('sys').stderr)
)";

// Where the real run's line went, as the plan says: on the console, prefixed or not.
void check_stream(const json& route, const std::string& console, const std::string& line,
                  const std::string& prefix) {
  INFO(route.dump() << "\n" << console);
  const bool shown = console.find(line) != std::string::npos;
  CHECK(shown == route["console"].get<bool>());
  if (shown) CHECK((console.find(prefix + line) != std::string::npos) == route["prefixed"]);
}

// A dry run's value as a pattern: what npu_run fills in at launch matches what it filled in.
std::regex pattern_of(const json& shown) {
  if (shown.is_null()) return std::regex("[0-9]+");  // the held port
  std::string text =
      std::regex_replace(shown.get<std::string>(), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)");
  text = std::regex_replace(text, std::regex("XXXXXX"), "[A-Za-z0-9]{6}");
  text = std::regex_replace(text, std::regex("<pid>"), "[0-9]+");
  text = std::regex_replace(text, std::regex("<16 hex digits>"), "[0-9a-f]{16}");
  return std::regex(text);
}

}  // namespace

TEST_CASE("dry run: every variable a worker receives, against real workers of the same line",
          "[integration][dry-run]") {
  TempDir dir;
  const std::string script = dir.write("dump_env.py", kEnvDumpScript);
  const std::vector<std::string> line = {
      "--nproc-per-node", "2", "--hang-timeout", "60", "--log-dir", dir.file("logs"), script};
  const EnvOverrides env = {{"DUMP_DIR", dir.path()}};
  std::vector<std::string> dry = {"--dry-run", "--json"};
  dry.insert(dry.end(), line.begin(), line.end());
  const Finished plan_run = run_npu_run(dry, env);
  REQUIRE(plan_run.exit_code == 0);
  const json plan = json::parse(plan_run.out);
  std::vector<std::string> text_line = {"--dry-run"};
  text_line.insert(text_line.end(), line.begin(), line.end());
  const Finished text_run = run_npu_run(text_line, env);
  const Finished real = run_npu_run(line, env);
  INFO(real.err);
  REQUIRE(real.exit_code == 0);
  REQUIRE(plan["workers"].size() == 2);
  for (int rank = 0; rank < 2; ++rank) {
    const json shown = plan["workers"][rank]["env"];
    const json found = json::parse(std::ifstream(dir.file("env." + std::to_string(rank))));
    const json& worker = found["worker"];
    const json& agent = found["agent"];
    for (const auto& [name, value] : shown.items()) {
      INFO("rank " << rank << ": " << name << " shown as " << value.dump());
      REQUIRE(worker.contains(name));
      CHECK(std::regex_match(worker[name].get<std::string>(), pattern_of(value)));
      CHECK(text_run.out.find("    " + name + "=") != std::string::npos);
    }
    // Everything else the worker has is npu_run's own environment, unchanged; nothing of it is
    // taken away without the plan saying so.
    for (const auto& [name, value] : worker.items()) {
      if (shown.contains(name)) continue;
      INFO("rank " << rank << ": " << name << "=" << value.dump() << " is not in the plan");
      REQUIRE(agent.contains(name));
      CHECK(agent[name] == value);
    }
    for (const auto& [name, value] : agent.items()) {
      INFO("rank " << rank << ": the agent's " << name << " did not reach the worker");
      CHECK(worker.contains(name));
    }
  }
  // What npu_run did with each stream is what the plan said it would.
  for (int rank = 0; rank < 2; ++rank) {
    const json& w = plan["workers"][rank];
    const std::string r = std::to_string(rank);
    const std::string prefix = w["console_prefix"].get<std::string>();
    check_stream(w["stdout"], real.out, "out-line-" + r, prefix);
    check_stream(w["stderr"], real.err, "err-line-" + r, prefix);
    CHECK(text_run.out.find("  stderr: " + w["stderr"]["text"].get<std::string>() + "\n") !=
          std::string::npos);
  }
  // Every supervision option is in the plan, in both forms.
  CHECK(plan["supervision"]["hang_timeout_s"] == 60.0);
  CHECK(text_run.out.find("supervision: hang timeout 60 s") != std::string::npos);
}

}  // namespace test_dry_run_env
