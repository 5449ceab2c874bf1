#include "rendezvous/state/round_blame.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace npu_run::rdzv {

namespace {

double seconds(int64_t ms) {
  return static_cast<double>(ms) / 1000.0;
}

// When the round could have formed for this node: its join, or its verdict after it.
int64_t ready_at(const NodeArrival& node) {
  return std::max(node.joined_ms, node.verdict_ms);
}

struct Candidate {
  BlameCause cause = BlameCause::kNone;
  int64_t ms = 0;
};

// The largest of what held the last node back, if it stands out.
Candidate main_cause(const NodeArrival& last, const std::vector<NodeArrival>& nodes,
                     int64_t wait_ms, int64_t server_up_ms, bool first_round) {
  std::vector<Candidate> candidates;
  if (first_round && last.agent_start_ms > 0) {
    int64_t earliest = last.agent_start_ms;
    for (const NodeArrival& n : nodes) {
      if (n.agent_start_ms > 0) earliest = std::min(earliest, n.agent_start_ms);
    }
    candidates.push_back({BlameCause::kLateStart, last.agent_start_ms - earliest});
  }
  if (last.verdict_ms > last.joined_ms)
    candidates.push_back({BlameCause::kHealthGate, last.gate_ms});
  if (last.dials > 1 && last.dialled_ms > 0) {
    const int64_t from = std::max(last.dialled_ms, server_up_ms);
    candidates.push_back({BlameCause::kHandshake, last.joined_ms - from});
  }
  Candidate best;
  for (const Candidate& c : candidates) {
    if (c.ms > best.ms) best = c;
  }
  if (best.ms < kBlameFloorMs || best.ms * 4 < wait_ms) return {};
  return best;
}

std::string cause_text(const RoundBlame& b, int dials) {
  switch (b.cause) {
    case BlameCause::kLateStart:
      return fmt::format("; its agent started {:.1f} s late", seconds(b.cause_ms));
    case BlameCause::kHealthGate:
      return fmt::format("; its health gate took {:.1f} s{}", seconds(b.cause_ms),
                         b.cause_detail.empty() ? "" : ": " + b.cause_detail);
    case BlameCause::kHandshake:
      return fmt::format(
          "; its join waited for a handshake slot ({:.1f} s, {} connections: the rendezvous "
          "caps connections that have not joined)",
          seconds(b.cause_ms), dials);
    case BlameCause::kNone:
      break;
  }
  return "";
}

}  // namespace

const char* cause_name(BlameCause cause) {
  switch (cause) {
    case BlameCause::kLateStart:
      return "late_start";
    case BlameCause::kHealthGate:
      return "health_gate";
    case BlameCause::kHandshake:
      return "handshake";
    case BlameCause::kNone:
      break;
  }
  return "none";
}

RoundBlame blame_round(uint64_t round, int64_t began_ms, int64_t formed_ms,
                       const std::vector<NodeArrival>& nodes, int64_t server_up_ms) {
  RoundBlame b;
  b.round = round;
  b.began_ms = began_ms;
  b.formed_ms = formed_ms;
  b.nodes = static_cast<int>(nodes.size());
  const std::string formed = fmt::format("round {} formed in {:.1f} s", round,
                                         seconds(std::max<int64_t>(0, formed_ms - began_ms)));
  if (nodes.empty()) {
    b.sentence = formed;
    return b;
  }
  const auto last = std::max_element(nodes.begin(), nodes.end(), [](const auto& x, const auto& y) {
    return ready_at(x) < ready_at(y);
  });
  int64_t first_join = last->joined_ms;
  for (const NodeArrival& n : nodes) first_join = std::min(first_join, n.joined_ms);
  b.last_node = last->node;
  b.last_host = last->host;
  b.after_first_ms = std::max<int64_t>(0, ready_at(*last) - first_join);
  if (nodes.size() == 1) {
    b.sentence = fmt::format("{} (1 node, {})", formed, last->host);
    if (last->verdict_ms > last->joined_ms && last->gate_ms >= kBlameFloorMs) {
      b.cause = BlameCause::kHealthGate;
      b.cause_ms = last->gate_ms;
      b.cause_detail = last->gate_slowest;
      b.sentence += cause_text(b, last->dials);
    }
    return b;
  }
  const Candidate cause = main_cause(*last, nodes, b.after_first_ms, server_up_ms, round == 0);
  b.cause = cause.cause;
  b.cause_ms = cause.ms;
  if (cause.cause == BlameCause::kHealthGate) b.cause_detail = last->gate_slowest;
  b.sentence =
      fmt::format("{}: the last node to join was node {} ({}), {:.1f} s after the first{}", formed,
                  last->node, last->host, seconds(b.after_first_ms), cause_text(b, last->dials));
  return b;
}

nlohmann::json to_json(const RoundBlame& b) {
  nlohmann::json j{{"round", b.round},
                   {"began", b.began_ms},
                   {"formed", b.formed_ms},
                   {"formed_in_s", seconds(b.formed_ms - b.began_ms)},
                   {"nodes", b.nodes},
                   {"world_size", b.world_size},
                   {"last_node", b.last_node},
                   {"last_host", b.last_host},
                   {"after_first_s", seconds(b.after_first_ms)},
                   {"cause", cause_name(b.cause)},
                   {"cause_s", seconds(b.cause_ms)},
                   {"blame", b.sentence}};
  if (!b.cause_detail.empty()) j["cause_detail"] = b.cause_detail;
  return j;
}

}  // namespace npu_run::rdzv
