// `npu_run status`: the job as the rendezvous sees it. On a node of the job it asks the agent
// there (its status socket, this user's only: no token needed); with --master-addr/
// --master-port it asks the rendezvous itself, proving the job's token as an agent does.
//
// The agents are found in their private directories under $TMPDIR (or /tmp when it is unset;
// with --pid, /tmp too, where an agent whose TMPDIR was unusable made its own). Several agents
// of one job on a host are shown once; several jobs need --pid. The answer: round, phase,
// restarts, each node with its state and how long it has been silent, each rank's last beat
// aged to now (this node's as of now, the others' from their agents' heartbeats), the nodes
// waiting and missing, and the root cause.
//
// `--dump` first has every running rank's flight records and Python stacks collected on every
// node, nothing stopped (agent/rooms/records_dump_room.cpp), and prints them with the rank they put
// apart; it exits 1 when none could be collected.
//
// `--stop` ends the job of the agent here (a detached one of `npu_run msrun --join False`, or
// any): SIGTERM to the agent, which stops its workers as on a Ctrl-C, then a wait for its end.
#include <fmt/format.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "agent/round/status_text.hpp"
#include "basics/token_file.hpp"
#include "commands/commands.hpp"
#include "rendezvous/client/status_query.hpp"
#include "workers/agent_directory.hpp"

namespace npu_run {

namespace {

constexpr const char* kStatusCommand = "npu_run status";

class StatusOptions : public OptionTable {
 public:
  StatusOptions()
      : app_(
            "npu_run status [--master-addr ADDR --master-port PORT] [OPTIONS]\n\nShow a running "
            "job as its rendezvous sees it: nodes, ranks, the round and its restarts, each "
            "rank's last progress beat (NPU_RUN_PROGRESS) and its age, the nodes still "
            "missing, the root cause once there is one. On a node of the job it asks the "
            "npu_run agent there; elsewhere give the rendezvous' address and port, the run id "
            "and the job's token as the agents have them.",
            kStatusCommand) {
    master_addr = app_.add_option("--master-addr,--master_addr", cmd.master_addr,
                                  "Ask the rendezvous at this address instead of an agent here");
    master_port = app_.add_option("--master-port,--master_port", cmd.master_port,
                                  "The rendezvous port (default 29500)");
    app_.add_option("--rdzv-id,--rdzv_id,--run-id,--run_id", cmd.run_id,
                    "The job's run id, as the agents have it (default none)");
    app_.add_option("--rdzv-token-file,--rdzv_token_file", token_file,
                    "File holding the job's rendezvous token (else $NPU_RUN_RDZV_TOKEN)")
        ->type_name("FILE");
    app_.add_option("--pid", cmd.agent_pid,
                    "Ask the agent with this pid, when several run on this host");
    timeout = app_.add_option("--timeout", timeout_seconds,
                              "Seconds to wait for the answer (default 10)");
    app_.add_flag("--json", cmd.json, "Print the status as JSON");
    app_.add_flag("--dump", cmd.dump,
                  "First collect every running rank's flight records and Python stacks on every "
                  "node, without stopping anything (kept in attempt_N/<local rank>/dump_<id>/), "
                  "and name the rank they put apart");
    app_.add_flag("--stop", cmd.stop,
                  "Stop the job of the agent on this host (as SIGTERM would: its workers are "
                  "stopped, then it exits) and wait for it, up to --timeout (default 120)");
  }
  CLI::App& app() override { return app_; }

