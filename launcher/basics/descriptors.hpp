// Descriptor hygiene that must work on every kernel: close_range where it exists (Linux 5.9,
// its close-on-exec flag 5.11), else the list in /proc/self/fd, else every number up to the
// open-files limit. Chosen at run time from kernel_features(). Also the open-files limit itself.
#pragma once

#include <string_view>

namespace npu_run {

// Marks every descriptor from `lowest` up close-on-exec. Called once at start-up, so that what
// npu_run inherited (a scheduler's or a shell's descriptors) never reaches a worker, as under
// torchrun, whose subprocesses close every descriptor but stdio.
void set_cloexec_from(int lowest);

// Marks one descriptor close-on-exec: for those a library opens without the flag (Asio's
// sockets and acceptors), right after it opened them, on the thread that also forks workers.
void set_cloexec(int fd);

// The same as set_cloexec_from(3), for a forked child between fork and exec: async-signal-safe
// (close_range, else getdents64 over /proc/self/fd into a stack buffer, else every number up to
// the open-files limit; no allocation). What the agent holds, a socket opened by a library in
// the window before it was marked included, can then never reach a worker.
void set_cloexec_from_in_child(int lowest, bool close_range_cloexec);

// Opens /dev/null on whichever of 0, 1 and 2 was closed when npu_run started (`cmd <&-`, some
// daemons): otherwise the next descriptor npu_run opens (the epoll set, a socket) would take that
// number, and a log line or a worker's stdin would land in it.
void fill_closed_standard_descriptors();

// Closes every descriptor from `lowest` up except `keep` (-1: none). For a forked helper that
// must hold nothing of its parent; only call it in a single-threaded process (it may allocate).
void close_descriptors_from(int lowest, int keep);

// Raises the soft open-files limit to the hard one. A process that serves thousands of agents
// (node 0's agent, `npu_run rdzv-server`) decides this for itself; the server does not.
void raise_open_files_limit();

// Makes sure this process may open `needed` descriptors: raises the soft limit up to that where
// the hard limit allows. Returns the limit when even the hard one is lower (0: enough).
unsigned long ensure_open_files(unsigned long needed);

// write(2) until everything is written; false on an error other than EINTR (EPIPE: the reader
// is gone; ENOSPC: the disk is full). Blocks as the descriptor blocks.
bool write_fully(int fd, std::string_view data);

}  // namespace npu_run
