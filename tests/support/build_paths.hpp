// Where this build and its checkout are. CMake writes the values into build_paths.cpp in the
// build folder (tests/CMakeLists.txt, tests/native_tests.cmake) rather than into compile
// definitions, so that every other test file compiles the same from a checkout anywhere and
// ccache hits what another clone compiled (cmake/compiler_cache.cmake).
#pragma once

namespace npu_run::testing::build_paths {

extern const char* const kSourceDir;    // the checkout
extern const char* const kTestData;     // tests/data
extern const char* const kNpuRun;       // the built binary itself, never a wrapper (native only)
extern const char* const kAsOldKernel;  // tests/tools/as_old_kernel (native only)
// The folder of tests/tools/fast_fake_tools.cpp as hccn_tool and npu-smi (native only).
extern const char* const kFastFakeTools;

}  // namespace npu_run::testing::build_paths