  CLI::App app_;
  StatusCommand cmd;
  std::string token_file;
  double timeout_seconds = 10;
  CLI::Option *master_addr, *master_port, *timeout = nullptr;
};

StatusCommand resolve(const StatusOptions& o, const EnvMap& env) {
  StatusCommand cmd = o.cmd;
  cmd.direct = o.master_addr->count() > 0 || o.master_port->count() > 0;
  if (cmd.master_port < 1 || cmd.master_port > 65535) {
    throw UsageError(
        fmt::format("--master-port {}: a port must be between 1 and 65535", cmd.master_port));
  }
  if (!(o.timeout_seconds > 0) || o.timeout_seconds > 3600) {
    throw UsageError(
        fmt::format("--timeout {}: give the seconds to wait, more than 0 and at "
                    "most 3600",
                    o.timeout_seconds));
  }
  cmd.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_seconds * 1000));
  // A stop waits for the workers' --term-timeout and the agent's own end.
  if (cmd.stop && o.timeout->count() == 0) cmd.timeout = std::chrono::seconds(120);
  if (cmd.stop && cmd.dump)
    throw UsageError("--dump collects the records of a running job and --stop ends it: give one");
  if (cmd.stop && cmd.direct)
    throw UsageError(
        "--stop ends the job of an agent on this host: leave out --master-addr/--master-port "
        "and run it on a node of the job");
  if (cmd.direct && cmd.agent_pid != 0)
    throw UsageError(
        "--pid asks an agent on this host, --master-addr/--master-port the "
        "rendezvous: give one of them");
  if (!o.token_file.empty()) {
    cmd.token = read_token_file(o.token_file, "--rdzv-token-file " + o.token_file);
  } else if (const auto token = lookup(env, kTokenVariable)) {
    cmd.token = *token;
  }
  return cmd;
}

// The agents of this user on this host that can be asked.
std::vector<AgentDirectory> askable_agents(bool every_place, const char* socket_name) {
  std::vector<AgentDirectory> out;
  for (AgentDirectory& dir : live_agent_directories(every_place)) {
    struct stat info {};
    const std::string socket = dir.path + "/" + socket_name;
    if (::lstat(socket.c_str(), &info) == 0 && S_ISSOCK(info.st_mode)) out.push_back(dir);
  }
  return out;
}

rdzv::StatusResult ask_agent_here(const StatusCommand& cmd) {
  // An agent named by --pid may have put its directory in /tmp (its TMPDIR was unusable).
  std::vector<AgentDirectory> agents = askable_agents(cmd.agent_pid != 0, kStatusSocketName);
  if (cmd.agent_pid != 0) {
    std::erase_if(agents, [&](const AgentDirectory& a) { return a.pid != cmd.agent_pid; });
    if (agents.empty()) {
      return fmt::format(
          "no npu_run agent with pid {} runs on this host as this user; leave "
          "out --pid to ask the one there is",
          cmd.agent_pid);
    }
  }
  if (agents.empty()) {
    return std::string(
        "no npu_run agent of this user runs on this host (with this TMPDIR); run npu_run status "
        "on a node of the job, or give the rendezvous' --master-addr and --master-port (with "
        "--rdzv-id and the token as the agents have them)");
  }
  // Several agents (nodes of one job on one host, or several jobs): one job is shown once, as
  // the first of its agents answered; its dump is asked of that agent alone.
  std::map<std::string, std::pair<rdzv::JobStatus, AgentDirectory>> jobs;  // by run id
  std::string failures;
  for (const AgentDirectory& agent : agents) {
    auto answer = rdzv::query_agent_status(agent.path + "/" + kStatusSocketName, cmd.timeout);
    if (auto* why = std::get_if<std::string>(&answer)) {
      failures += fmt::format("{}agent pid {}: {}", failures.empty() ? "" : "; ", agent.pid, *why);
      continue;
    }
    const std::string run_id = std::get<rdzv::JobStatus>(answer).run_id;
    jobs.try_emplace(run_id, std::get<rdzv::JobStatus>(std::move(answer)), agent);
  }
  if (jobs.empty()) return failures;
  if (jobs.size() == 1 && cmd.dump) {
    const AgentDirectory& agent = jobs.begin()->second.second;
    return rdzv::query_agent_status(agent.path + "/" + kDumpSocketName, cmd.timeout);
  }
  if (jobs.size() == 1) return jobs.begin()->second.first;
  std::string list;
  for (const auto& [run_id, job] : jobs)
    list += fmt::format("{}run id '{}' (agent pid {})", list.empty() ? "" : ", ", run_id,
                        job.second.pid);
  return fmt::format("several jobs run on this host: {}; pick one with --pid", list);
}

