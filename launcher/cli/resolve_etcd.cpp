// --rdzv-backend etcd|etcd-v2: the members (--rdzv-endpoint, several), the job's key prefix,
// the login and the lease, from torchrun's --rdzv-conf keys (both of its etcd backends'
// spellings) and npu_run's own. The password never comes from the command line.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "basics/environment.hpp"
#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "cli/value_parsers.hpp"
#include "etcd/endpoints.hpp"

namespace npu_run {

namespace {

// torchrun's etcd backend keeps its keys under this prefix unless etcd_prefix says otherwise.
constexpr const char* kTorchrunEtcdPrefix = "/torchelastic/p2p";
constexpr const char* kPasswordVariable = "NPU_RUN_ETCD_PASSWORD";
constexpr const char* kUserVariable = "NPU_RUN_ETCD_USER";
// The lease renewals a job's agents send etcd, at most, each second with the default lease.
constexpr long kRenewalsPerSecond = 100;

bool etcd_backend(const std::string& backend) {
  return backend == "etcd" || backend == "etcd-v2";
}

// The first of `keys` that --rdzv-conf has (torchrun's two spellings of one setting).
const std::string* conf_value(const std::map<std::string, std::string>& conf,
                              std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    if (const auto it = conf.find(key); it != conf.end()) return &it->second;
  }
  return nullptr;
}

// protocol=https puts every member on TLS; https:// puts one. A file must be readable now, so a
// typo is named before any node starts; what is in it is checked when the agent starts.
std::string tls_file(const LaunchInputs& in, const std::map<std::string, std::string>& conf,
                     std::initializer_list<const char*> keys, const std::string& conf_source) {
  for (const char* key : keys) {
    const auto it = conf.find(key);
    if (it == conf.end()) continue;
    if (!in.host.is_regular_file(it->second)) {
      throw UsageError(fmt::format("{} {}={}: no such file; give the PEM file's path", conf_source,
                                   key, it->second));
    }
    return in.host.absolute(it->second);
  }
  return "";
}

void resolve_tls(const LaunchInputs& in, const std::map<std::string, std::string>& conf,
                 const std::string& conf_source, EtcdSettings& etcd) {
  std::vector<etcd::Endpoint> members = etcd::parse_endpoints(etcd.endpoints);
  const std::string* protocol = conf_value(conf, {"protocol"});
  if (protocol != nullptr && *protocol != "http" && *protocol != "https") {
    throw UsageError(
        fmt::format("{} protocol={}: etcd is reached over http or https", conf_source, *protocol));
  }
  bool tls = false;
  for (etcd::Endpoint& member : members) {
    if (protocol != nullptr && *protocol == "http" && member.tls) {
      throw UsageError(
          fmt::format("{} protocol=http, but the member https://{} asks for TLS; "
                      "drop one of the two",
                      conf_source, member.to_string()));
    }
    member.tls = member.tls || (protocol != nullptr && *protocol == "https");
    tls = tls || member.tls;
  }
  etcd.ca_file = tls_file(in, conf, {"cacert", "ca_cert"}, conf_source);
  etcd.cert_file = tls_file(in, conf, {"cert", "ssl_cert"}, conf_source);
  etcd.key_file = tls_file(in, conf, {"key", "ssl_cert_key"}, conf_source);
  if (!etcd.key_file.empty() && etcd.cert_file.empty()) {
    throw UsageError(
        fmt::format("{} key={} has no certificate; add cert=PATH", conf_source, etcd.key_file));
  }
  if (etcd.key_file.empty()) etcd.key_file = etcd.cert_file;  // one PEM with both, as torchrun
  const bool files = !etcd.ca_file.empty() || !etcd.cert_file.empty();
  if (files && !tls) {
    throw UsageError(fmt::format(
        "{} gives TLS files, but every etcd member is plain http; add protocol=https or write "
        "the members as https://HOST:PORT",
        conf_source));
  }
  if (!tls) return;
  etcd.endpoints.clear();
  for (const etcd::Endpoint& member : members) {
    etcd.endpoints += fmt::format("{}{}{}", etcd.endpoints.empty() ? "" : ",",
                                  member.tls ? "https://" : "", member.to_string());
  }
}

// user= (or NPU_RUN_ETCD_USER), and the password from a file or the environment.
void resolve_login(const LaunchInputs& in, const std::map<std::string, std::string>& conf,
                   const std::string& conf_source, EtcdSettings& etcd) {
  if (conf.contains("password")) {
    throw UsageError(fmt::format(
        "{} password=...: a password on the command line is seen by every user of the host "
        "(ps, /proc); put it in a file only you can read and give password_file=PATH, or set {}",
        conf_source, kPasswordVariable));
  }
  if (const std::string* user = conf_value(conf, {"user"})) {
    etcd.user = *user;
  } else if (const auto from_env = lookup(in.env, kUserVariable)) {
    etcd.user = *from_env;
  }
  if (const std::string* file = conf_value(conf, {"password_file"})) {
    const std::string source = conf_source + " password_file";
    etcd.password = in.host.token_file(*file, source);
    etcd.password_source = source + " " + *file;
  } else if (const auto from_env = lookup(in.env, kPasswordVariable)) {
    etcd.password = *from_env;
    etcd.password_source = kPasswordVariable;
  }
  if (!etcd.password.empty() && etcd.user.empty()) {
    throw UsageError(
        fmt::format("{} gives an etcd password but no user; add --rdzv-conf user=NAME "
                    "or set {}",
                    etcd.password_source, kUserVariable));
  }
  if (!etcd.user.empty() && etcd.password.empty()) {
    throw UsageError(
        fmt::format("etcd user '{}' has no password; give it in a file "
                    "(--rdzv-conf password_file=PATH) or in {}",
                    etcd.user, kPasswordVariable));
  }
}

// The default lease: 5 s, longer for large jobs so that their renewals (three per lease and
// TTL) stay near 100 a second, which a 3-member etcd takes without its latency rising
// (docs/BENCHMARKS.md); the heartbeats that go every tenth of it scale down with them.
std::chrono::milliseconds default_lease_ttl(const JobShape& shape) {
  const long agents = static_cast<long>(shape.max_nodes) + shape.spares;
  return std::chrono::seconds(std::clamp(3 * agents / kRenewalsPerSecond, 5L, 600L));
}

}  // namespace

