// Snapshots on the wire (rendezvous/protocol/snapshot_messages.hpp): what a join says its agent
// holds, and the restore point an assignment carries. Every field checked and bounded.
#pragma once

#include "rendezvous/protocol/json_fields.hpp"
#include "rendezvous/protocol/snapshot_messages.hpp"

namespace npu_run::rdzv {

json held_json(const HeldSnapshots& held);
HeldSnapshots held_from(const json& j);
json restore_json(const RestorePoint& point);
RestorePoint restore_from(const json& j);
json copy_peer_json(const CopyPeer& peer);
CopyPeer copy_peer_from(const json& j);
std::string_view restore_source_name(RestoreSource source);

}  // namespace npu_run::rdzv
