// What a run of python/npu_run_preflight.py answered, as the rendezvous takes it: its one JSON
// line, or why there is none (it raised, was killed at its bound, or never started).
#pragma once

#include "health/tool_run.hpp"
#include "rendezvous/protocol/probe_messages.hpp"

namespace npu_run {

rdzv::ProbeReport read_probe_answer(const ToolRun& run);

}  // namespace npu_run
