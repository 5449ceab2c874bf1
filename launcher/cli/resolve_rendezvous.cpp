#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <random>

#include "basics/token_file.hpp"
#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "cli/value_parsers.hpp"

namespace npu_run {

namespace {

// A version 4 UUID, "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx", from the system's entropy.
std::string random_uuid() {
  std::random_device entropy;
  std::array<uint8_t, 16> b{};
  for (auto& byte : b) byte = static_cast<uint8_t>(entropy());
  b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);
  return fmt::format(
      "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}"
      "{:02x}{:02x}{:02x}{:02x}",
      b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
      b[15]);
}

// torchrun's port for a c10d endpoint without one.
constexpr int kC10dDefaultPort = 29400;

// A typed flag that contradicts the endpoint is refused; one from the environment (Kubeflow
// exports PET_MASTER_PORT beside the endpoint) gives way, as torchrun ignores it.
template <typename T>
void check_agrees(const Flag<T>& flag, bool agrees, const std::string& endpoint_source,
                  const std::string& endpoint, const std::string& value, const char* what) {
  if (agrees || !flag.given() || flag.from_environment()) return;
  throw UsageError(fmt::format("{} '{}' and {} {} disagree about the rendezvous {}; give one",
                               endpoint_source, endpoint, flag.source(), value, what));
}

// --master-addr/--master-port (or the scheduler's), else --rdzv-endpoint, which decides.
void resolve_master(const LaunchInputs& in, RendezvousConfig& rdzv) {
  const ShapeFlags& o = in.options.shape;
  const std::string& addr = *o.master_addr;
  if (addr.empty()) {
    throw UsageError(
        fmt::format("{} is empty; give the host or IP address of node 0", o.master_addr.source()));
  }
  if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']') {
    const std::string inside = addr.substr(1, addr.size() - 2);
    throw UsageError(
        fmt::format("{} '{}': write an IPv6 address without brackets, {} {} (brackets belong in "
                    "--rdzv-endpoint [{}]:PORT)",
                    o.master_addr.source(), addr, o.master_addr.source(), inside, inside));
  }
  rdzv.master_addr =
      !o.master_addr.given() && in.cluster.master_addr ? *in.cluster.master_addr : addr;
  const int port = *o.master_port;
  if (port < 0 || port > 65535) {
    throw UsageError(fmt::format("{} {}: a port must be between 1 and 65535 (0: a free one)",
                                 o.master_port.source(), port));
  }
  rdzv.master_port =
      !o.master_port.given() && in.cluster.master_port ? *in.cluster.master_port : port;
  rdzv.master_port_chosen = o.master_port.given() || in.cluster.master_port;
  const std::string& endpoint = *o.rdzv_endpoint;
  // etcd's members: the rendezvous is wherever etcd's elected leader serves it.
  if (endpoint.empty() || *o.rdzv_backend == "etcd" || *o.rdzv_backend == "etcd-v2") return;
  const std::string src = o.rdzv_endpoint.source();
  const Endpoint ep = parse_endpoint(endpoint, src);
  check_agrees(o.master_addr, addr == ep.host, src, endpoint, addr, "host");
  check_agrees(o.master_port, !ep.port || port == *ep.port, src, endpoint, std::to_string(port),
               "port");
  rdzv.master_addr = ep.host;
  if (ep.port) {
    rdzv.master_port = *ep.port;
    rdzv.master_port_chosen = true;
  } else if (*o.rdzv_backend == "c10d" &&
             (!o.master_port.given() || o.master_port.from_environment())) {
    rdzv.master_port = kC10dDefaultPort;
  }
}

