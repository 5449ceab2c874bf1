# ccache under every build of the project: CI compiles the same sources six ways (test, x86_64
# and aarch64 releases, ASan, TSan, the fuzz targets) and a session before it compiled them all
# already. The cache lives outside the checkout, in $NPU_RUN_CACHE_DIR/ccache (default
# /var/cache/npu_run/ccache, else ~/.cache/npu_run/ccache), and is keyed by paths relative to
# the checkout (base_dir) with the build folder left out of the hash (hash_dir false), so a clone
# in another folder hits what this one compiled. Test paths are kept out of compile definitions
# for the same reason (tests/support/build_paths.hpp).
#
# Precompiled headers were measured and left out (docs/HARDENING.md, "What keeps CI fast"): they
# saved 0-12 % of a file's compile time (code generation dominates, not parsing; unity batches
# parse each header once per batch already), and GCC's 223 MB header image would have to be
# hashed by ccache for every file.
option(NPU_RUN_CCACHE "Compile through ccache when it is installed" ON)
find_program(NPU_RUN_CCACHE_PROGRAM ccache)
if(NOT NPU_RUN_CCACHE OR NOT NPU_RUN_CCACHE_PROGRAM)
  return()
endif()

if(DEFINED ENV{NPU_RUN_CACHE_DIR})
  set(npu_run_cache_root "$ENV{NPU_RUN_CACHE_DIR}")
else()
  execute_process(COMMAND sh -c "mkdir -p /var/cache/npu_run 2>/dev/null && test -w /var/cache/npu_run"
                  RESULT_VARIABLE not_writable)
  if(not_writable)
    set(npu_run_cache_root "$ENV{HOME}/.cache/npu_run")
  else()
    set(npu_run_cache_root /var/cache/npu_run)
  endif()
endif()
set(NPU_RUN_CCACHE_DIR "${npu_run_cache_root}/ccache" CACHE PATH "ccache's directory")
file(MAKE_DIRECTORY "${NPU_RUN_CCACHE_DIR}")
# Six builds of about 60 unity batches each, with line tables: room for many versions of each.
if(NOT EXISTS "${NPU_RUN_CCACHE_DIR}/ccache.conf")
  file(WRITE "${NPU_RUN_CCACHE_DIR}/ccache.conf" "max_size = 30G\n")
endif()
# time_macros: __DATE__/__TIME__ appear in no source of ours, only in headers we do not change.
set(CMAKE_CXX_COMPILER_LAUNCHER
    env "CCACHE_DIR=${NPU_RUN_CCACHE_DIR}" "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}"
    CCACHE_NOHASHDIR=1 CCACHE_SLOPPINESS=time_macros,include_file_mtime,include_file_ctime
    "${NPU_RUN_CCACHE_PROGRAM}")
message(STATUS "ccache: ${NPU_RUN_CCACHE_DIR}")
