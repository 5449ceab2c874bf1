#include "agent/health/health_gate.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "agent/health/health_runner.hpp"
#include "agent/health/node_health.hpp"
#include "agent/health/npu_info_snapshot.hpp"
#include "net/host_address.hpp"
#include "workers/child_exits.hpp"

namespace npu_run {

namespace asio = boost::asio;

namespace {

// In a job of several nodes: a host name that resolves to a loopback address is what Gloo,
// NCCL and HCCL advertise to their peers unless *_SOCKET_IFNAME names an interface
// (pytorch#8672, #130621). The agent exports those for its workers; say why, once per round.
std::optional<HealthFinding> host_name_finding() {
  const net::HostNameAddress host = net::host_name_address();
  if (!host.loopback) return std::nullopt;
  return HealthFinding{
      "hostname", -1, HealthStatus::kWarn,
      fmt::format("the host name {} resolves to {}, a loopback address: Gloo, NCCL and HCCL "
                  "would advertise it to their peers; npu_run gives its workers "
                  "GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME and HCCL_SOCKET_IFNAME (the interface "
                  "its peers reach it at) unless you set them",
                  host.name, host.address),
      fmt::format("map {} to the address its peers reach in /etc/hosts, or keep the "
                  "*_SOCKET_IFNAME npu_run sets",
                  host.name)};
}

}  // namespace

struct HealthGate::Impl {
  Impl(asio::io_context& io_context, const LaunchConfig& config, std::string host_name,
       EnvMap environment)
      : io(io_context),
        cfg(config),
        host(std::move(host_name)),
        env(std::move(environment)),
        recheck(io_context) {}

  NodeCheckSettings checks() const {
    NodeHealthOptions options;
    options.host = host;
    options.kind = discover_devices(env).kind;
    options.devices = cfg.shape.devices;
    options.user_check = cfg.health.user_check;
    options.flap_window_min = cfg.health.flap_window_min;
    NodeCheckSettings settings = node_check_settings(env, options);
    // Devices named without any found (--devices on a host whose /dev the agent cannot see,
    // as in some containers): the tools that exist say which kind they are.
    if (options.kind == DeviceKind::kNone) {
      if (!settings.tools.npu_smi.empty() || !settings.tools.hccn_tool.empty()) {
        settings.kind = NodeCheckSettings::Devices::kAscend;
      } else if (!settings.tools.nvidia_smi.empty()) {
        settings.kind = NodeCheckSettings::Devices::kNvidia;
      }
    }
    return settings;
  }

  void run() {
    if (!exits) exits = std::make_unique<ChildExits>(io);
    runner = std::make_shared<HealthRunner>(io, *exits, checks(), cfg.health.run);
    reported_early = false;
    runner->start([this](NodeVerdict verdict) { judged(std::move(verdict)); },
                  [this](NodeVerdict verdict) { judged_early(std::move(verdict)); });
  }

  void complete(NodeVerdict& verdict) const {
    verdict.settings = consistency_settings(cfg, env);
    if (!cfg.shape.multi_node()) return;
    if (auto finding = host_name_finding())
      verdict.findings.insert(verdict.findings.begin(), *finding);
  }

  // Every check that can fail the node answered: the verdict goes now, and the warning-only
  // checks go on behind it (unless it failed: a recheck runs them all again).
  void judged_early(NodeVerdict verdict) {
    complete(verdict);
    log_findings(verdict.findings);
    log_summary(verdict, " (warning-only checks still running)");
    last = verdict;
    reported_early = true;
    report(verdict);
    if (!verdict.failed()) return;
    runner->cancel();
    recheck_if_kept_out();
  }

  // Every check answered. After an early verdict only what the warning-only checks added is
  // logged, and the whole verdict goes to `late` (the rendezvous shows it in npu_run status).
  void judged(NodeVerdict verdict) {
    complete(verdict);
    if (reported_early) {
      const size_t known = last ? last->findings.size() : 0;
      if (verdict.findings.size() > known) {
        log_findings({verdict.findings.begin() + static_cast<std::ptrdiff_t>(known),
                      verdict.findings.end()});
      }
      last = verdict;
      if (late) late(verdict);
      return;
    }
    log_findings(verdict.findings);
    log_summary(verdict, "");
    last = verdict;
    report(verdict);
    if (verdict.failed()) recheck_if_kept_out();
  }

