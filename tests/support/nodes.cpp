#include "support/nodes.hpp"

namespace npu_run::testing {

const std::vector<std::string> kFastHeartbeats = {"--heartbeat-interval", "0.2",
                                                  "--heartbeat-timeout", "1.5"};

std::unique_ptr<NpuRunProcess> start_node(int port, int nnodes, int nproc,
                                          const std::string& script, std::vector<std::string> flags,
                                          const EnvOverrides& env) {
  std::vector<std::string> args = {"--nnodes",         std::to_string(nnodes),
                                   "--nproc-per-node", std::to_string(nproc),
                                   "--master-port",    std::to_string(port)};
  args.insert(args.end(), kFastHeartbeats.begin(), kFastHeartbeats.end());
  args.insert(args.end(), flags.begin(), flags.end());
  for (const char* a : {"--no-python", "/bin/sh", "-c"}) args.emplace_back(a);
  args.push_back(script);
  return std::make_unique<NpuRunProcess>(args, env);
}

}  // namespace npu_run::testing
