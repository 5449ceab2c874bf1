// The ledger of bad nodes: one JSON object per line, appended by the agent that hosts the
// rendezvous for every node the job takes out (lost, a failed health gate, a device fault), and
// read by later rounds and launches (--ledger FILE, default <log dir>/ledger.jsonl): their
// rendezvous refuses agents on those hosts, `--hosts` leaves them out, requeue.sbatch excludes
// them. An entry is active until it is older than --ledger-ttl or a later `npu_run ledger clear
// HOST` record voids it. Appends are one write(2) of one line with O_APPEND, so agents of
// several jobs may share a file; a reader skips lines it cannot read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace npu_run {

struct LedgerEntry {
  std::string host;
  std::string addr;
  int node_rank = -1;
  int64_t time_ms = 0;   // wall clock, ms since the epoch
  std::string reason;    // "lost", "failed its health gate", "infrastructure fault"
  std::string evidence;  // the description, the fault's line, the failed check
  std::string job;       // the run id
  bool cleared = false;  // a clear record: the host's entries before it are void
};

// A ledger file larger than this is read from its last this-many bytes.
inline constexpr size_t kMaxLedgerBytes = size_t{16} << 20;
inline constexpr size_t kMaxLedgerText = 1024;  // each text of an entry, cut when written

std::string ledger_line(const LedgerEntry& entry);  // one JSON object and a newline
// The entries of `text` in order; lines that are not entries are skipped.
std::vector<LedgerEntry> ledger_entries(std::string_view text);
// The active entry of each host at `now_ms`, the newest, by host name.
std::vector<LedgerEntry> active_entries(const std::vector<LedgerEntry>& all, int64_t now_ms,
                                        int64_t ttl_ms);

// The file's entries (none when it does not exist); throws std::runtime_error naming the path
// when it exists and cannot be read.
std::vector<LedgerEntry> read_ledger(const std::string& path);
// Appends `entry` in one write; throws std::runtime_error naming the path and the error.
void append_to_ledger(const std::string& path, const LedgerEntry& entry);

// "lost at 2026-11-26 05:10:00 UTC (job 'x', node 1, 10.0.0.2): agent lost: ...".
std::string describe(const LedgerEntry& entry);

}  // namespace npu_run
