// `npu_run --hosts h1,h2 ... SCRIPT` / `--hostfile FILE`: the whole multi-node job from one
// command. This npu_run runs no worker: it starts one agent per host through ssh (bounded
// fan-out, or a tree of hosts starting hosts), brings their output back, turns Ctrl-C into a
// stop on every host, stops the job when a host cannot be started (naming it with ssh's own
// words), and exits with the job's root-cause code, as node 0's agent reports it.
//
// The exit status: a host that could not be started stops the job and gives its code (255 from
// ssh, 127 when npu_run is not there, 2 for options the host refused); else 128+N after a
// signal; else node 0's agent's code (every agent learns the same decision). ssh runs in its
// own process group (a terminal's Ctrl-C reaches only this npu_run, which sends stop lines) with
// PR_SET_PDEATHSIG, so that it dies with npu_run and the hosts see EOF.
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/host_name.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "agent/records/agent_log.hpp"
#include "basics/descriptors.hpp"
#include "basics/exit_status.hpp"
#include "basics/usage_error.hpp"
#include "commands/commands.hpp"
#include "remote/host_plan.hpp"
#include "remote/host_sessions.hpp"
#include "remote/self_binary.hpp"
#include "rendezvous/protocol/auth.hpp"
#include "workers/child_exits.hpp"
#include "workers/child_setup.hpp"
#include "workers/console.hpp"

namespace npu_run {

namespace {

namespace asio = boost::asio;

// `ssh -G HOST`'s HostName: the address ~/.ssh/config gives an alias. Falls back to the name
// itself (without "user@") when ssh cannot say.
std::string node0_address(const HostsLaunch& launch) {
  const std::string& name = launch.hosts.front().name;
  const std::string plain =
      name.substr(name.find('@') == std::string::npos ? 0 : name.find('@') + 1);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return plain;
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  asio::io_context io;
  boost::system::error_code ec;
  const auto argv = ssh_config_argv(launch.ssh, name);
  const pid_t pid =
      spawn_helper(io, argv.front(), {argv.begin() + 1, argv.end()}, null, out[1], null, ec);
  ::close(out[1]);
  ::close(null);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(out[0], buffer, sizeof buffer)) > 0 && text.size() < (1 << 20);)
    text.append(buffer, static_cast<size_t>(n));
  ::close(out[0]);
  if (pid > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    forget_helper_process(pid);
  }
  const std::string address = host_name_from_ssh_config(text);
  return address.empty() ? plain : address;
}

std::string devices_text(const HostPlan& plan) {
  if (!plan.host.devices.empty())
    return fmt::format("devices {}", fmt::join(plan.host.devices, ","));
  return "devices: the host's own choice";
}

// Who starts each host: the launcher, or (--ssh-tree) the host whose children it is among.
std::vector<std::string> starters(const StartTree& tree, const std::vector<HostPlan>& plans) {
  std::vector<std::string> started_by(plans.size(), "the launcher");
  for (size_t starter = 0; starter < tree.children.size(); ++starter) {
    for (size_t child : tree.children[starter]) started_by[child] = plans[starter].host.name;
  }
  return started_by;
}

