// --rdzv-backend etcd|etcd-v2: the members (--rdzv-endpoint, several), the job's key prefix,
// the login and the lease, from torchrun's --rdzv-conf keys (both of its etcd backends'
// spellings) and npu_run's own. The password never comes from the command line.
#include <fmt/format.h>

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

// TLS to etcd is not there yet: refused by name rather than spoken in clear text.
void refuse_tls(const std::map<std::string, std::string>& conf, const std::string& endpoints,
                const std::string& conf_source) {
  const std::string* protocol = conf_value(conf, {"protocol"});
  if (protocol != nullptr && *protocol != "http" && *protocol != "https") {
    throw UsageError(
        fmt::format("{} protocol={}: etcd is reached over http or https", conf_source, *protocol));
  }
  bool tls = protocol != nullptr && *protocol == "https";
  for (const etcd::Endpoint& e : etcd::parse_endpoints(endpoints)) tls = tls || e.tls;
  const std::string* file =
      conf_value(conf, {"cacert", "ca_cert", "cert", "ssl_cert", "key", "ssl_cert_key"});
  if (tls || file != nullptr) {
    throw UsageError(fmt::format(
        "{}: npu_run speaks to etcd over plain http only so far (TLS is not built in yet); give "
        "http:// endpoints without cacert/cert/key, and a user and password "
        "(--rdzv-conf user=NAME, {} or password_file=PATH) for access control",
        tls ? "an https endpoint or protocol=https" : conf_source, kPasswordVariable));
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

}  // namespace

std::optional<EtcdSettings> resolve_etcd(const LaunchInputs& in, const RendezvousConfig& rdzv) {
  const ShapeFlags& o = in.options.shape;
  const std::string conf_source = o.rdzv_conf.source();
  if (!etcd_backend(rdzv.backend)) {
    for (const char* key : {"etcd_prefix", "user", "password", "password_file", "lease_ttl"}) {
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
  refuse_tls(rdzv.conf, etcd.endpoints, conf_source);
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
  if (rdzv.conf.contains("lease_ttl"))
    etcd.lease_ttl = seconds_option(conf_number(rdzv.conf, "lease_ttl", conf_source), 2, 600,
                                    conf_source + " lease_ttl");
  etcd.request_timeout = std::min(etcd.request_timeout, etcd.lease_ttl / 2);
  return etcd;
}

}  // namespace npu_run