  // The pings go first on the node's tools: warning-only checks still running wait for them.
  void ping(std::vector<DevicePing> pings, std::function<void(std::vector<PingResult>)> done) {
    if (!exits) exits = std::make_unique<ChildExits>(io);
    NodeCheckSettings settings = checks();
    settings.pings = std::move(pings);
    pinger = std::make_shared<HealthRunner>(io, *exits, std::move(settings), cfg.health.run);
    auto start = [this, pinging = pinger, done = std::move(done)]() mutable {
      pinging->start([this, done = std::move(done)](NodeVerdict verdict) {
        if (runner) runner->resume();
        done(std::move(verdict.pings));
      });
    };
    if (runner && runner->busy()) {
      runner->hold(std::move(start));
    } else {
      start();
    }
  }

  // An elastic job's gate keeps a failed node out: it checks again after --health-recheck.
  void recheck_if_kept_out() {
    const bool elastic = cfg.shape.min_nodes < cfg.shape.max_nodes;
    if (!elastic || cfg.health.mode != HealthMode::kGate) return;
    spdlog::warn("this node stays out of the job until its checks pass; checking again in {:.0f} s",
                 std::chrono::duration<double>(cfg.health.recheck).count());
    recheck.expires_after(cfg.health.recheck);
    recheck.async_wait([this](boost::system::error_code cancelled) {
      if (!cancelled) run();
    });
  }

  static void log_findings(const std::vector<HealthFinding>& findings) {
    for (const HealthFinding& f : findings) {
      const std::string subject = finding_subject(f);
      const std::string fix = f.fix.empty() ? "" : fmt::format(" (fix: {})", f.fix);
      if (f.status == HealthStatus::kFail) {
        spdlog::error("health check failed: {}: {}{}", subject, f.detail, fix);
      } else if (f.status == HealthStatus::kWarn) {
        spdlog::warn("health check: {}: {}{}", subject, f.detail, fix);
      } else if (f.status == HealthStatus::kNotRun || f.status == HealthStatus::kSkipped) {
        spdlog::info("health check {}: {}: {}", to_string(f.status), subject, f.detail);
      }
    }
  }

  void log_summary(const NodeVerdict& verdict, const char* more) const {
    const size_t passed = verdict.with_status(HealthStatus::kPass).size();
    spdlog::info("health checks: {} of {} passed in {:.1f} s{}{}", passed, verdict.findings.size(),
                 static_cast<double>(verdict.elapsed_ms) / 1000.0,
                 verdict.failed() ? (cfg.health.mode == HealthMode::kGate
                                         ? "; this node fails its health gate"
                                         : "; --health-check warn: the node runs anyway")
                                  : "",
                 more);
  }

