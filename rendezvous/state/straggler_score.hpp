// Stragglers during the run, scored from the flight recorders' sampled records (issue 48 point
// 4): in a synchronous job a slow rank fails nothing and slows everyone, because its peers wait
// in every collective it enters last. For each collective every sampled rank entered, the last
// to enter kept its peers waiting from their median entry to its own; a window's time so spent,
// per rank, over the window's length is that rank's share. A rank over the threshold (30 %) in
// three windows in a row is a straggler. Pure: the times come in (wall clock, ms; the nodes'
// clocks agree to well within a step under NTP), names go out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/protocol/straggler_messages.hpp"

namespace npu_run::rdzv {

struct WindowScore {
  int rank = -1;        // the rank whose lateness cost its peers most; -1: none (or nothing seen)
  int64_t cost_ms = 0;  // the waiting it caused in the window
  double share = 0;     // cost_ms / window_ms
  int collectives = 0;  // collectives every sampled rank of their group entered
};

// Scores one window of `window_ms`: only collectives that at least two ranks entered count, and
// a lateness within `tolerance_ms` (scheduling noise) counts as none.
WindowScore score_window(const std::vector<RankSample>& samples, int64_t window_ms,
                         int64_t tolerance_ms = 2);

struct Straggler {
  int rank = -1;
  int64_t cost_ms = 0;  // over the windows that named it
  double share = 0;     // their mean
  int windows = 0;
};

// Names a straggler once the same rank scored over `threshold` in `windows` windows in a row;
// once named, again only after a window that did not name it.
class StragglerWatch {
 public:
  explicit StragglerWatch(double threshold = 0.3, int windows = 3)
      : threshold_(threshold), windows_(windows) {}
  std::optional<Straggler> add(const WindowScore& score);

 private:
  double threshold_;
  int windows_;
  Straggler run_{};  // the current run of windows over the threshold
  bool named_ = false;
};

// "rank 5 entered collectives last, keeping its peers waiting 41 % of the time (12.3 s) over
// the last 3 windows".
std::string describe(const Straggler& s);

}  // namespace npu_run::rdzv