int print_plan(const HostsLaunch& launch, const std::vector<HostPlan>& plans, const StartTree& tree,
               const std::string& master, const std::string& token) {
  const std::vector<std::string> started_by = starters(tree, plans);
  if (launch.agent.json) {
    nlohmann::json hosts = nlohmann::json::array();
    for (size_t i = 0; i < plans.size(); ++i) {
      hosts.push_back({{"name", plans[i].host.name},
                       {"node_rank", plans[i].node_rank},
                       {"nproc_per_node", plans[i].nproc},
                       {"devices", plans[i].host.devices},
                       {"started_by", started_by[i]},
                       {"ssh", plans[i].ssh}});
    }
    nlohmann::json env = nlohmann::json::array();
    for (const PassedVariable& v : launch.env)
      env.push_back({{"name", v.name}, {"source", v.source}});
    const nlohmann::json plan = {{"hosts", hosts},
                                 {"rendezvous", master},
                                 {"token", token},
                                 {"variables", env},
                                 {"fanout", launch.ssh.fanout},
                                 {"tree", launch.ssh.tree},
                                 {"ship_binary", launch.ssh.ship_binary}};
    std::cout << plan.dump(2) << "\n";
    return 0;
  }
  std::string text = fmt::format(
      "npu_run over ssh: {} host{}, node 0 {} (rendezvous {}); token {}\n", plans.size(),
      plans.size() == 1 ? "" : "s", plans.front().host.name, master, token);
  text += fmt::format("ssh: {} at a time{}{}\n", launch.ssh.fanout,
                      launch.ssh.tree ? ", hosts start hosts (--ssh-tree)" : "",
                      launch.ssh.ship_binary ? ", npu_run's binary shipped first" : "");
  std::vector<std::string> names;
  for (const PassedVariable& v : launch.env)
    names.push_back(fmt::format("{} ({})", v.name, v.source));
  text += fmt::format("variables passed: {}\n",
                      names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", ")));
  for (size_t i = 0; i < plans.size(); ++i) {
    const HostPlan& p = plans[i];
    text += fmt::format("node {}: {}, {} worker{}{}, {}, started by {}\n  {}\n", p.node_rank,
                        p.host.name, p.nproc, p.nproc == "1" ? "" : "s",
                        p.host.slots ? "" : " (--nproc-per-node)", devices_text(p), started_by[i],
                        shell_join(p.ssh));
  }
  std::cout << text;
  return 0;
}

// What each host ended with.
struct HostOutcome {
  bool ready = false;
  bool ended = false;
  int code = 0;
};

class HostsRun {
 public:
  HostsRun(const HostsLaunch& launch, const std::vector<HostPlan>& plans) : launch_(launch) {
    for (const HostPlan& p : plans) outcomes_[p.host.name];
    node0_ = plans.front().host.name;
  }

  int run(std::vector<HostStart> starts, std::shared_ptr<const std::string> binary) {
    (void)std::signal(SIGPIPE, SIG_IGN);
    asio::io_context io;
    const QueuedConsole console;
    ChildExits exits(io);
    started_at_ = std::chrono::steady_clock::now();
    HostSessions sessions(
        io, exits, std::move(starts), launch_.ssh.fanout, std::move(binary),
        HostSessions::Handlers{
            [this](const std::string& host) { on_ready(host); },
            [this](const std::string& host, int code, const std::string& why) {
              on_ended(host, code, why);
            },
            [this, &sessions](const std::string& host, int code, const std::string& why) {
              on_failed(host, code, why, sessions);
            },
            [&io] { io.stop(); }},
        /*first_alone=*/true);
    asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
    signals.add(SIGQUIT);
    std::function<void()> wait_signal = [&] {
      signals.async_wait([&](boost::system::error_code ec, int sig) {
        if (ec) return;
        if (interrupted_by_ == 0) interrupted_by_ = sig;
        spdlog::warn("received {}: stopping the job on every host", signal_name(sig));
        sessions.stop(sig);
        wait_signal();
      });
    };
    wait_signal();
    spdlog::info("starting {} agent{} over ssh, {} at a time{}", outcomes_.size(),
                 outcomes_.size() == 1 ? "" : "s", launch_.ssh.fanout,
                 launch_.ssh.tree ? " (hosts start hosts)" : "");
    sessions.start();
    io.run();
    return exit_code();
  }

