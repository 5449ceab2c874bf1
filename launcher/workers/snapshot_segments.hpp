// Where an agent keeps its ranks' snapshots in memory (npu_run_checkpoint,
// agent/rooms/snapshot_room.cpp): files in a directory of its own on the shared-memory file system,
// "/dev/shm/npu_run_snapshots_ <agent mark>", mode 0700. The agent removes it when it ends; the
// guardian (workers/guardian.hpp), which knows the mark, removes it after a SIGKILL of the agent;
// and an agent starting removes those of this user whose agent is gone (both killed at once, by the
// OOM killer say).
#pragma once

#include <cstdint>
#include <string>

namespace npu_run {

inline constexpr const char* kSegmentRoot = "/dev/shm";

std::string segment_directory_for(const std::string& mark);

// Makes it (after the sweep of dead agents' ones); throws std::runtime_error naming it, why and
// the fix.
std::string make_segment_directory(const std::string& mark);

// Removes it and what it holds; quiet when it is gone.
void remove_segment_directory(const std::string& directory);

// The bytes free on the file system holding `directory`; 0 when it cannot be asked.
uint64_t free_bytes_under(const std::string& directory);

// MemAvailable of /proc/meminfo in bytes; 0 when it cannot be read (Linux before 3.14 has none:
// then MemFree + Cached).
uint64_t memory_available();

}  // namespace npu_run