std::optional<EtcdSettings> resolve_etcd(const LaunchInputs& in, const JobShape& shape,
                                         const RendezvousConfig& rdzv) {
  const ShapeFlags& o = in.options.shape;
  const std::string conf_source = o.rdzv_conf.source();
  if (!etcd_backend(rdzv.backend)) {
    for (const char* key :
         {"etcd_prefix", "user", "password", "password_file", "lease_ttl", "protocol", "cacert",
          "ca_cert", "cert", "ssl_cert", "key", "ssl_cert_key"}) {
      if (rdzv.conf.contains(key)) {
        throw UsageError(
            fmt::format("{} {}: an etcd setting, but {} is {}; add "
                        "--rdzv-backend etcd or drop it",
                        conf_source, key, o.rdzv_backend.source(), rdzv.backend));
      }
    }
    return std::nullopt;
  }
  EtcdSettings etcd;
  etcd.endpoints = *o.rdzv_endpoint;
  if (etcd.endpoints.empty()) {
    throw UsageError(
        fmt::format("{} {} needs the etcd members: --rdzv-endpoint "
                    "host1:2379,host2:2379,host3:2379",
                    o.rdzv_backend.source(), rdzv.backend));
  }
  try {
    (void)etcd::parse_endpoints(etcd.endpoints);
  } catch (const std::invalid_argument& e) {
    throw UsageError(
        fmt::format("{} '{}': {}", o.rdzv_endpoint.source(), etcd.endpoints, e.what()));
  }
  resolve_tls(in, rdzv.conf, conf_source, etcd);
  std::string prefix = kTorchrunEtcdPrefix;
  if (const std::string* given = conf_value(rdzv.conf, {"etcd_prefix"})) prefix = *given;
  if (prefix.empty() || prefix.front() != '/') {
    throw UsageError(
        fmt::format("{} etcd_prefix={}: a key prefix starts with '/'", conf_source, prefix));
  }
  while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
  etcd.prefix = fmt::format("{}/{}", prefix == "/" ? "" : prefix, rdzv.run_id);
  resolve_login(in, rdzv.conf, conf_source, etcd);
  // etcd's shortest lease is 2 s; renewals go at a third of it.
  etcd.lease_ttl = default_lease_ttl(shape);
  if (rdzv.conf.contains("lease_ttl"))
    etcd.lease_ttl = seconds_option(conf_number(rdzv.conf, "lease_ttl", conf_source), 2, 600,
                                    conf_source + " lease_ttl");
  etcd.request_timeout = std::min(etcd.request_timeout, etcd.lease_ttl / 2);
  return etcd;
}

}  // namespace npu_run
