// What a test sets up for npu_run to meet: FIFOs that hold workers until the test lets them on,
// free ports, and where the binary and sources are.
#pragma once

#include <string>
#include <utility>

namespace npu_run::testing {

// A FIFO a worker blocks on (`read x < gate`) until the test opens it: the test, not a timer,
// decides when the worker proceeds.
std::string make_gate(const std::string& path);
void open_gate(const std::string& path);

// A TCP port that was free a moment ago on 127.0.0.1, for a test's rendezvous; no other test
// process of the suite gets it while this one lives.
int unused_port();

// The binary under test (NPU_RUN_UNDER_TEST may wrap it), and the source tree.
std::string npu_run_binary();
std::string source_dir();

size_t count_occurrences(const std::string& text, const std::string& needle);

// The Python the [pytorch] tests run under ($PYTHON_EXEC, else /usr/bin/python3), and its torch's
// version as (major, minor), asked once; (0, 0) when it cannot be told.
std::string test_python();
std::pair<int, int> torch_version();

// A shell command's exit code and output (stdout, and stderr unless `quiet`).
std::pair<int, std::string> shell(const std::string& command, bool quiet = false);

}  // namespace npu_run::testing
