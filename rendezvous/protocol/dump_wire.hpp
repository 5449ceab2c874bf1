// `npu_run status --dump` on the wire (rendezvous/protocol/dump_messages.hpp): the records an agent
// sends ("records"), what the server asks for ("collect"), and the dump in a status answer, as
// `npu_run status --dump --json` prints it too. Every field checked and bounded.
#pragma once

#include "rendezvous/protocol/json_fields.hpp"

namespace npu_run::rdzv {

json records_json(const RecordsCollected& m);
RecordsCollected records_from(const Fields& f);
json collect_json(const CollectRecords& m);
CollectRecords collect_from(const Fields& f);
json dump_json(const JobDump& d);
JobDump dump_from(const json& j);

}  // namespace npu_run::rdzv
