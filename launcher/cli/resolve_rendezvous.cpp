#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "basics/token_file.hpp"
#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "cli/value_parsers.hpp"

namespace npu_run {

namespace {

// --master-addr/--master-port (or the scheduler's), then --rdzv-endpoint, which must agree.
void resolve_master(const LaunchInputs& in, RendezvousConfig& rdzv) {
  const LaunchOptions& o = in.options;
  const LaunchFlags& f = o.flags();
  if (f.master_addr.empty()) {
    throw UsageError(
        fmt::format("{} is empty; give the host or IP address of node 0", o.source(o.master_addr)));
  }
  rdzv.master_addr = !OptionNames::given(o.master_addr) && in.cluster.master_addr
                         ? *in.cluster.master_addr
                         : f.master_addr;
  if (f.master_port < 1 || f.master_port > 65535) {
    throw UsageError(fmt::format("{} {}: a port must be between 1 and 65535",
                                 o.source(o.master_port), f.master_port));
  }
  rdzv.master_port = !OptionNames::given(o.master_port) && in.cluster.master_port
                         ? *in.cluster.master_port
                         : f.master_port;
  if (f.rdzv_endpoint.empty()) return;
  const std::string src = o.source(o.rdzv_endpoint);
  const Endpoint ep = parse_endpoint(f.rdzv_endpoint, src);
  if (OptionNames::given(o.master_addr) && f.master_addr != ep.host) {
    throw UsageError(fmt::format("{} '{}' and {} {} disagree about the rendezvous host; give one",
                                 src, f.rdzv_endpoint, o.source(o.master_addr), f.master_addr));
  }
  if (ep.port && OptionNames::given(o.master_port) && f.master_port != *ep.port) {
    throw UsageError(fmt::format("{} '{}' and {} {} disagree about the rendezvous port; give one",
                                 src, f.rdzv_endpoint, o.source(o.master_port), f.master_port));
  }
  rdzv.master_addr = ep.host;
  if (ep.port) rdzv.master_port = *ep.port;
}

// Token precedence: a file, else the flag or NPU_RUN_RDZV_TOKEN, else (multi-node Slurm step) one
// derived for the job; a single-node job has no network rendezvous and needs none.
RendezvousToken resolve_token(const LaunchInputs& in, const JobShape& shape,
                              std::vector<std::string>& warnings) {
  const LaunchOptions& o = in.options;
  if (auto given = resolve_given_token(o.flags().rdzv, o.rdzv, o.names(), in.host)) return *given;
  if (in.cluster.kind != ClusterKind::kSlurm || shape.max_nodes <= 1 || !in.cluster.run_id)
    return NoToken{};
  const auto secret = user_secret_path(in.env);
  if (!secret) {
    warnings.push_back(fmt::format(
        "no rendezvous token: neither HOME nor XDG_CONFIG_HOME is set, so there is no secret to "
        "derive one for this Slurm step from; give one with --rdzv-token-file or {}",
        kTokenVariable));
    return NoToken{};
  }
  return DerivedToken{
      *secret, *in.cluster.run_id,
      fmt::format("derived for Slurm step {} from {}", *in.cluster.run_id, *secret)};
}

}  // namespace

void resolve_rendezvous(const LaunchInputs& in, const JobShape& shape, RendezvousConfig& rdzv,
                        std::vector<std::string>& warnings) {
  const LaunchOptions& o = in.options;
  const LaunchFlags& f = o.flags();
  rdzv.standalone = f.standalone;
  resolve_master(in, rdzv);
  if (!f.local_addr.empty()) rdzv.local_addr = f.local_addr;
  check_choice(f.rdzv_backend, {"static", "c10d", "etcd", "etcd-v2"}, o.source(o.rdzv_backend));
  rdzv.backend = f.rdzv_backend;
  rdzv.conf = parse_rdzv_conf(f.rdzv_conf, o.source(o.rdzv_conf));
  rdzv.timing = resolve_timing(f.rdzv, o.rdzv, o.names(), rdzv.conf, o.source(o.rdzv_conf));
  check_name(f.rdzv.run_id, o.source(o.rdzv.run_id), "a run id (it names the log directory)");
  rdzv.run_id =
      !OptionNames::given(o.rdzv.run_id) && in.cluster.run_id ? *in.cluster.run_id : f.rdzv.run_id;
  rdzv.token = resolve_token(in, shape, warnings);
}

}  // namespace npu_run
