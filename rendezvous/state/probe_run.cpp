#include "rendezvous/state/probe_run.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace npu_run::rdzv {

namespace {

double lower_median(std::vector<double> values) {
  values.erase(std::remove(values.begin(), values.end(), 0.0), values.end());
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[(values.size() - 1) / 2];
}

// The first finding line about `subject` ("node 2 (c)" or "node 1 (b) and node 2 (c)").
std::string line_about(const std::vector<std::string>& lines, const std::string& subject) {
  for (const std::string& line : lines) {
    if (line.rfind(subject + ":", 0) == 0) return line;
  }
  return subject + ": slow";
}

}  // namespace

ProbeRun::ProbeRun(uint64_t id, std::vector<ProbeNode> nodes, PreflightMode mode, int64_t now_ms)
    : id_(id), nodes_(std::move(nodes)), mode_(mode), started_ms_(now_ms) {
  answers_.assign(nodes_.size(), std::nullopt);
  ask(first_round(static_cast<int>(nodes_.size())));
  matmul_.assign(nodes_.size(), 0.0);
  failures_.assign(nodes_.size(), "");
}

std::vector<std::pair<size_t, ProbeRequest>> ProbeRun::requests() const {
  std::vector<std::pair<size_t, ProbeRequest>> out;
  int asked = 0;
  for (const ProbeGroup& g : groups_) asked += static_cast<int>(g.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ProbeGroup& group = groups_[g];
    const ProbeNode& leader = nodes_[static_cast<size_t>(group.front())];
    for (size_t r = 0; r < group.size(); ++r) {
      ProbeRequest request;
      request.run = id_;
      request.step = step_;
      request.group = fmt::format("{}.{}.{}", id_, step_, g);
      request.rank = static_cast<int>(r);
      request.size = static_cast<int>(group.size());
      request.asked = asked;
      request.store_addr = leader.addr;
      request.store_port = leader.port;
      request.matmul = step_ == 1;
      request.full = mode_ == PreflightMode::kFull;
      request.timeout_ms = timeout_ms(mode_);
      out.emplace_back(static_cast<size_t>(group[r]), std::move(request));
    }
  }
  return out;
}

void ProbeRun::ask(std::vector<ProbeGroup> groups) {
  groups_ = std::move(groups);
  asked_.assign(nodes_.size(), false);
  missing_ = 0;
  for (const ProbeGroup& g : groups_) {
    for (int node : g) {
      asked_[static_cast<size_t>(node)] = true;
      ++missing_;
    }
  }
}

void ProbeRun::answer(size_t node, const ProbeReport& report) {
  if (node >= nodes_.size() || !asked_[node] || answers_[node]) return;
  answers_[node] = report;
  --missing_;
  if (report.failed && failures_[node].empty()) failures_[node] = report.detail;
  if (step_ == 1 && !report.failed) matmul_[node] = static_cast<double>(report.matmul_us) / 1e6;
}

bool ProbeRun::step_done() const {
  return missing_ == 0;
}

// A group's time is its slowest member's all_gather; one member failing fails it.
std::vector<GroupTime> ProbeRun::group_times() const {
  std::vector<GroupTime> times;
  for (const ProbeGroup& g : groups_) {
    GroupTime t{g, 0, false};
    for (int node : g) {
      const ProbeReport& r = *answers_[static_cast<size_t>(node)];
      t.failed = t.failed || r.failed || r.gather_us <= 0;
      t.seconds = std::max(t.seconds, static_cast<double>(r.gather_us) / 1e6);
    }
    times.push_back(std::move(t));
  }
  return times;
}

std::vector<std::string> ProbeRun::labels() const {
  std::vector<std::string> out;
  for (const ProbeNode& n : nodes_) out.push_back(n.label);
  return out;
}

bool ProbeRun::advance(int64_t now_ms) {
  std::vector<GroupTime> times = group_times();
  answers_.assign(nodes_.size(), std::nullopt);
  if (step_ == 3) {
    whole_ = times.front();
    finish(*findings_, now_ms);
    return false;
  }
  if (step_ == 1) {
    first_ = std::move(times);
    ProbeFindings f = judge_probe(matmul_, first_, {}, labels());
    if (!f.next_round.empty()) {
      step_ = 2;
      ask(std::move(f.next_round));
      return true;
    }
    findings_ = std::move(f);
  } else {
    second_ = std::move(times);
    findings_ = judge_probe(matmul_, first_, second_, labels());
  }
  fail_nodes(*findings_);
  ProbeGroup left;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!failed_.contains(i)) left.push_back(static_cast<int>(i));
  }
  if (mode_ != PreflightMode::kFull || left.size() < 2) {
    finish(*findings_, now_ms);
    return false;
  }
  step_ = 3;
  ask({std::move(left)});
  return true;
}

std::string ProbeRun::with_detail(size_t node, const std::string& line) const {
  if (failures_[node].empty()) return line;
  return fmt::format("{} (its probe: {})", line, failures_[node]);
}

void ProbeRun::fail_nodes(const ProbeFindings& findings) {
  failed_.clear();
  for (int node : findings.slow_nodes) {
    const auto i = static_cast<size_t>(node);
    failed_[i] = with_detail(i, line_about(findings.lines, nodes_[i].label));
  }
  // A slow link fails its later end: the job runs without the link, and the other end stays.
  for (const auto& [a, b] : findings.slow_links) {
    const auto i = static_cast<size_t>(b);
    if (!failed_.contains(i) && !failed_.contains(static_cast<size_t>(a)))
      failed_[i] = line_about(findings.lines,
                              nodes_[static_cast<size_t>(a)].label + " and " + nodes_[i].label);
  }
}

void ProbeRun::finish(const ProbeFindings& findings, int64_t now_ms) {
  std::vector<double> gathers;
  for (const GroupTime& g : first_) gathers.push_back(g.failed ? 0.0 : g.seconds);
  const std::string mode(kPreflightModeNames.name(mode_));
  const std::string summary = fmt::format(
      "pre-flight probe ({}, {} nodes, {} s): matmul median {:.3f} s, all_gather median {:.3f} s",
      mode, nodes_.size(), fmt::format("{:.1f}", static_cast<double>(now_ms - started_ms_) / 1e3),
      lower_median(matmul_), lower_median(gathers));
  notes_.push_back(whole_ && !whole_->failed
                       ? fmt::format("{}, the {} nodes that passed together {:.3f} s", summary,
                                     whole_->nodes.size(), whole_->seconds)
                       : summary);
  if (whole_ && whole_->failed) {
    notes_.push_back(
        fmt::format("pre-flight probe: the all_gather of the {} nodes that passed "
                    "failed, though each pair had passed",
                    whole_->nodes.size()));
  }
  for (const std::string& line : findings.lines) notes_.push_back("pre-flight probe: " + line);
  // Every probe failed alike (no torch, say): nothing to judge, so nobody is kept out.
  if (failed_.empty() && std::all_of(failures_.begin(), failures_.end(),
                                     [](const std::string& f) { return !f.empty(); })) {
    // The first that says why, rather than one that waited for it ("no answer within ...").
    size_t why = 0;
    while (why + 1 < nodes_.size() && failures_[why].rfind("no answer within", 0) == 0) ++why;
    notes_.push_back(
        fmt::format("pre-flight probe: no node's probe ran ({}: {}); the round "
                    "forms without its figures",
                    nodes_[why].label, failures_[why]));
  }
}

}  // namespace npu_run::rdzv
