// The report's two plots, drawn as inline SVG by npu_run itself (no script, no network): the
// rounds as a timeline per node (waiting, health gate, running, failed, restarting), and the
// ranks' beats over time (the step from each beat's text, else the beat count). Sized to stay
// small for big jobs: rectangles of one kind are one path, a job of more than kMaxRankLines
// ranks is drawn by each node's slowest rank, and every line has at most kMaxLinePoints points.
#pragma once

#include <string>

#include "report/job_figures.hpp"
#include "report/run_timeline.hpp"

namespace npu_run {

inline constexpr size_t kMaxRankLines = 256;
inline constexpr size_t kMaxLinePoints = 24;

std::string node_timeline_svg(const RunTimeline& run, const JobFigures& figures);
std::string beats_svg(const RunTimeline& run, const JobFigures& figures);

// Text safe inside HTML and SVG.
std::string html_escape(const std::string& text);

}  // namespace npu_run
