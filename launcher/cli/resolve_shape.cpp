#include <fmt/format.h>

#include <algorithm>

#include "basics/text.hpp"
#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "cli/value_parsers.hpp"
#include "devices/device_list.hpp"

namespace npu_run {

namespace {

// On a node with accelerators, --devices may only name ones that are there (and visible): a typo
// would otherwise surface minutes later as a driver error in every worker. A node without any
// (CPU jobs, tests) takes the ids as given.
void check_devices_present(const std::vector<int>& listed, const DiscoveredDevices& found,
                           const std::string& source, const std::string& text) {
  if (found.kind == DeviceKind::kNone || found.physical_ids.empty()) return;
  std::vector<int> absent;
  for (int id : listed) {
    if (std::find(found.physical_ids.begin(), found.physical_ids.end(), id) ==
        found.physical_ids.end())
      absent.push_back(id);
  }
  if (absent.empty()) return;
  throw UsageError(fmt::format("{} {}: this node has no device{} {} (found {}); pick ids from {}",
                               source, text, absent.size() == 1 ? "" : "s",
                               format_device_list(absent), found.description,
                               format_device_list(found.physical_ids)));
}

// --nproc-per-node auto, npu or gpu: the devices found (or those --devices lists).
void take_discovered(const LaunchInputs& in, const std::optional<std::vector<int>>& listed,
                     JobShape& shape) {
  const std::string& n = *in.options.shape.nproc_per_node;
  const DiscoveredDevices& found = in.host.devices();
  const bool wrong_kind = (n == "npu" && found.kind != DeviceKind::kAscend) ||
                          (n == "gpu" && found.kind != DeviceKind::kNvidia);
  if (listed) {
    shape.nproc_per_node = static_cast<int>(listed->size());
    shape.devices = *listed;
    shape.devices_source = in.options.shape.devices.source();
  } else if (found.physical_ids.empty() || wrong_kind) {
    if (n != "auto") {
      throw UsageError(
          fmt::format("{} {}: {}; use a number, or auto to fall back to one worker per CPU",
                      in.options.shape.nproc_per_node.source(), n, found.description));
    }
    // torchrun's rule: without accelerators, one worker per CPU (os.cpu_count()).
    shape.nproc_per_node = std::min(in.host.cpu_count(), kMaxWorkersPerNode);
    shape.devices.resize(static_cast<size_t>(shape.nproc_per_node));
    for (int i = 0; i < shape.nproc_per_node; ++i) shape.devices[static_cast<size_t>(i)] = i;
    shape.devices_source =
        fmt::format("{}; one worker per CPU ({})", found.description, shape.nproc_per_node);
  } else {
    shape.nproc_per_node = static_cast<int>(found.physical_ids.size());
    shape.devices = found.physical_ids;
    shape.devices_source = found.description;
  }
}

// A number of workers (or cpu), on --devices or 0..N-1.
void take_counted(const LaunchInputs& in, const std::optional<std::vector<int>>& listed,
                  const std::string& n, JobShape& shape) {
  const ShapeFlags& o = in.options.shape;
  if (n == "cpu") {
    shape.nproc_per_node = in.host.cpu_count();
  } else {
    const auto value = parse_integer(n, 1, kMaxWorkersPerNode);
    if (!value) {
      throw UsageError(fmt::format(
          "{} '{}': expected a number of workers between 1 and {}, or auto, npu, gpu, cpu",
          o.nproc_per_node.source(), n, kMaxWorkersPerNode));
    }
    shape.nproc_per_node = static_cast<int>(*value);
  }
  if (!listed) {
    shape.devices.resize(static_cast<size_t>(shape.nproc_per_node));
    for (int i = 0; i < shape.nproc_per_node; ++i) shape.devices[static_cast<size_t>(i)] = i;
    shape.devices_source = "default 0..N-1";
    return;
  }
  if (static_cast<int>(listed->size()) != shape.nproc_per_node && !o.nproc_per_node.given()) {
    // One worker per listed device is what they meant: the count is the fix, not the list.
    throw UsageError(fmt::format(
        "{} {} names {} devices, one per worker, but {} was not given and is {}; add {} {}",
        o.devices.source(), *o.devices, listed->size(), o.nproc_per_node.source(), n,
        o.nproc_per_node.source(), listed->size()));
  }
  if (static_cast<int>(listed->size()) != shape.nproc_per_node) {
    throw UsageError(fmt::format(
        "{} {} names {} device{} but {} is {}; list exactly {} device ids (e.g. --devices 0-{}) "
        "or drop --devices",
        o.devices.source(), *o.devices, listed->size(), listed->size() == 1 ? "" : "s",
        o.nproc_per_node.source(), n, shape.nproc_per_node, shape.nproc_per_node - 1));
  }
  shape.devices = *listed;
  shape.devices_source = o.devices.source();
}

void resolve_workers_and_devices(const LaunchInputs& in, JobShape& shape) {
  const ShapeFlags& o = in.options.shape;
  std::optional<std::vector<int>> listed;
  if (!o.devices->empty()) {
    listed = parse_device_list(*o.devices, o.devices.source());
    check_devices_present(*listed, in.host.devices(), o.devices.source(), *o.devices);
  }
  std::string n = *o.nproc_per_node;
  // A MindCluster MindSpore pod says how many workers it holds.
  const auto pod_workers = lookup(in.env, "MS_LOCAL_WORKER");
  if (!o.nproc_per_node.given() && pod_workers && mindcluster_pod(in.env)) n = *pod_workers;
  if (n == "auto" || n == "npu" || n == "gpu")
    take_discovered(in, listed, shape);
  else
    take_counted(in, listed, n, shape);
}

// --spares K, or under a scheduler whose allocation has more nodes than a static --nnodes, the
// nodes beyond it.
void resolve_spares(const LaunchInputs& in, JobShape& shape) {
  const ShapeFlags& o = in.options.shape;
  shape.spare_affinity = *o.spare_affinity;
  // HCCL's own name for a node's SuperPoD where no rank table gives one (Atlas A3): the label
  // spares are matched by, unless one is given.
  const auto superpod = lookup(in.env, "HCCL_LOGIC_SUPERPOD_ID");
  if (!o.spare_affinity.given() && superpod && !superpod->empty())
    shape.spare_affinity = "superpod-" + *superpod;
  if (o.spares.given()) {
    if (*o.spares < 0 || *o.spares > 1'000'000) {
      throw UsageError(fmt::format("{} {}: expected a count of spare nodes from 0 to 1000000",
                                   o.spares.source(), *o.spares));
    }
    shape.spares = *o.spares;
    return;
  }
  if (in.options.rdzv.nnodes.given() && in.cluster.nnodes && shape.min_nodes == shape.max_nodes &&
      *in.cluster.nnodes > shape.max_nodes)
    shape.spares = *in.cluster.nnodes - shape.max_nodes;
}

void resolve_node_rank(const LaunchInputs& in, JobShape& shape) {
  const LaunchOptions& o = in.options;
  const int ranks = shape.max_nodes + shape.spares;  // spares' ranks follow the nodes'
  if (!o.shape.node_rank.given() && in.cluster.node_rank) {
    if (*in.cluster.node_rank >= ranks) {
      throw UsageError(fmt::format(
          "{}: node rank {} is not below nnodes {}; the scheduler's variables disagree (a step "
          "environment copied into another job?): start npu_run with srun inside the allocation, "
          "or give --nnodes and --node-rank yourself",
          in.cluster.facts.description, *in.cluster.node_rank, shape.max_nodes));
    }
    shape.node_rank = in.cluster.node_rank;
    shape.node_rank_from_scheduler = true;
  } else if (o.shape.node_rank.given()) {
    const int rank = *o.shape.node_rank;
    if (rank < 0 || rank >= ranks) {
      throw UsageError(
          fmt::format("{} {}: node ranks run from 0 to {} with --nnodes {}{}",
                      o.shape.node_rank.source(), rank, ranks - 1, *o.rdzv.nnodes,
                      shape.spares > 0 ? fmt::format(" and --spares {}", shape.spares) : ""));
    }
    shape.node_rank = rank;
  }
}

}  // namespace

void resolve_shape(const LaunchInputs& in, JobShape& shape) {
  const LaunchOptions& o = in.options;
  shape.agents_per_node = *o.shape.agents_per_node;
  if (!o.rdzv.nnodes.given() && in.cluster.nnodes) {
    shape.min_nodes = shape.max_nodes = *in.cluster.nnodes;
  } else {
    std::tie(shape.min_nodes, shape.max_nodes) =
        parse_nnodes(*o.rdzv.nnodes, o.rdzv.nnodes.source());
  }
  resolve_workers_and_devices(in, shape);
  if (in.cluster.agent_index > 0 && !o.shape.devices.given() &&
      shape.devices_source == "default 0..N-1") {
    // Agents sharing a node take consecutive slices of its devices.
    for (int& d : shape.devices) d += in.cluster.agent_index * shape.nproc_per_node;
    shape.devices_source = fmt::format("slice {} of the node's devices (--agents-per-node {})",
                                       in.cluster.agent_index, shape.agents_per_node);
  }
  if (*o.shape.standalone && shape.max_nodes > 1) {
    throw UsageError(fmt::format("--standalone runs a single node but {} is {}; drop one of them",
                                 o.rdzv.nnodes.source(), *o.rdzv.nnodes));
  }
  resolve_spares(in, shape);
  resolve_node_rank(in, shape);
}

}  // namespace npu_run
