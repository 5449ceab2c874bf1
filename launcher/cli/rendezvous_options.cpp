#include "cli/rendezvous_options.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "basics/token_file.hpp"
#include "basics/usage_error.hpp"
#include "cli/value_parsers.hpp"

namespace npu_run {

namespace {

constexpr double kWeek = 7 * 24 * 3600.0;
constexpr double kDay = 24 * 3600.0;

// Adds "--a-b" and "--a_b", with PET_A_B unless `pet` is false.
template <typename T>
CLI::Option* add(CLI::App& app, OptionNames& names, bool pet, const std::string& dashed, T& target,
                 const std::string& help, const char* group) {
  CLI::Option* option = app.add_option(OptionNames::spellings(dashed), target, help)->group(group);
  if (pet) names.bind(option, OptionNames::env_name(dashed));
  return option;
}

// A flag's value, unless only a --rdzv-conf key (torchrun's spelling) gave one.
struct Seconds {
  double value;
  std::string source;
};
Seconds flag_or_conf(double flag, const CLI::Option* option, const OptionNames& names,
                     const std::map<std::string, std::string>& conf, const std::string& conf_source,
                     std::initializer_list<const char*> keys) {
  Seconds s{flag, names.source(option)};
  if (OptionNames::given(option)) return s;
  for (const char* key : keys) {
    if (conf.count(key)) s = {conf_number(conf, key, conf_source), conf_source + " " + key};
  }
  return s;
}

}  // namespace

RendezvousOptions add_rendezvous_options(CLI::App& app, RendezvousFlags& f, OptionNames& names,
                                         const char* group, RendezvousVariables variables) {
  const bool pet = variables == RendezvousVariables::kPetAndToken;
  RendezvousOptions o;
  o.nnodes = add(app, names, pet, "--nnodes", f.nnodes, "Number of nodes, N or MIN:MAX (default 1)",
                 group);
  o.run_id = app.add_option("--run-id,--run_id,--rdzv-id,--rdzv_id", f.run_id,
                            "Job id shared by all nodes; names the log directory (default none)")
                 ->group(group);
  if (pet) names.bind(o.run_id, "PET_RDZV_ID");
  o.max_restarts = add(app, names, pet, "--max-restarts", f.max_restarts,
                       "Restart the worker group up to N times after a failure (default 0)", group);
  o.token = app.add_option("--rdzv-token,--rdzv_token", f.token,
                           "Shared secret every node proves it knows (HMAC challenge; never sent). "
                           "Prefer the NPU_RUN_RDZV_TOKEN variable or --rdzv-token-file: a flag "
                           "shows in ps until npu_run has read it")
                ->group(group);
  names.bind(o.token, kTokenVariable);
  o.token_file = add(app, names, pet, "--rdzv-token-file", f.token_file,
                     "File whose first line is the rendezvous token (mode 600, yours). Inside a "
                     "Slurm step a per-job token is derived when none is given",
                     group)
                     ->type_name("FILE");
  o.join_timeout = add(app, names, pet, "--rdzv-timeout", f.join_timeout,
                       "Seconds to wait for all nodes to join (default 900; also rdzv-conf "
                       "join_timeout)",
                       group);
  o.last_call = add(app, names, pet, "--rdzv-last-call", f.last_call,
                    "Elastic --nnodes MIN:MAX: seconds to wait for more nodes once MIN have joined "
                    "(default 30; also rdzv-conf last_call_timeout)",
                    group);
  o.backlog = add(app, names, pet, "--rdzv-backlog", f.backlog,
                  "Listen backlog of the rendezvous server (default: net.core.somaxconn)", group);
  o.heartbeat_interval = add(app, names, pet, "--heartbeat-interval", f.heartbeat_interval,
                             "Seconds between heartbeats to the rendezvous (default 5)", group);
  o.heartbeat_timeout = add(app, names, pet, "--heartbeat-timeout", f.heartbeat_timeout,
                            "Seconds of silence after which a node or the server counts as lost "
                            "(default 30)",
                            group);
  o.exit_barrier_timeout = add(app, names, pet, "--exit-barrier-timeout", f.exit_barrier_timeout,
                               "Seconds node 0 waits, after the job ended, for every node to hear "
                               "it (default 300)",
                               group);
  o.handshake_timeout = add(app, names, pet, "--handshake-timeout", f.handshake_timeout,
                            "Seconds a new rendezvous connection has to say hello, prove the "
                            "token and join (default 10; also rdzv-conf read_timeout)",
                            group);
  return o;
}

RendezvousTiming resolve_timing(const RendezvousFlags& f, const RendezvousOptions& o,
                                const OptionNames& names,
                                const std::map<std::string, std::string>& conf,
                                const std::string& conf_source) {
  RendezvousTiming t;
  const Seconds join = flag_or_conf(f.join_timeout, o.join_timeout, names, conf, conf_source,
                                    {"timeout", "join_timeout"});
  t.join_timeout = seconds_option(join.value, 1, kWeek, join.source);
  const Seconds last =
      flag_or_conf(f.last_call, o.last_call, names, conf, conf_source, {"last_call_timeout"});
  t.last_call = seconds_option(last.value, 0, kDay, last.source);
  const Seconds handshake = flag_or_conf(f.handshake_timeout, o.handshake_timeout, names, conf,
                                         conf_source, {"read_timeout"});
  t.handshake_timeout = seconds_option(handshake.value, 0.1, 3600, handshake.source);
  const Seconds interval = flag_or_conf(f.heartbeat_interval, o.heartbeat_interval, names, conf,
                                        conf_source, {"keep_alive_interval"});
  t.heartbeat_interval = seconds_option(interval.value, 0.05, 3600, interval.source);
  Seconds timeout{f.heartbeat_timeout, names.source(o.heartbeat_timeout)};
  if (!OptionNames::given(o.heartbeat_timeout) && conf.count("keep_alive_max_attempt")) {
    timeout = {interval.value * conf_number(conf, "keep_alive_max_attempt", conf_source),
               conf_source + " keep_alive_max_attempt"};
  }
  t.heartbeat_timeout = seconds_option(timeout.value, 0.1, kDay, timeout.source);
  if (t.heartbeat_timeout <= t.heartbeat_interval) {
    throw UsageError(
        fmt::format("{} {} must be longer than {} {}, or every node counts as lost between two "
                    "heartbeats",
                    timeout.source, timeout.value, interval.source, interval.value));
  }
  t.exit_barrier_timeout =
      seconds_option(f.exit_barrier_timeout, 0, kWeek, names.source(o.exit_barrier_timeout));
  if (f.backlog < 0 || f.backlog > 1'000'000) {
    throw UsageError(fmt::format("{} {}: expected 0 (the kernel's somaxconn) up to 1000000",
                                 names.source(o.backlog), f.backlog));
  }
  t.backlog = f.backlog;
  return t;
}

std::optional<GivenToken> resolve_given_token(const RendezvousFlags& f, const RendezvousOptions& o,
                                              const OptionNames& names, HostProbe& host) {
  const bool file = OptionNames::given(o.token_file);
  const bool flag = OptionNames::given(o.token);
  if (file && flag) {
    throw UsageError(fmt::format("{} and {} both give a rendezvous token; keep one",
                                 names.source(o.token_file), names.source(o.token)));
  }
  if (file) {
    const std::string source = names.source(o.token_file);
    return GivenToken{host.token_file(f.token_file, source), source + " " + f.token_file};
  }
  if (!flag) return std::nullopt;
  const std::string source = names.source(o.token);
  if (f.token.empty())
    throw UsageError(fmt::format("{} is empty; give a secret, or unset it for no token", source));
  if (f.token.size() > kMaxTokenBytes)
    throw UsageError(fmt::format("{} is longer than {} bytes", source, kMaxTokenBytes));
  return GivenToken{f.token, source};
}

int resolve_max_restarts(const RendezvousFlags& f, const RendezvousOptions& o,
                         const OptionNames& names) {
  if (f.max_restarts < 0) {
    throw UsageError(
        fmt::format("{} {}: must be 0 or more", names.source(o.max_restarts), f.max_restarts));
  }
  return f.max_restarts;
}

}  // namespace npu_run
