#include "report/html_report.hpp"

#include <fmt/format.h>

#include <map>

#include "report/job_figures.hpp"
#include "report/svg_charts.hpp"

namespace npu_run {

namespace {

using nlohmann::json;

constexpr const char* kStyle = R"(
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;padding:12px;max-width:1280px;color:#222}
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.15em;margin:1.4em 0 .4em}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:8px}
.card{border:1px solid #ccd;border-radius:6px;padding:8px}.card b{display:block;font-size:1.3em}
.scroll{overflow-x:auto}table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #dde;padding:4px 6px;text-align:left;vertical-align:top}
pre{white-space:pre-wrap;background:#f4f4f8;padding:6px;margin:4px 0;font-size:.9em}
svg.chart{width:100%;height:auto;background:#fafafc;border:1px solid #dde}
@media (max-width:760px){svg.chart{min-width:760px}}
.wait{fill:#c9cbd6}.gate{fill:#e0b040}.run{fill:#3a8f5c}.failed{fill:#c83c3c}.restart{fill:#7a6fbf}
.mark{stroke:#999;stroke-dasharray:3 3}.small{font-size:10px;fill:#555}.label{font-size:11px}
.lines polyline{fill:none;stroke-width:1.2}.key span{display:inline-block;width:12px;height:12px;
margin:0 4px 0 12px;vertical-align:middle}
)";

std::string seconds_text(int64_t ms) {
  if (ms < 0) return "never";
  const double s = static_cast<double>(ms) / 1000.0;
  if (s < 120) return fmt::format("{:.1f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.1f} h", s / 3600);
}

std::string card(const std::string& value, const std::string& what) {
  return fmt::format("<div class=\"card\"><b>{}</b>{}</div>", html_escape(value),
                     html_escape(what));
}

std::string headline(const JobFigures& f) {
  int64_t lost = 0;
  for (const RestartCost& c : f.restart_costs) lost += c.lost_ms;
  std::string out = "<div class=\"cards\">";
  out += card(seconds_text(f.wall_ms), "wall time");
  out += card(seconds_text(f.time_to_first_step_ms), "time to first step");
  out += card(std::to_string(f.restarts), f.reforms > 0
                                              ? fmt::format("restarts ({} re-forms)", f.reforms)
                                              : std::string("restarts"));
  out += card(seconds_text(lost), "lost to restarts");
  out += card(fmt::format("{:.1f} %", f.goodput * 100), "goodput (every rank beating)");
  out += card(f.exit_code < 0 ? "?" : std::to_string(f.exit_code), "exit code");
  out += card(fmt::format("{} / {}", f.max_nodes, f.max_ranks), "nodes / ranks");
  return out + "</div>";
}

std::string restart_costs(const JobFigures& f) {
  if (f.restart_costs.empty()) return "";
  std::string rows;
  for (const RestartCost& c : f.restart_costs) {
    rows += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>", c.failed_round,
                        seconds_text(c.lost_ms) + (c.resumed_ms > 0 ? "" : " (never resumed)"),
                        html_escape(c.cause));
  }
  return "<h2>Restarts</h2><div class=\"scroll\"><table><tr><th>after round</th><th>time lost"
         "</th><th>root cause</th></tr>" +
         rows + "</table></div>";
}

std::string decision_text(const json& d) {
  if (d.empty()) return "running or lost";
  const std::string action = d.value("action", "");
  if (action == "restart")
    return d.value("membership_change", false)
               ? "re-formed"
               : fmt::format("restart {}", d.value("restart_count", 0));
  return fmt::format("finished, exit code {}", d.value("exit_code", 0));
}

std::string rounds_table(const RunTimeline& run) {
  std::string rows;
  for (const RoundRecord& r : run.rounds) {
    const json cause = r.decision.value("root_cause", json::object());
    rows += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", r.round,
                        html_escape(r.blame.value("blame", "did not form")),
                        html_escape(decision_text(r.decision)),
                        html_escape(cause.value("description", "")));
  }
  return "<h2>Rounds</h2><div class=\"scroll\"><table><tr><th>round</th><th>where its start went"
         "</th><th>end</th><th>root cause</th></tr>" +
         rows + "</table></div>";
}

// Where the round's hang dump kept its ranks' records (the nodes' kRecords events), the root
// cause's (`cause_rank`) first.
std::string records_list(const RunTimeline& run, uint64_t round, int cause_rank) {
  std::string items;
  for (const rdzv::TimelineEvent& e : run.events) {
    if (e.round != round || e.phase != rdzv::TimelinePhase::kRecords) continue;
    const std::string item = fmt::format("<li>rank {} on {}: {}</li>", e.rank, html_escape(e.host),
                                         html_escape(e.detail));
    items = e.rank == cause_rank ? item + items : items + item;
  }
  return items.empty() ? "" : "<p>Records kept by the hang's dump:</p><ul>" + items + "</ul>";
}

// What the round after a failure loaded through npu_run_checkpoint (the nodes' kRestore events):
// the step, from where, how long, and the steps the failure cost.
std::string restores_after(const RunTimeline& run, uint64_t round) {
  std::string items;
  for (const rdzv::TimelineEvent& e : run.events) {
    if (e.round != round + 1 || e.phase != rdzv::TimelinePhase::kRestore) continue;
    items += fmt::format("<li>node {} ({}): step {} {}</li>", e.node, html_escape(e.host), e.step,
                         html_escape(e.detail));
  }
  return items.empty() ? "" : fmt::format("<p>Round {} restored:</p><ul>{}</ul>", round + 1, items);
}

std::string cause_block(const RunTimeline& run, const RoundRecord& r) {
  const json c = r.decision.value("root_cause", json::object());
  std::string out = fmt::format("<h3>Round {}: node {} ({}), rank {}</h3><p>{}</p>", r.round,
                                c.value("node_rank", -1), html_escape(c.value("host", "")),
                                c.value("rank", -1), html_escape(c.value("description", "")));
  const json ev = c.value("evidence", json::object());
  std::string stack;
  if (!ev.value("exception", "").empty())
    stack += ev.value("exception", "") + " at " + ev.value("frame", "") + "\n";
  if (!c.value("error_message", "").empty()) stack += c.value("error_message", "") + "\n";
  if (!ev.value("fault", "").empty()) stack += "device fault: " + ev.value("fault", "") + "\n";
  if (!ev.value("last_beat", "").empty()) stack += "last beat: " + ev.value("last_beat", "") + "\n";
  if (!stack.empty()) out += "<pre>" + html_escape(stack) + "</pre>";
  const std::string reason = r.decision.value("class_reason", "");
  if (!reason.empty()) out += "<p>" + html_escape(reason) + "</p>";
  return out + records_list(run, r.round, c.value("rank", -1)) + restores_after(run, r.round);
}

std::string root_causes(const RunTimeline& run) {
  std::string out;
  for (const RoundRecord& r : run.rounds) {
    if (r.decision.contains("root_cause") && r.decision["root_cause"].is_object())
      out += cause_block(run, r);
  }
  return out.empty() ? "" : "<h2>Root causes</h2>" + out;
}

std::string health_verdicts(const RunTimeline& run) {
  constexpr size_t kShown = 200;
  size_t passed = 0;
  size_t shown = 0;
  std::string rows;
  for (const rdzv::TimelineEvent& e : run.events) {
    if (e.phase != rdzv::TimelinePhase::kGate) continue;
    if (e.detail.rfind("passed", 0) == 0 && e.detail.find("warning") == std::string::npos) {
      ++passed;
      continue;
    }
    if (shown++ >= kShown) continue;
    rows += fmt::format("<tr><td>{}</td><td>{} ({})</td><td>{}</td></tr>", e.round, e.node,
                        html_escape(e.host), html_escape(e.detail));
  }
  if (rows.empty() && passed == 0) return "";
  std::string out = fmt::format("<h2>Health verdicts</h2><p>{} verdict{} passed without warnings.",
                                passed, passed == 1 ? "" : "s");
  if (shown > kShown) out += fmt::format(" {} more are not listed.", shown - kShown);
  out += "</p>";
  if (!rows.empty())
    out += "<div class=\"scroll\"><table><tr><th>round</th><th>node</th><th>verdict</th></tr>" +
           rows + "</table></div>";
  return out;
}

// The stragglers the watch named during the run (kStraggler events), with what each cost.
std::string stragglers(const RunTimeline& run) {
  std::string rows;
  for (const rdzv::TimelineEvent& e : run.events) {
    if (e.phase != rdzv::TimelinePhase::kStraggler) continue;
    rows += fmt::format("<tr><td>{}</td><td>{} ({})</td><td>{}</td><td>{}</td></tr>", e.round,
                        e.node, html_escape(e.host), e.rank, html_escape(e.detail));
  }
  if (rows.empty()) return "";
  return "<h2>Stragglers</h2><div class=\"scroll\"><table><tr><th>round</th><th>node</th><th>rank "
         "most often last</th><th>what it cost</th></tr>" +
         rows + "</table></div>";
}

constexpr const char* kKey =
    "<p class=\"key\"><span class=\"wait\" style=\"background:#c9cbd6\"></span>waiting"
    "<span style=\"background:#e0b040\"></span>health gate<span style=\"background:#3a8f5c\">"
    "</span>running<span style=\"background:#c83c3c\"></span>failed<span style=\"background:"
    "#7a6fbf\"></span>restarting</p>";

}  // namespace

std::string html_report(const RunTimeline& run) {
  const JobFigures f = job_figures(run);
  std::string page = fmt::format(
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
      "content=\"width=device-width,initial-scale=1\"><title>npu_run report: {0}</title><style>"
      "{1}</style></head><body><h1>npu_run report: {0}</h1>",
      html_escape(run.run_id), kStyle);
  page += headline(f);
  page += rounds_table(run);
  // On a phone the plots keep a readable size and scroll sideways.
  page += "<h2>Timeline per node</h2>" + std::string(kKey) + "<div class=\"scroll\">" +
          node_timeline_svg(run, f) + "</div>";
  page += "<h2>Beats over time</h2>";
  page +=
      f.max_ranks > static_cast<int>(kMaxRankLines)
          ? "<p>Each line is one node's slowest rank (the job has too many ranks to draw all).</p>"
          : "<p>Each line is one rank; its height is the step its beats name.</p>";
  page += "<div class=\"scroll\">" + beats_svg(run, f) + "</div>";
  page += restart_costs(f);
  page += root_causes(run);
  page += stragglers(run);
  page += health_verdicts(run);
  if (run.thinned > 0) {
    page += fmt::format(
        "<p>{} of the oldest beat samples were given up to keep the timeline bounded; every "
        "rank's first and last beat of each round are kept.</p>",
        run.thinned);
  }
  if (run.dropped > 0)
    page +=
        fmt::format("<p>{} events did not fit in the timeline and are not shown.</p>", run.dropped);
  return page + "</body></html>\n";
}

}  // namespace npu_run
