// Load generator for the rendezvous benchmark: simulates --agents agents (one connection each,
// the real RendezvousClient) that join one server, report success and wait for the decision.
// Prints one JSON line: how many were assigned and decided, how many failed, and the wall-clock
// times (ms since the epoch) of the first and last assignment. Several of these processes
// together simulate more agents than one process may open files for.
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "basics/environment.hpp"
#include "cli/host_probe.hpp"
#include "cli/rendezvous_options.hpp"
#include "cli/value_parsers.hpp"
#include "rendezvous/client/client.hpp"

using namespace npu_run::rdzv;

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What this process's agents went through; times in ms since the epoch, for the harness.
struct Stats {
  int assigned = 0, decided = 0, failed = 0;
  int64_t first_assigned_ms = 0, last_assigned_ms = 0;
  std::string first_failure;
};

class SimulatedAgent {
 public:
  SimulatedAgent(boost::asio::io_context& io, const ClientOptions& options, int index, int nnodes,
                 Stats& stats)
      : client_(io, options), index_(index), nnodes_(nnodes), stats_(stats) {}

  void start() {
    client_.start(RendezvousClient::Handlers{
        [this](const std::string& local_addr) {
          Join join;
          join.node.host = fmt::format("sim-{:07d}", index_);
          join.node.addr = local_addr;
          join.node.nproc = 1;
          join.node.devices = {0};
          join.node.worker_port = 1;  // never used: nobody runs workers here
          join.min_nodes = join.max_nodes = nnodes_;
          client_.send(join);
        },
        [this](const ServerMessage& message) {
          if (const auto* a = std::get_if<Assigned>(&message)) {
            const int64_t t = now_ms();
            if (stats_.assigned++ == 0) stats_.first_assigned_ms = t;
            stats_.last_assigned_ms = t;
            client_.send(Report{a->round, Outcome::kSucceeded, std::nullopt, 0});
          } else if (std::holds_alternative<Decision>(message)) {
            ++stats_.decided;
            client_.close();
          }
        },
        [this](const std::string& why) {
          if (stats_.failed++ == 0) stats_.first_failure = why;
        }});
  }

 private:
  RendezvousClient client_;
  int index_;
  int nnodes_;
  Stats& stats_;
};

// What the agents of this process are told: the server, and the job as the flags give it.
struct Job {
  std::string host = "127.0.0.1";
  int port = 0;
  int agents = 0;
  int first = 0;
  int nnodes = 0;
  ClientOptions client;
};

// The job's options are the agents' own: --nnodes, --run-id, the token, --rdzv-timeout (here
// also how long this process waits for its agents' decisions). Throws on a bad value.
void resolve_job(npu_run::OptionSet& table, const npu_run::RendezvousFlags& rdzv, Job& job) {
  const npu_run::EnvMap env = npu_run::current_environment();
  table.names().apply_environment(env);
  job.nnodes = npu_run::parse_nnodes(*rdzv.nnodes, "--nnodes").second;
  job.client.server_host = job.host;
  job.client.server_port = job.port;
  job.client.connect_timeout = npu_run::resolve_timing(rdzv).join_timeout;
  job.client.hello = Hello{kMagic, kProtocolVersion, *rdzv.run_id, ""};
  const auto probe = npu_run::real_host(env);
  if (auto given = npu_run::resolve_given_token(rdzv, *probe)) job.client.token = given->value;
}

int run(const Job& job) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  boost::asio::io_context io;
  Stats stats;
  std::vector<std::unique_ptr<SimulatedAgent>> simulated;
  simulated.reserve(job.agents);
  for (int i = 0; i < job.agents; ++i) {
    simulated.push_back(
        std::make_unique<SimulatedAgent>(io, job.client, job.first + i, job.nnodes, stats));
    simulated.back()->start();
  }
  io.run_for(job.client.connect_timeout);
  std::cout << nlohmann::json{{"agents", job.agents},
                              {"assigned", stats.assigned},
                              {"decided", stats.decided},
                              {"failed", stats.failed},
                              {"first_failure", stats.first_failure},
                              {"first_assigned_ms", stats.first_assigned_ms},
                              {"last_assigned_ms", stats.last_assigned_ms}}
                   .dump()
            << std::endl;
  return stats.failed == 0 && stats.decided == job.agents ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  npu_run::OptionSet table(
      std::make_unique<CLI::App>("Simulate agents joining an npu_run rendezvous server"));
  CLI::App& app = table.app();
  Job job;
  app.add_option("--host", job.host, "Server address");
  app.add_option("--port", job.port, "Server port")->required();
  app.add_option("--agents", job.agents, "Agents simulated by this process")->required();
  app.add_option("--first", job.first,
                 "Index of this process's first agent (host names sim-<index>)");
  const npu_run::RendezvousFlags rdzv(table, "Job", false);
  rdzv.nnodes.option()->required();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  try {
    resolve_job(table, rdzv, job);
  } catch (const std::exception& e) {
    std::cerr << "npu_run_rdzv_loadgen: " << e.what() << "\n";
    return 2;
  }
  return run(job);
}
