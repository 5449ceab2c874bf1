#include "npu_run/version.hpp"

#include <fmt/format.h>

#include "basics/kernel_features.hpp"
#include "commands/commands.hpp"
#include "npu_run/build_info.hpp"

namespace npu_run {

namespace {

constexpr const char* kArchitecture =
#if defined(__x86_64__)
    "x86_64";
#elif defined(__aarch64__)
    "aarch64";
#else
    "unknown";
#endif

}  // namespace

std::string version_report() {
  return fmt::format(
      "npu_run {}\n"
      "commit:  {}\n"
      "build:   {}, {}, {} {}\n"
      "arch:    {}\n"
      "kernel:  {}\n",
      kVersion, build_info::kGitCommit, build_info::kBuildType, build_info::kLinkage,
#if defined(__clang__)
      "clang",
#else
      "GCC",
#endif
      __VERSION__, kArchitecture, describe_kernel(kernel_features()));
}

}  // namespace npu_run
