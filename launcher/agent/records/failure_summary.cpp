#include "agent/records/failure_summary.hpp"

#include <fmt/format.h>

#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "basics/text.hpp"
#include "rendezvous/state/hang_blame.hpp"

namespace npu_run {
namespace {

std::string result_text(const WorkerOutcome& w, bool is_root_cause) {
  if (!w.hang.empty())
    return fmt::format("hung: {}; stacks dumped ({})", w.hang, w.status.describe());
  std::string text = w.status.describe();
  if (w.survived_kill)
    text += ", survived SIGKILL (uninterruptible?)";
  else if (w.stopped_by_agent && is_root_cause && w.raised_at)
    text += fmt::format(", stopped by npu_run while exiting after its error at {}",
                        clock_time(*w.raised_at));
  else if (w.stopped_by_agent && !is_root_cause)
    text += ", stopped by npu_run";
  return text;
}

// Which workers get a row: the root cause first, then the others in local-rank order; clean
// exits are only counted.
struct SummaryRows {
  std::vector<size_t> workers;
  size_t succeeded = 0;
};

SummaryRows summary_rows(const GroupResult& result) {
  SummaryRows rows;
  if (result.root_cause) rows.workers.push_back(*result.root_cause);
  for (size_t i = 0; i < result.workers.size(); ++i) {
    if (result.root_cause && i == *result.root_cause) continue;
    if (result.workers[i].status.success() && !result.workers[i].survived_kill) {
      ++rows.succeeded;
      continue;
    }
    rows.workers.push_back(i);
  }
  return rows;
}

std::string summary_title(const GroupResult& result, const SummaryContext& ctx) {
  const double seconds = std::chrono::duration<double>(result.elapsed).count();
  if (!ctx.stopped_because.empty()) {
    return fmt::format(
        "npu_run on node {} ({}) stopped its workers after {:.1f} s, attempt {}, because of {}:\n",
        ctx.node_rank, ctx.host, seconds, ctx.attempt, ctx.stopped_because);
  }
  if (result.outcome == GroupResult::Outcome::kStopped) {
    return fmt::format("npu_run stopped by {} on node {} ({}) after {:.1f} s, attempt {}:\n",
                       signal_name(result.stop_signal), ctx.node_rank, ctx.host, seconds,
                       ctx.attempt);
  }
  return fmt::format(
      "npu_run job failed on node {} ({}) after {:.1f} s, attempt {}; root cause first:\n",
      ctx.node_rank, ctx.host, seconds, ctx.attempt);
}

constexpr size_t kColumns = 8;
using Cells = std::array<std::string, kColumns>;

// One row, each column padded to its width but the last, with no trailing blanks.
std::string aligned_line(const Cells& cells, const std::array<size_t, kColumns>& width) {
  std::string line = "  ";
  for (size_t c = 0; c < kColumns; ++c)
    line += fmt::format("{:<{}}", cells[c], c == kColumns - 1 ? 0 : width[c] + 2);
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line + "\n";
}

// The lines under a worker's row: why it could not start, its error message (and for the root
// cause its traceback), its log.
std::string row_details(const WorkerOutcome& w, const WorkerError& error, bool root) {
  std::string out;
  if (!w.start_error.empty()) out += fmt::format("      {}\n", w.start_error);
  if (!error.message.empty()) out += fmt::format("      error: {}\n", error.message);
  if (root && !error.traceback.empty()) {
    out += fmt::format("      traceback (from {}):\n", error.path);
    for (const std::string_view line : split(error.traceback, '\n')) {
      if (!line.empty()) out += fmt::format("        {}\n", line);
    }
  }
  if (!w.last_beat.empty()) out += fmt::format("      last beat: {}\n", w.last_beat);
  if (!w.stack_frames.empty()) {
    out += fmt::format("      stack: {}{}\n", rdzv::join_frames(w.stack_frames),
                       w.odd_one_out ? "   <- the odd one out" : "");
  }
  if (!w.record_files.empty())
    out += fmt::format("      records: {}\n", fmt::join(w.record_files, ", "));
  for (const std::string& finding : w.cann_findings)
    out += fmt::format("      HCCL's log: {}\n", finding);
  if (!w.stderr_log.empty()) out += fmt::format("      log: {}\n", w.stderr_log);
  for (const std::string& log : w.incomplete_logs)
    out += fmt::format("      incomplete: {}\n", log);
  return out;
}

// The last kMaxTracebackLines lines of `text`, after a line saying how many were left out.
std::string last_lines(const std::string& text) {
  std::vector<std::string_view> lines = split(text, '\n');
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::string out;
  size_t first = 0;
  if (lines.size() > kMaxTracebackLines) {
    first = lines.size() - kMaxTracebackLines;
    out = fmt::format("... ({} lines left out)\n", first);
  }
  for (size_t i = first; i < lines.size(); ++i) out += fmt::format("{}\n", lines[i]);
  return out;
}

}  // namespace

std::string format_failure_summary(const GroupResult& result, const SummaryContext& ctx,
                                   const std::map<size_t, WorkerError>& errors) {
  const SummaryRows rows = summary_rows(result);
  std::vector<Cells> table;
  table.push_back({"", "time", "host", "node", "rank", "local", "pid", "result"});
  for (size_t i : rows.workers) {
    const WorkerOutcome& w = result.workers[i];
    const bool root = result.root_cause && i == *result.root_cause;
    table.push_back({root ? "*" : "", clock_time(w.finished_at), ctx.host,
                     std::to_string(ctx.node_rank),
                     w.local_rank < 0 ? "scheduler" : std::to_string(w.global_rank),
                     w.local_rank < 0 ? "-" : std::to_string(w.local_rank),
                     w.pid > 0 ? std::to_string(w.pid) : "-", result_text(w, root)});
  }
  std::array<size_t, kColumns> width{};
  for (const Cells& cells : table) {
    for (size_t c = 0; c < kColumns; ++c) width[c] = std::max(width[c], cells[c].size());
  }
  std::string out = summary_title(result, ctx) + aligned_line(table[0], width);
  for (size_t r = 0; r < rows.workers.size(); ++r) {
    const size_t index = rows.workers[r];
    const auto error = errors.find(index);
    const bool root = result.root_cause && index == *result.root_cause;
    out += aligned_line(table[r + 1], width) +
           row_details(result.workers[index], error == errors.end() ? WorkerError{} : error->second,
                       root);
  }
  if (rows.succeeded > 0) {
    out += fmt::format("  ({} other worker{} exited 0)\n", rows.succeeded,
                       rows.succeeded == 1 ? "" : "s");
  }
  return out;
}

WorkerError read_worker_error(const std::string& path) {
  // The worker writes this file: a few kilobytes from @record, never trusted to be small.
  constexpr size_t kMaxBytes = size_t{1} << 20;
  WorkerError error;
  std::ifstream in(path, std::ios::binary);
  if (!in) return error;
  std::string text(kMaxBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxBytes) return error;
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("message")) return error;
  const nlohmann::json& m = doc["message"];
  if (m.is_string()) {
    error.message = m.get<std::string>();
  } else if (m.is_object() && m.contains("message") && m["message"].is_string()) {
    error.message = m["message"].get<std::string>();
    const nlohmann::json* stack = nullptr;
    if (m.contains("extraInfo") && m["extraInfo"].is_object() &&
        m["extraInfo"].contains("py_callstack"))
      stack = &m["extraInfo"]["py_callstack"];
    if (stack != nullptr && stack->is_string())
      error.traceback = last_lines(stack->get<std::string>());
  }
  error.message = error.message.substr(0, error.message.find('\n'));
  error.path = path;
  return error;
}

}  // namespace npu_run
