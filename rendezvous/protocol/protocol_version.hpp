// The rendezvous protocol's magic and version: a hello with another version is refused, naming
// both, so that agents of two npu_run releases never half-understand each other.
#pragma once

namespace npu_run::rdzv {

inline constexpr const char* kMagic = "npu_run-rdzv";
// 2: the token is proven by an HMAC challenge (challenge/auth) instead of sent in the hello.
// 3: an elastic job re-forms with "reform", no longer with a "stop" that is not a failure.
// 4: the join carries the job's command.
// 5: a session survives a broken connection: "resume"/"resumed", and heartbeats and their acks
//    say how many sequenced messages arrived (messages.hpp's Sequenced).
// 6: hung workers: "hang", reports with each rank's stack, heartbeats with the ranks' progress,
//    and "status" (npu_run status).
// 7: the health gate: joins say whether the agent gates on its node checks, "health" carries
//    its verdict, and a round forms only once every gating joiner's verdict is in.
// 8: verdicts carry the device addresses; "pings", "ping_report" and "ping_verdict" check the
//    device plane between the nodes before the round forms.
// 9: failures carry what the node saw (FailureEvidence, lost), decisions the restart
//    classification (FailureClass, why, the restarts charged); spares: joins carry --spares
//    and an affinity, "standby" and "dismissed".
// 10: the timeline: joins say when the agent started and dialled, reports carry the node's
//     events of the round, and status the blame of the last round formed.
// 11: `npu_run status --dump`: status may ask for a dump, "collect" and "records".
// 12: snapshots in the agents' memory: joins say what the agent holds, assignments the step the
//     round restores.
// 13: copies of the snapshots on the next node's agent: joins say which copies an agent holds
//     and its copy port, assignments where to copy and which ranks to fetch before loading.
// 14: joins say where the node sits in the network (NodeInfo::topology), which orders the seats.
// 15: the pre-flight probe (--preflight): "probe" asks a node for its part, "probe_report"
//     answers with its figures.
// 16: the straggler watch (--straggler): "sample" carries a node's ranks' entered collectives,
//     status the straggler named.
inline constexpr int kProtocolVersion = 16;

}  // namespace npu_run::rdzv
