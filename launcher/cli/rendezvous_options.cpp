#include "cli/rendezvous_options.hpp"

#include <fmt/format.h>

#include "basics/token_file.hpp"
#include "basics/usage_error.hpp"
#include "cli/value_parsers.hpp"

namespace npu_run {

namespace {

constexpr double kWeek = 7 * 24 * 3600.0;
constexpr double kDay = 24 * 3600.0;

// A flag's value, unless only a --rdzv-conf key (torchrun's spelling) gave one.
struct Seconds {
  double value;
  std::string source;
};
Seconds flag_or_conf(const Flag<double>& flag, const std::map<std::string, std::string>& conf,
                     const std::string& conf_source, std::initializer_list<const char*> keys) {
  Seconds s{*flag, flag.source()};
  if (flag.given()) return s;
  for (const char* key : keys) {
    if (conf.count(key)) s = {conf_number(conf, key, conf_source), conf_source + " " + key};
  }
  return s;
}

}  // namespace

RendezvousTiming resolve_timing(const RendezvousFlags& f,
                                const std::map<std::string, std::string>& conf,
                                const std::string& conf_source,
                                std::optional<std::chrono::milliseconds> interval_cap) {
  RendezvousTiming t;
  const Seconds join = flag_or_conf(f.join_timeout, conf, conf_source, {"timeout", "join_timeout"});
  t.join_timeout = seconds_option(join.value, 1, kWeek, join.source);
  const Seconds last = flag_or_conf(f.last_call, conf, conf_source, {"last_call_timeout"});
  t.last_call = seconds_option(last.value, 0, kDay, last.source);
  const Seconds handshake = flag_or_conf(f.handshake_timeout, conf, conf_source, {"read_timeout"});
  t.handshake_timeout = seconds_option(handshake.value, 0.1, 3600, handshake.source);
  Seconds interval = flag_or_conf(f.heartbeat_interval, conf, conf_source, {"keep_alive_interval"});
  t.heartbeat_interval = seconds_option(interval.value, 0.05, 3600, interval.source);
  const bool interval_chosen = f.heartbeat_interval.given() || conf.count("keep_alive_interval");
  if (interval_cap && !interval_chosen && *interval_cap < t.heartbeat_interval) {
    t.heartbeat_interval = *interval_cap;
    interval = {std::chrono::duration<double>(*interval_cap).count(),
                "the etcd rendezvous' heartbeat interval (a tenth of lease_ttl)"};
  }
  Seconds timeout{*f.heartbeat_timeout, f.heartbeat_timeout.source()};
  if (!f.heartbeat_timeout.given() && conf.count("keep_alive_max_attempt")) {
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
      seconds_option(*f.exit_barrier_timeout, 0, kWeek, f.exit_barrier_timeout.source());
  if (*f.backlog < 0 || *f.backlog > 1'000'000) {
    throw UsageError(fmt::format("{} {}: expected 0 (the kernel's somaxconn) up to 1000000",
                                 f.backlog.source(), *f.backlog));
  }
  t.backlog = *f.backlog;
  return t;
}

std::optional<GivenToken> resolve_given_token(const RendezvousFlags& f, HostProbe& host) {
  const bool file = f.token_file.given();
  const bool flag = f.token.given();
  if (file && flag) {
    throw UsageError(fmt::format("{} and {} both give a rendezvous token; keep one",
                                 f.token_file.source(), f.token.source()));
  }
  if (file) {
    const std::string source = f.token_file.source();
    return GivenToken{host.token_file(*f.token_file, source), source + " " + *f.token_file};
  }
  if (!flag) return std::nullopt;
  const std::string source = f.token.source();
  if (f.token->empty())
    throw UsageError(fmt::format("{} is empty; give a secret, or unset it for no token", source));
  if (f.token->size() > kMaxTokenBytes)
    throw UsageError(fmt::format("{} is longer than {} bytes", source, kMaxTokenBytes));
  return GivenToken{*f.token, source};
}

int resolve_max_restarts(const RendezvousFlags& f) {
  if (*f.max_restarts < 0) {
    throw UsageError(
        fmt::format("{} {}: must be 0 or more", f.max_restarts.source(), *f.max_restarts));
  }
  return *f.max_restarts;
}

}  // namespace npu_run
