#include <fmt/format.h>

#include <CLI/CLI.hpp>
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
void check_agrees(const LaunchOptions& o, const CLI::Option* option, bool agrees,
                  const std::string& endpoint_source, const std::string& endpoint,
                  const std::string& value, const char* what) {
  if (agrees || !OptionNames::given(option) || o.names().from_environment(option)) return;
  throw UsageError(fmt::format("{} '{}' and {} {} disagree about the rendezvous {}; give one",
                               endpoint_source, endpoint, o.source(option), value, what));
}

// --master-addr/--master-port (or the scheduler's), else --rdzv-endpoint, which decides.
void resolve_master(const LaunchInputs& in, RendezvousConfig& rdzv) {
  const LaunchOptions& o = in.options;
  const LaunchFlags& f = o.flags();
  if (f.master_addr.empty()) {
    throw UsageError(
        fmt::format("{} is empty; give the host or IP address of node 0", o.source(o.master_addr)));
  }
  if (f.master_addr.size() > 2 && f.master_addr.front() == '[' && f.master_addr.back() == ']') {
    const std::string inside = f.master_addr.substr(1, f.master_addr.size() - 2);
    throw UsageError(fmt::format(
        "{} '{}': write an IPv6 address without brackets, {} {} (brackets belong in "
        "--rdzv-endpoint [{}]:PORT)",
        o.source(o.master_addr), f.master_addr, o.source(o.master_addr), inside, inside));
  }
  rdzv.master_addr = !OptionNames::given(o.master_addr) && in.cluster.master_addr
                         ? *in.cluster.master_addr
                         : f.master_addr;
  if (f.master_port < 0 || f.master_port > 65535) {
    throw UsageError(fmt::format("{} {}: a port must be between 1 and 65535 (0: a free one)",
                                 o.source(o.master_port), f.master_port));
  }
  rdzv.master_port = !OptionNames::given(o.master_port) && in.cluster.master_port
                         ? *in.cluster.master_port
                         : f.master_port;
  rdzv.master_port_chosen = OptionNames::given(o.master_port) || in.cluster.master_port;
  if (f.rdzv_endpoint.empty()) return;
  const std::string src = o.source(o.rdzv_endpoint);
  const Endpoint ep = parse_endpoint(f.rdzv_endpoint, src);
  check_agrees(o, o.master_addr, f.master_addr == ep.host, src, f.rdzv_endpoint, f.master_addr,
               "host");
  check_agrees(o, o.master_port, !ep.port || f.master_port == *ep.port, src, f.rdzv_endpoint,
               std::to_string(f.master_port), "port");
  rdzv.master_addr = ep.host;
  if (ep.port) {
    rdzv.master_port = *ep.port;
    rdzv.master_port_chosen = true;
  } else if (f.rdzv_backend == "c10d" &&
             (!OptionNames::given(o.master_port) || o.names().from_environment(o.master_port))) {
    rdzv.master_port = kC10dDefaultPort;
  }
}

// etcd needs a server npu_run does not speak to; waiting for it would only time out.
void refuse_etcd(const std::string& backend, const std::string& source) {
  if (backend != "etcd" && backend != "etcd-v2") return;
  throw UsageError(fmt::format(
      "{} {}: npu_run has no etcd rendezvous; use --rdzv-backend c10d (or static) with "
      "--rdzv-endpoint NODE0_HOST:PORT, where node 0's agent hosts the rendezvous, or run "
      "'npu_run rdzv-server' on a host of its own and point every node at it",
      source, backend));
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

// Above this many nodes the workers' store is tiered unless the user chose. Measured here
// (docs/BENCHMARKS.md, "Workers' store at scale", 8 ranks per node): up to 1,024 nodes node 0
// serves every rank itself in about a second, faster than through proxies; at 2,048 nodes its
// time grows 3.5x for 2x the ranks (an accept queue of net.core.somaxconn = 4096 overflows
// and connections wait for SYN retransmits) while tiered is faster even with all proxies on
// the same two cores, and node 0 holds 8x fewer connections and uses a third of the CPU.
constexpr int kTieredAboveNodes = 1024;

void resolve_rendezvous(const LaunchInputs& in, const JobShape& shape, RendezvousConfig& rdzv,
                        std::vector<std::string>& warnings) {
  const LaunchOptions& o = in.options;
  const LaunchFlags& f = o.flags();
  rdzv.standalone = f.standalone;
  check_choice(f.worker_store, {"agent", "tiered", "torch"}, o.source(o.worker_store));
  rdzv.worker_store = f.worker_store == "torch"    ? WorkerStore::kTorch
                      : f.worker_store == "tiered" ? WorkerStore::kTiered
                                                   : WorkerStore::kAgent;
  if (!OptionNames::given(o.worker_store)) {
    // torchrun 2.x's switch for the same choice, when the command line does not make it.
    if (lookup(in.env, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE") == "1")
      rdzv.worker_store = WorkerStore::kTorch;
    else if (shape.max_nodes > kTieredAboveNodes)
      rdzv.worker_store = WorkerStore::kTiered;
  }
  check_choice(f.rdzv_backend, {"static", "c10d", "etcd", "etcd-v2"}, o.source(o.rdzv_backend));
  refuse_etcd(f.rdzv_backend, o.source(o.rdzv_backend));
  resolve_master(in, rdzv);
  if (rdzv.master_port == 0 && shape.multi_node()) {
    throw UsageError(fmt::format(
        "rendezvous port 0 asks for a free port, which only a single-node job can use: the "
        "other nodes could not find it; give node 0's port with {} or --master-port",
        o.source(o.rdzv_endpoint)));
  }
  if (!f.local_addr.empty()) rdzv.local_addr = f.local_addr;
  rdzv.backend = f.rdzv_backend;
  rdzv.conf = parse_rdzv_conf(f.rdzv_conf, o.source(o.rdzv_conf));
  rdzv.is_host = conf_bool(rdzv.conf, "is_host", o.source(o.rdzv_conf));
  (void)conf_bool(rdzv.conf, "use_libuv", o.source(o.rdzv_conf));  // checked; see --help
  rdzv.timing = resolve_timing(f.rdzv, o.rdzv, o.names(), rdzv.conf, o.source(o.rdzv_conf));
  check_name(f.rdzv.run_id, o.source(o.rdzv.run_id), "a run id (it names the log directory)");
  rdzv.run_id =
      !OptionNames::given(o.rdzv.run_id) && in.cluster.run_id ? *in.cluster.run_id : f.rdzv.run_id;
  // torchrun --standalone gives every launch a fresh id (a uuid4); an id the user chose stays.
  if (f.standalone && !OptionNames::given(o.rdzv.run_id) && !in.cluster.run_id)
    rdzv.run_id = random_uuid();
  rdzv.token = resolve_token(in, shape, warnings);
}

}  // namespace npu_run
