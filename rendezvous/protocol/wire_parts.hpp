// The parts both directions of the protocol carry: a node's description, a failure report, a
// rank's stack, and the names of the enums on the wire.
#pragma once

#include <nlohmann/json.hpp>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run::rdzv {

NLOHMANN_JSON_SERIALIZE_ENUM(Outcome, {{Outcome::kSucceeded, "succeeded"},
                                       {Outcome::kFailed, "failed"},
                                       {Outcome::kStopped, "stopped"}})
NLOHMANN_JSON_SERIALIZE_ENUM(Action, {{Action::kRestart, "restart"}, {Action::kFinish, "finish"}})
NLOHMANN_JSON_SERIALIZE_ENUM(FailureClass, {{FailureClass::kNone, "none"},
                                            {FailureClass::kInfrastructure, "infrastructure"},
                                            {FailureClass::kDeterministic, "deterministic"},
                                            {FailureClass::kOther, "other"}})

NLOHMANN_JSON_SERIALIZE_ENUM(RankRecord, {{RankRecord::kSignal, "signal"},
                                          {RankRecord::kServer, "server"},
                                          {RankRecord::kSilent, "silent"}})

// A server's answer: `fields`, its type, and "ok" (every answer but an error is ok).
nlohmann::json answer(const char* type, nlohmann::json fields);

nlohmann::json to_json(const NodeInfo& n);
NodeInfo node_from(const nlohmann::json& j);
nlohmann::json to_json(const FailureReport& r);
FailureReport failure_from(const nlohmann::json& j);
nlohmann::json to_json(const RankStack& s);
RankStack stack_from(const nlohmann::json& j);
nlohmann::json to_json(const RankBeat& b);
RankBeat beat_from(const nlohmann::json& j);
nlohmann::json to_json(const std::vector<RankBeat>& ranks);
std::vector<RankBeat> beats_from(const nlohmann::json& array);
// "off", "warn", "gate" (HealthMode lives outside this namespace, out of nlohmann's reach).
const char* health_mode_name(HealthMode mode);
HealthMode health_mode_from(const std::string& name);  // throws BadMessage for others
// A node's health verdict, every field checked and bounded (kMaxSentFindings findings).
nlohmann::json verdict_json(const NodeVerdict& v);
NodeVerdict verdict_from(const nlohmann::json& j);
// The device-plane pings: asked (PingRequest), answered (PingReport), judged (PingVerdict).
nlohmann::json to_json(const HealthFinding& f);
HealthFinding finding_from(const nlohmann::json& j);
nlohmann::json to_json(const std::vector<DevicePing>& pings);
std::vector<DevicePing> pings_from(const nlohmann::json& array);
nlohmann::json to_json(const std::vector<PingResult>& results);
std::vector<PingResult> ping_results_from(const nlohmann::json& array);

}  // namespace npu_run::rdzv
