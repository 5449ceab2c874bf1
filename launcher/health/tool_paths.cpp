#include "health/tool_paths.hpp"

#include "basics/text.hpp"

namespace npu_run {

namespace {

std::string locate(const std::string& name, const std::string& path_variable,
                   std::initializer_list<const char*> standard_places,
                   const std::function<bool(const std::string&)>& executable) {
  for (std::string_view dir : split(path_variable, ':')) {
    if (dir.empty()) continue;  // an empty entry means ".": never a tool's place
    const std::string candidate = std::string(dir) + "/" + name;
    if (executable(candidate)) return candidate;
  }
  for (const char* dir : standard_places) {
    const std::string candidate = std::string(dir) + "/" + name;
    if (executable(candidate)) return candidate;
  }
  return {};
}

}  // namespace

HealthToolPaths locate_health_tools(const std::string& path_variable,
                                    const std::function<bool(const std::string&)>& executable) {
  return {
      locate("npu-smi", path_variable, {"/usr/local/bin", "/usr/local/sbin"}, executable),
      locate("hccn_tool", path_variable,
             {"/usr/local/Ascend/driver/tools", "/usr/local/bin", "/usr/bin"}, executable),
      locate("nvidia-smi", path_variable, {"/usr/bin", "/usr/local/bin"}, executable),
  };
}

}  // namespace npu_run