// Token precedence: a file, else the flag or NPU_RUN_RDZV_TOKEN, else (multi-node Slurm step) one
// derived for the job; a single-node job has no network rendezvous and needs none.
RendezvousToken resolve_token(const LaunchInputs& in, const JobShape& shape,
                              std::vector<std::string>& warnings) {
  if (auto given = resolve_given_token(in.options.rdzv, in.host)) return *given;
  if (in.cluster.kind != ClusterKind::kSlurm || !shape.multi_node() || !in.cluster.run_id)
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

// Above this many nodes the workers' store is tiered unless the user chose. Measured here
// (docs/BENCHMARKS.md, "Workers' store at scale", 8 ranks per node): up to 1,024 nodes node 0
// serves every rank itself in about a second, faster than through proxies; at 2,048 nodes its
// time grows 3.5x for 2x the ranks (an accept queue of net.core.somaxconn = 4096 overflows
// and connections wait for SYN retransmits) while tiered is faster even with all proxies on
// the same two cores, and node 0 holds 8x fewer connections and uses a third of the CPU.
constexpr int kTieredAboveNodes = 1024;

// The workers' store: --worker-store, else torchrun 2.x's switch, else tiered at scale.
WorkerStore resolve_worker_store(const LaunchInputs& in, const JobShape& shape) {
  const Flag<std::string>& choice = in.options.shape.worker_store;
  check_choice(*choice, {"agent", "tiered", "torch"}, choice.source());
  if (choice.given()) {
    return *choice == "torch"    ? WorkerStore::kTorch
           : *choice == "tiered" ? WorkerStore::kTiered
                                 : WorkerStore::kAgent;
  }
  // torchrun 2.x's switch for the same choice, when the command line does not make it.
  if (lookup(in.env, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE") == "1") return WorkerStore::kTorch;
  return shape.max_nodes > kTieredAboveNodes ? WorkerStore::kTiered : WorkerStore::kAgent;
}

// --run-id (or the scheduler's); --standalone gives every launch a fresh id (a uuid4), as
// torchrun does; an id the user chose stays.
std::string resolve_run_id(const LaunchInputs& in) {
  const Flag<std::string>& run_id = in.options.rdzv.run_id;
  check_name(*run_id, run_id.source(), "a run id (it names the log directory)");
  if (run_id.given()) return *run_id;
  if (in.cluster.run_id) return *in.cluster.run_id;
  return *in.options.shape.standalone ? random_uuid() : *run_id;
}

void resolve_rendezvous(const LaunchInputs& in, const JobShape& shape, RendezvousConfig& rdzv,
                        std::vector<std::string>& warnings) {
  const ShapeFlags& o = in.options.shape;
  rdzv.standalone = *o.standalone;
  rdzv.worker_store = resolve_worker_store(in, shape);
  check_choice(*o.rdzv_backend, {"static", "c10d", "etcd", "etcd-v2"}, o.rdzv_backend.source());
  rdzv.backend = *o.rdzv_backend;
  resolve_master(in, rdzv);
  const bool etcd = rdzv.backend == "etcd" || rdzv.backend == "etcd-v2";
  if (rdzv.master_port == 0 && shape.multi_node() && !etcd) {
    throw UsageError(fmt::format(
        "rendezvous port 0 asks for a free port, which only a single-node job can use: the "
        "other nodes could not find it; give node 0's port with {} or --master-port",
        o.rdzv_endpoint.source()));
  }
  if (!o.local_addr->empty()) rdzv.local_addr = *o.local_addr;
  const std::string conf_source = o.rdzv_conf.source();
  rdzv.conf = parse_rdzv_conf(*o.rdzv_conf, conf_source);
  rdzv.is_host = conf_bool(rdzv.conf, "is_host", conf_source);
  (void)conf_bool(rdzv.conf, "use_libuv", conf_source);  // checked; see --help
  rdzv.run_id = resolve_run_id(in);
  rdzv.etcd = resolve_etcd(in, shape, rdzv);
  // A leader that cannot renew its lease asks the others' last heartbeats whether they reach
  // etcd (agent/link/etcd_rendezvous.cpp): they must come often enough to be fresh within a sixth
  // of the lease's TTL.
  std::optional<std::chrono::milliseconds> interval_cap;
  if (rdzv.etcd) interval_cap = rdzv.etcd->lease_ttl / 10;
  rdzv.timing = resolve_timing(in.options.rdzv, rdzv.conf, conf_source, interval_cap);
  rdzv.token = resolve_token(in, shape, warnings);
}

}  // namespace npu_run
