// The escapee sweep over a fake /proc: what it reads there is whatever a racing process leaves.
#include <catch2/catch.hpp>
#include <filesystem>

#include "support/temp_dir.hpp"
#include "workers/escaped_processes.hpp"

namespace test_escaped_processes {

using npu_run::EscapeSweep;
using npu_run::testing::TempDir;

TEST_CASE("escapes: a /proc entry that cannot be read is passed over, never thrown on",
          "[unit][escapes]") {
  TempDir proc;
  // A live process (not a child of this one) whose environ fails to read: as a process that
  // exits during the sweep does (ESRCH), here a directory (EISDIR). std::filebuf threw on it.
  proc.write("4242/stat", "4242 (sleep) S 1 4242 4242 0 -1\n");
  std::filesystem::create_directories(proc.file("4242/environ"));
  proc.write("4243/stat", "4243 (a) b) S 1 4243 4243 0 -1\n");
  proc.write("4243/environ", std::string("A=1\0NPU_RUN_AGENT_MARK=other\0", 29));
  proc.write("self/stat", "not a process\n");
  EscapeSweep sweep;
  sweep.mark = "mine";
  sweep.proc_root = proc.path();
  CHECK(npu_run::stop_escaped_processes(sweep).empty());
}

}  // namespace test_escaped_processes
