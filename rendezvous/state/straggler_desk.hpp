// The rendezvous' side of the straggler watch (--straggler; issue 48 point 4): every agent's
// samples of its ranks' flight recorders (rendezvous/protocol/straggler_messages.hpp) meet here,
// one collective at a time, until every rank of its group has entered it. Once per window the
// collectives completed since the last score are scored (rendezvous/state/straggler_score.hpp) over
// the training time they cover, and three windows in a row over 30 % name a straggler.
//
// In a job of several nodes the unit scored is the node: its ranks share its CPU, memory and
// links, so a slow node makes any of them the last, and scoring ranks would split the blame
// (and the watch's run) among them; the rank most often last on it is named with it. In a job of
// one node the unit is the rank. Pure, bounded: at most kMaxOpen collectives and kMaxOpenEntries
// units' entries wait for their last ranks, and one that waits past four windows (a sample lost)
// is dropped.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "health/gate_settings.hpp"
#include "rendezvous/state/straggler_score.hpp"

namespace npu_run::rdzv {

struct NamedStraggler {
  int node_rank = -1;  // -1: a job of one node
  int rank = -1;       // the rank most often last (on that node)
  Straggler score;     // unit: the node rank, or the rank in a job of one node
  std::string text;    // "node 1 (host-b, ranks 2-3) entered collectives last, ..."
};

// What the log says when a straggler is named: its sentence, and what --straggler does about it.
std::string announcement(const NamedStraggler& named, StragglerMode mode);

class StragglerDesk {
 public:
  static constexpr size_t kMaxOpen = 20'000;
  // A node keeps one entry per unit and collective (its last rank's): 16k ranks on 2k nodes
  // sampled every 10 s hold about 400k; past this the oldest collectives go.
  static constexpr size_t kMaxOpenEntries = 500'000;
  static constexpr size_t kMaxGroups = 64;
  static constexpr int kMinCollectives = 3;  // fewer in a window is no evidence either way
  static constexpr double kThreshold = 0.3;  // of the time covered, waited for the unit
  static constexpr int kWindows = 3;         // in a row

  // A round runs: its nodes' first ranks and hosts (node rank order) and its world size.
  void begin(uint64_t round, std::vector<int> rank_offsets, std::vector<std::string> hosts,
             int world_size, int64_t window_ms, int64_t now_ms);
  // The round's workers stopped: nothing more is scored until the next begin().
  void stop();
  bool active() const { return active_; }
  // `node_rank`'s ranks' calls; the ranks of other nodes and other rounds are dropped.
  void add(int node_rank, const CollectiveSample& sample);
  // Once a window has passed since the last score: the straggler this window names, if any.
  std::optional<NamedStraggler> score_if_due(int64_t now_ms);
  // Named and still slow (no window has cleared it since).
  const std::optional<NamedStraggler>& current() const { return current_; }
  size_t open_entries() const { return open_entries_; }

 private:
  using CallKey = std::pair<std::string, int64_t>;
  // A unit's part of a collective: its last rank in, and how many of its ranks entered.
  struct UnitEntry {
    int64_t latest_ms = 0;
    int latest_rank = -1;
    int ranks = 0;
  };
  struct OpenCall {
    std::map<int, UnitEntry> units;
    int ranks = 0;  // entered so far, each unit's counted up to its size
    int64_t first_ms = INT64_MAX;
  };
  using Calls = std::map<CallKey, OpenCall>;
  int node_of(int rank) const;
  int unit_of(int rank) const { return offsets_.size() > 1 ? node_of(rank) : rank; }
  int unit_size(int unit) const;
  void drop_oldest();
  // The collectives every rank of their group entered, taken out of the open ones.
  Calls take_complete();
  NamedStraggler name(const Straggler& s, const Calls& window) const;
  std::string ranks_text(int node) const;

  bool active_ = false;
  uint64_t round_ = 0;
  std::vector<int> offsets_;
  std::vector<std::string> hosts_;
  int world_ = 0;
  int64_t window_ms_ = 30'000;
  int64_t due_ms_ = 0;
  Calls open_;
  size_t open_entries_ = 0;  // units' entries over the open collectives
  std::map<std::string, std::set<int>> group_ranks_;
  StragglerWatch watch_{kThreshold, kWindows};
  std::optional<NamedStraggler> current_;
};

}  // namespace npu_run::rdzv
