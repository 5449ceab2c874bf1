# Cross-building npu_run for aarch64 (Kunpeng servers) on Debian 12 x86_64, with
# crossbuild-essential-arm64 and the :arm64 -dev packages (scripts/install_deps.sh --cross).
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
#         -DNPU_RUN_STATIC=ON
# Tests run through qemu-aarch64-static (CMake's CROSSCOMPILING_EMULATOR): there is no binfmt
# here, and static binaries, since a dynamic one started with qemu's -L hangs on fork (qemu 7.2).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Debian's multiarch layout: arm64 libraries and CMake packages under /usr/lib/aarch64-linux-gnu,
# architecture-independent headers (Boost, CLI11, nlohmann-json, Catch2) shared with the host.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# There is no aarch64-linux-gnu-pkg-config in Debian: the host's, pointed at arm64's .pc files.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
find_program(NPU_RUN_QEMU_AARCH64 qemu-aarch64-static)
if(NPU_RUN_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${NPU_RUN_QEMU_AARCH64})
endif()
