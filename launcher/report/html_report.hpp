// `npu_run report`: one self-contained HTML page of a job from its timeline (no network, no
// script, readable from a file:// URL, at 1,280 px and on a phone): the headline figures
// (time to first step, restarts and what each cost, goodput), the rounds with where their start
// went and how they ended, the timeline per node and the beats (report/svg_charts.hpp), the root
// cause of each failure with its stack lines, and the health verdicts.
#pragma once

#include <string>

#include "report/run_timeline.hpp"

namespace npu_run {

std::string html_report(const RunTimeline& run);

}  // namespace npu_run