// An agent that is gone, or a zombie its parent has not reaped yet.
bool process_ended(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
}

// The one agent --stop means: the --pid given, or the only one here.
std::variant<pid_t, std::string> agent_to_stop(const StatusCommand& cmd) {
  std::vector<AgentDirectory> agents = live_agent_directories(cmd.agent_pid != 0);
  if (cmd.agent_pid != 0) {
    std::erase_if(agents, [&](const AgentDirectory& a) { return a.pid != cmd.agent_pid; });
    if (agents.empty())
      return fmt::format("no npu_run agent with pid {} runs on this host as this user",
                         cmd.agent_pid);
  }
  if (agents.empty()) return std::string("no npu_run agent of this user runs on this host");
  if (agents.size() > 1) {
    std::string pids;
    for (const AgentDirectory& a : agents)
      pids += fmt::format("{}{}", pids.empty() ? "" : ", ", a.pid);
    return fmt::format("several npu_run agents run on this host (pids {}); pick one with --pid",
                       pids);
  }
  return agents.front().pid;
}

int stop_agent_here(const StatusCommand& cmd) {
  const auto which = agent_to_stop(cmd);
  if (const auto* why = std::get_if<std::string>(&which)) {
    std::cerr << "npu_run status --stop: " << *why << "\n";
    return 1;
  }
  const pid_t pid = std::get<pid_t>(which);
  if (::kill(pid, SIGTERM) != 0) {
    std::cerr << fmt::format("npu_run status --stop: cannot signal pid {}: {}\n", pid,
                             std::strerror(errno));
    return 1;
  }
  const auto deadline = std::chrono::steady_clock::now() + cmd.timeout;
  while (!process_ended(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::cerr << fmt::format(
          "npu_run status --stop: agent pid {} got SIGTERM and is still stopping its job after "
          "{} s; wait longer (--timeout) or send it SIGKILL (its guardian then kills the "
          "workers)\n",
          pid, std::chrono::duration_cast<std::chrono::seconds>(cmd.timeout).count());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::cout << fmt::format("npu_run status --stop: the agent pid {} stopped its job and ended\n",
                           pid);
  return 0;
}

}  // namespace

std::variant<StatusCommand, EarlyExit> parse_status_command(const std::vector<std::string>& args,
                                                            const EnvMap& env) {
  return parse_subcommand<StatusOptions>(
      args, kStatusCommand, [&](const StatusOptions& options) { return resolve(options, env); });
}

int show_status(const StatusCommand& command) {
  if (command.stop) return stop_agent_here(command);
  const rdzv::StatusResult answer =
      command.direct
          ? rdzv::query_rendezvous_status(command.master_addr, command.master_port, command.run_id,
                                          command.token, command.timeout, command.dump)
          : ask_agent_here(command);
  if (const auto* why = std::get_if<std::string>(&answer)) {
    std::cerr << "npu_run status: " << *why << "\n";
    return 1;
  }
  const auto& status = std::get<rdzv::JobStatus>(answer);
  std::cout << (command.json ? job_status_json(status) : format_job_status(status));
  if (!command.dump) return 0;
  if (!status.dump) {
    std::cerr << "npu_run status --dump: the answer holds no dump (an older npu_run?)\n";
    return 1;
  }
  if (!command.json) std::cout << format_job_dump(*status.dump);
  return status.dump->error.empty() ? 0 : 1;
}

std::unique_ptr<OptionTable> status_options() {
  return std::make_unique<StatusOptions>();
}

}  // namespace npu_run
