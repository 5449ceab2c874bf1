// Reading a Python worker's stack dump back from its stderr: on a hang npu_run sends SIGABRT,
// on which faulthandler (PYTHONFAULTHANDLER) prints every thread's traceback. The failure
// summary shows the top frames of each rank, and the rendezvous compares them across ranks to
// find the odd one out (rendezvous/state/hang_blame.hpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace npu_run {

// How much of a worker's stderr is kept to find its dump in: the thread that took the signal
// (the main thread, which Linux prefers for a process-directed signal) is printed last, before
// one "Extension modules" line.
inline constexpr size_t kStderrTailBytes = size_t{64} * 1024;

// The innermost `max_frames` frames of the thread that received the signal in the last
// faulthandler dump in `text` ("train.py:88 in wait_for_data", most recent first; the file
// without its directory); empty when `text` holds no dump. A thread without Python frames
// gives "<no Python frame>".
std::vector<std::string> python_dump_top_frames(std::string_view text, size_t max_frames);

// The innermost `max_frames` frames of the oldest thread (the main thread: faulthandler lists the
// newest first) in a dump taken from another thread, as torch's worker server takes one for
// `dump_traceback`; the thread that took the dump ("Current thread") only when it is the only
// one. Empty when `text` holds no thread.
std::vector<std::string> python_dump_main_thread_frames(std::string_view text, size_t max_frames);

// The last `bytes` bytes of the file at `path` (a worker's stderr log), or all of it; empty
// when it cannot be read.
std::string file_tail(const std::string& path, size_t bytes);

}  // namespace npu_run
