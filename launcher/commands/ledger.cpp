// `npu_run ledger list|clear`: the ledger of bad nodes (cluster/node_ledger.hpp) for people and
// scripts: the active entries (requeue.sbatch excludes their hosts), and clearing a host that
// was repaired.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>

#include "basics/usage_error.hpp"
#include "cluster/node_ledger.hpp"
#include "commands/commands.hpp"

namespace npu_run {

namespace {

struct LedgerArgs {
  std::string file;
  std::string log_dir;
  double ttl = 86400;
  bool hosts_only = false;
  std::vector<std::string> hosts;  // clear
};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ledger_path(const LedgerArgs& a, const EnvMap& env) {
  if (!a.file.empty()) return a.file;
  if (!a.log_dir.empty()) return a.log_dir + "/ledger.jsonl";
  if (const auto pet = lookup(env, "PET_LEDGER"); pet && !pet->empty()) return *pet;
  if (const auto dir = lookup(env, "PET_LOG_DIR"); dir && !dir->empty())
    return *dir + "/ledger.jsonl";
  throw UsageError("npu_run ledger: which ledger? give --ledger FILE or --log-dir DIR (the job's)");
}

int list(const LedgerArgs& a, const std::string& path) {
  const auto ttl_ms = static_cast<int64_t>(a.ttl * 1000);
  const std::vector<LedgerEntry> active = active_entries(read_ledger(path), now_ms(), ttl_ms);
  std::string out;
  for (const LedgerEntry& e : active)
    out += a.hosts_only ? e.host + "\n" : fmt::format("{}  {}\n", e.host, describe(e));
  if (!a.hosts_only && active.empty()) out = fmt::format("{}: no active entries\n", path);
  std::cout << out;
  return 0;
}

int clear(const LedgerArgs& a, const std::string& path) {
  const auto ttl_ms = static_cast<int64_t>(a.ttl * 1000);
  const std::vector<LedgerEntry> active = active_entries(read_ledger(path), now_ms(), ttl_ms);
  for (const std::string& host : a.hosts) {
    const bool listed = std::any_of(active.begin(), active.end(),
                                    [&](const LedgerEntry& e) { return e.host == host; });
    if (!listed) {
      std::cerr << fmt::format("npu_run ledger: {} has no active entry in {}; nothing cleared\n",
                               host, path);
      continue;
    }
    LedgerEntry cleared;
    cleared.host = host;
    cleared.time_ms = now_ms();
    cleared.cleared = true;
    append_to_ledger(path, cleared);
    std::cout << fmt::format("{}: cleared; its agents may join again\n", host);
  }
  return 0;
}

}  // namespace

int ledger_command(const std::vector<std::string>& args, const EnvMap& env) {
  CLI::App app(
      "The ledger of bad nodes: hosts a job took out, refused until they expire or are "
      "cleared",
      "npu_run ledger");
  app.require_subcommand(1);
  LedgerArgs a;
  const auto where = [&](CLI::App* sub) {
    sub->add_option("--ledger", a.file, "The ledger file (the job's --ledger)");
    sub->add_option("--log-dir", a.log_dir, "The job's --log-dir: its ledger.jsonl");
    sub->add_option("--ledger-ttl", a.ttl, "Seconds an entry stays active (default 86400)")
        ->check(CLI::Range(1.0, 365 * 24 * 3600.0));
  };
  CLI::App* list_cmd = app.add_subcommand("list", "The active entries, one host per line");
  where(list_cmd);
  list_cmd->add_flag("--hosts-only", a.hosts_only, "Host names only (for --exclude)");
  CLI::App* clear_cmd = app.add_subcommand("clear", "Let HOST join again (a repaired node)");
  where(clear_cmd);
  clear_cmd->add_option("HOST", a.hosts, "Hosts to clear")->required();
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  return run_guarded([&] {
    const std::string path = ledger_path(a, env);
    return list_cmd->parsed() ? list(a, path) : clear(a, path);
  });
}

}  // namespace npu_run
