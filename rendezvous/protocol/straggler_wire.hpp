// Stragglers on the wire (rendezvous/protocol/straggler_messages.hpp): "sample", a node's ranks'
// entered collectives, each call a compact [group, seq, entered_ms] triple so that a window of a
// node's calls fits a client frame. Every field checked and bounded.
#pragma once

#include "rendezvous/protocol/json_fields.hpp"
#include "rendezvous/protocol/straggler_messages.hpp"

namespace npu_run::rdzv {

json sample_json(const CollectiveSample& m);
CollectiveSample sample_from(const Fields& f);

// Keeps `sample` within kMaxSampledCalls and kMaxSampleBytes as encoded, by giving up each rank's
// oldest calls in proportion: the newest are what the next window scores.
void fit_sample(CollectiveSample& sample);

}  // namespace npu_run::rdzv
