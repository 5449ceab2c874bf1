// Where the health tools are: on PATH first, then where Ascend's and NVIDIA's installers put
// them (hccn_tool is usually not on PATH).
#pragma once

#include <functional>
#include <string>

#include "health/node_checks.hpp"

namespace npu_run {

// `executable(path)` says whether a file is there and executable (the agent: access(X_OK)).
HealthToolPaths locate_health_tools(const std::string& path_variable,
                                    const std::function<bool(const std::string&)>& executable);

}  // namespace npu_run