 private:
  void on_ready(const std::string& host) {
    auto it = outcomes_.find(host);
    if (it == outcomes_.end() || it->second.ready) return;
    it->second.ready = true;
    if (++ready_ == outcomes_.size()) {
      spdlog::info(
          "all {} agents started in {:.2f} s", ready_,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at_).count());
    }
  }

  void on_ended(const std::string& host, int code, const std::string& why) {
    auto it = outcomes_.find(host);
    if (it == outcomes_.end()) return;
    it->second.ended = true;
    it->second.code = code;
    if (!why.empty()) spdlog::warn("{}: {}", host, why);
  }

  void on_failed(const std::string& host, int code, const std::string& why,
                 HostSessions& sessions) {
    auto it = outcomes_.find(host);
    if (it != outcomes_.end()) {
      it->second.ended = true;
      it->second.code = code;
    }
    if (failure_code_ == 0) {
      failure_code_ = code == 0 ? 1 : code;
      spdlog::error("cannot start the agent on {}: {}{}", host, why, hint(code));
      spdlog::error("stopping the job: it cannot run without {}", host);
      sessions.stop(SIGTERM);
    } else if (why == first_why_) {
      ++same_failures_;
    } else {
      spdlog::error("cannot start the agent on {} either: {}", host, why);
    }
    if (first_why_.empty()) first_why_ = why;
  }

  static std::string hint(int code) {
    if (code == 255) return " (ssh could not connect or log in; try 'ssh HOST true' by hand)";
    if (code == 127) return " (npu_run is not at this path there: install it, or --ship-binary)";
    return "";
  }

  int exit_code() const {
    if (same_failures_ > 0)
      spdlog::error("{} more host{} failed the same way", same_failures_,
                    same_failures_ == 1 ? "" : "s");
    if (failure_code_ != 0) return failure_code_;
    if (interrupted_by_ != 0) return exit_for_signal(interrupted_by_);
    const HostOutcome& node0 = outcomes_.at(node0_);
    // With spares a lost host is replaced: the job's result is node 0's, whatever the lost
    // host's session ended with.
    if (node0.ended && (node0.code != 0 || launch_.spares > 0)) return node0.code;
    for (const auto& [host, outcome] : outcomes_) {
      if (outcome.ended && outcome.code != 0) return outcome.code;
    }
    return node0.ended ? node0.code : 1;
  }

  const HostsLaunch& launch_;
  std::map<std::string, HostOutcome> outcomes_;
  std::string node0_;
  size_t ready_ = 0;
  int interrupted_by_ = 0;
  int failure_code_ = 0;
  std::string first_why_;
  size_t same_failures_ = 0;
  std::chrono::steady_clock::time_point started_at_;
};

}  // namespace

int launch_on_hosts(const HostsLaunch& launch) {
  const std::string here = asio::ip::host_name();
  configure_agent_logging(launch.agent.log_level, here, std::nullopt);
  set_launcher_log_identity(here);
  for (const std::string& skipped : launch.ledgered)
    spdlog::warn("left out, in the ledger of bad nodes: {}", skipped);
  std::optional<SelfBinary> self;
  if (launch.ssh.ship_binary) self = read_self_binary();
  const std::string master_addr = launch.rendezvous_given ? "" : node0_address(launch);
  const std::vector<HostPlan> plans =
      plan_hosts(launch, master_addr, self_path(),
                 self ? std::optional<ShippedBinary>(self->shipped) : std::nullopt);
  const StartTree tree = start_tree(plans.size(), launch.ssh.fanout, launch.ssh.tree);
  const std::string master = launch.rendezvous_given
                                 ? "as --master-addr/--rdzv-endpoint say"
                                 : fmt::format("{}:{}", master_addr, launch.master_port);
  const auto* given = std::get_if<GivenToken>(&launch.token);
  if (launch.agent.dry_run) {
    return print_plan(launch, plans, tree, master,
                      given ? "from " + given->source + ", sent through ssh's stdin"
                            : "made at launch, sent through ssh's stdin");
  }
  Preamble preamble;
  preamble.token = given ? given->value : rdzv::random_nonce();
  for (const PassedVariable& v : launch.env) preamble.env.emplace_back(v.name, v.value);
  preamble.fanout = launch.ssh.fanout;
  std::vector<HostStart> starts;
  for (size_t root : tree.roots) {
    Preamble theirs = preamble;
    theirs.children = child_hosts(plans, tree, root, launch.ssh.ship_binary);
    starts.push_back(HostStart{plans[root].host.name, plans[root].ssh, format_preamble(theirs),
                               launch.ssh.ship_binary});
  }
  // Each open session holds three pipes here, and ssh itself runs beside them.
  const auto needed = 64 + 4 * static_cast<unsigned long>(starts.size());
  if (const unsigned long limit = ensure_open_files(needed); limit != 0) {
    throw UsageError(fmt::format(
        "{} ssh sessions held from here need about {} descriptors, but the open-files limit "
        "(ulimit -n) is {}; raise it, or let hosts start hosts with --ssh-tree (this node then "
        "holds --ssh-fanout sessions)",
        starts.size(), needed, limit));
  }
  HostsRun run(launch, plans);
  const int code = run.run(std::move(starts), self ? self->bytes : nullptr);
  if (code != 0) spdlog::info("exit status {}", code);
  return code;
}

}  // namespace npu_run
