// --node-order, --topology and --sp-block: how the rendezvous orders this job's nodes, and what
// this node's agent reads its place from (agent/health/topology_probe.hpp finds the rest).
#include <fmt/format.h>

#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "cluster/topology_file.hpp"

namespace npu_run {

namespace {

NodeOrder node_order(const Flag<std::string>& flag) {
  const std::string& text = *flag;
  if (text == "topology") return NodeOrder::kTopology;
  if (text == "host") return NodeOrder::kHost;
  if (text == "arrival") return NodeOrder::kArrival;
  throw UsageError(
      fmt::format("{} '{}' is not an order; use topology, host or arrival", flag.source(), text));
}

// A block holds whole nodes and the job holds whole blocks: what one node can tell of it.
void check_sp_block(const Flag<int>& flag, const JobShape& shape) {
  const int block = *flag;
  if (block < 1 || block > 1'000'000) {
    throw UsageError(
        fmt::format("{} {}: expected a count of devices per logical SuperPoD, "
                    "from 1 to 1000000",
                    flag.source(), block));
  }
  if (block % shape.nproc_per_node != 0) {
    throw UsageError(fmt::format(
        "{} {}: a block holds whole nodes, and this node has {} devices; give a multiple of {}",
        flag.source(), block, shape.nproc_per_node, shape.nproc_per_node));
  }
  const long long devices = static_cast<long long>(shape.max_nodes) * shape.nproc_per_node;
  if (shape.min_nodes == shape.max_nodes && devices % block != 0) {
    throw UsageError(fmt::format(
        "{} {}: the job's {} nodes hold {} devices, not a whole number of blocks of {}; change "
        "--nnodes or --sp-block",
        flag.source(), block, shape.max_nodes, devices, block));
  }
}

}  // namespace

void resolve_placement(const LaunchInputs& in, const JobShape& shape, Placement& placement) {
  const ShapeFlags& o = in.options.shape;
  placement.order = node_order(o.node_order);
  if (!o.topology->empty()) {
    placement.file_source = fmt::format("{} {}", o.topology.source(), *o.topology);
    placement.file = parse_topology_file(
        in.host.read_text(*o.topology, o.topology.source(), kMaxTopologyFileBytes),
        placement.file_source);
  }
  if (o.sp_block.given()) {
    check_sp_block(o.sp_block, shape);
    placement.sp_block = *o.sp_block;
  }
}

}  // namespace npu_run