  asio::io_context& io;
  const LaunchConfig& cfg;
  std::string host;
  EnvMap env;
  asio::steady_timer recheck;
  std::unique_ptr<ChildExits> exits;
  std::shared_ptr<HealthRunner> runner;
  std::shared_ptr<HealthRunner> pinger;
  std::set<std::shared_ptr<NpuInfoSnapshot>> snapshots;
  std::vector<std::function<void()>> after_snapshots;
  Report report;  // check()'s, for the rechecks
  Report late;    // check()'s: the whole verdict after an early one
  bool reported_early = false;
  std::optional<NodeVerdict> last;
};

HealthGate::HealthGate(asio::io_context& io, const LaunchConfig& cfg, std::string host, EnvMap env)
    : impl_(std::make_unique<Impl>(io, cfg, std::move(host), std::move(env))) {}

HealthGate::~HealthGate() {
  stop();
}

bool HealthGate::enabled() const {
  return impl_->cfg.health.mode != HealthMode::kOff;
}

void HealthGate::check(const Report& report, const Report& late) {
  if (!enabled()) return;
  stop();
  impl_->report = report;
  impl_->late = late;
  impl_->run();
}

void HealthGate::settle() {
  impl_->recheck.cancel();
  if (impl_->pinger) impl_->pinger->cancel();
  impl_->pinger.reset();
  if (impl_->runner) impl_->runner->resume();
}

void HealthGate::ping(std::vector<DevicePing> pings,
                      std::function<void(std::vector<PingResult>)> done) {
  if (impl_->pinger) impl_->pinger->cancel();
  impl_->ping(std::move(pings), std::move(done));
}

void HealthGate::pinged(const std::vector<HealthFinding>& findings) {
  Impl::log_findings(findings);
  for (const HealthFinding& f : findings) {
    if (f.status == HealthStatus::kPass) spdlog::info("health check: {}", f.detail);
  }
  const bool failed = std::any_of(findings.begin(), findings.end(), [](const HealthFinding& f) {
    return f.status == HealthStatus::kFail;
  });
  if (impl_->last) {
    impl_->last->findings.insert(impl_->last->findings.end(), findings.begin(), findings.end());
  }
  if (failed && impl_->report) impl_->recheck_if_kept_out();
}

void HealthGate::stop() {
  impl_->recheck.cancel();
  if (impl_->runner) impl_->runner->cancel();
  impl_->runner.reset();
  if (impl_->pinger) impl_->pinger->cancel();
  impl_->pinger.reset();
}

void HealthGate::job_stopped() const {
  const std::string& file = impl_->cfg.health.failed_hosts_file;
  if (file.empty() || !impl_->last || !impl_->last->failed()) return;
  const std::string name = lookup(impl_->env, "SLURMD_NODENAME").value_or(impl_->host) + "\n";
  // One short append per node: atomic on a local or NFS file, whatever the order nodes end in.
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, name.data(), name.size()) != static_cast<ssize_t>(name.size())) {
    spdlog::warn("--health-failed-hosts {}: cannot add this node: {}", file, std::strerror(errno));
  }
  if (fd >= 0) ::close(fd);
}

void HealthGate::npu_info(const std::string& path) {
  if (!enabled()) return;
  NodeCheckSettings checks = impl_->checks();
  if (checks.kind != NodeCheckSettings::Devices::kAscend ||
      (checks.tools.npu_smi.empty() && checks.tools.hccn_tool.empty()))
    return;
  std::error_code ignored;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
  if (!impl_->exits) impl_->exits = std::make_unique<ChildExits>(impl_->io);
  auto snapshot = std::make_shared<NpuInfoSnapshot>(
      impl_->io, *impl_->exits,
      NpuInfoSnapshot::Settings{checks.tools, checks.devices, impl_->cfg.health.run, path});
  impl_->snapshots.insert(snapshot);
  snapshot->start([impl = impl_.get(), mine = snapshot.get()] {
    for (auto it = impl->snapshots.begin(); it != impl->snapshots.end(); ++it) {
      if (it->get() != mine) continue;
      // Released from the loop: the snapshot is still on the stack that called this.
      boost::asio::post(impl->io, [keep = *it] {});
      impl->snapshots.erase(it);
      break;
    }
    if (!impl->snapshots.empty()) return;
    auto waiting = std::move(impl->after_snapshots);
    impl->after_snapshots.clear();
    for (auto& then : waiting) then();
  });
}

void HealthGate::after_npu_info(std::function<void()> then, bool hurry) {
  if (impl_->snapshots.empty()) {
    boost::asio::post(impl_->io, std::move(then));
    return;
  }
  impl_->after_snapshots.push_back(std::move(then));
  if (!hurry) return;
  const auto running = impl_->snapshots;  // cancel() may finish one at once (posted)
  for (const auto& snapshot : running) snapshot->cancel();
}

const std::optional<NodeVerdict>& HealthGate::last() const {
  return impl_->last;
}

}  // namespace npu_run
