#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "agent/link/assignment.hpp"
#include "agent/plan_printer.hpp"

namespace test_plan_printer {

using namespace npu_run;
using Catch::Matchers::Contains;

TEST_CASE("plans: JSON lists every worker's command and contract env", "[plan]") {
  LaunchConfig cfg;
  cfg.shape.nproc_per_node = 2;
  cfg.shape.devices = {4, 5};
  cfg.worker.program = "/usr/bin/python3";
  cfg.worker.entrypoint = "train.py";
  cfg.worker.args = {"--cfg", "a b.yaml"};
  const Assignment a = planned_assignment(cfg, "h1");
  const auto specs = make_worker_specs(cfg, a, AttemptLayout{"/tmp/x", false, 0}, {});
  const auto plan = nlohmann::json::parse(format_plan_json(cfg, a, specs, "/tmp/x"));
  CHECK(plan["world_size"] == 2);
  CHECK(plan["worker_master_port"].is_null());
  REQUIRE(plan["workers"].size() == 2);
  CHECK(plan["workers"][1]["rank"] == 1);
  CHECK(plan["workers"][1]["device_id"] == 5);
  CHECK(plan["workers"][1]["command"] ==
        nlohmann::json::array({"/usr/bin/python3", "-u", "train.py", "--cfg", "a b.yaml"}));
  CHECK(plan["workers"][1]["env"]["DEVICE_ID"] == "5");
  CHECK(plan["workers"][1]["env"]["MASTER_PORT"].is_null());
  CHECK(plan["workers"][1]["stdout"]["sink"] == "console");

  const std::string text = format_plan_text(cfg, a, specs, "/tmp/x");
  CHECK_THAT(text, Contains("nothing is started") && Contains("'a b.yaml'") &&
                       Contains("DEVICE_ID=5") &&
                       Contains("MASTER_PORT=<held by the agent, chosen at launch>"));
}

TEST_CASE("shell quoting only where needed", "[plan]") {
  CHECK(shell_quote("train.py") == "train.py");
  CHECK(shell_quote("--lr=0.1") == "--lr=0.1");
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_quote("") == "''");
  CHECK(shell_quote("$HOME") == "'$HOME'");
}

TEST_CASE("plans: a multi-node plan says which values the rendezvous will assign", "[plan]") {
  LaunchConfig cfg;
  cfg.shape.nproc_per_node = 2;
  cfg.shape.devices = {0, 1};
  cfg.shape.max_nodes = cfg.shape.min_nodes = 4;
  cfg.shape.node_rank = 2;
  cfg.rendezvous.master_addr = "10.0.0.1";
  cfg.worker.program = "/bin/true";
  cfg.worker.mode = WorkerMode::kExecutable;
  const Assignment a = planned_assignment(cfg, "h3");
  CHECK(a.rank_offset == 4);
  CHECK(a.world_size == 8);
  const auto specs = make_worker_specs(cfg, a, AttemptLayout{"/tmp/x", false, 0}, {});
  CHECK(specs[1].contract_env.at("RANK") == "5");
  CHECK_THAT(format_plan_text(cfg, a, specs, "/tmp/x"),
             Contains("rendezvous: 10.0.0.1:29500; node rank, rank offset and the workers' store "
                      "are assigned there"));
  const auto plan = nlohmann::json::parse(format_plan_json(cfg, a, specs, "/tmp/x"));
  CHECK(plan["assumed"] == true);
  CHECK(plan["rendezvous"] == "10.0.0.1:29500");
}

}  // namespace test_plan_printer
