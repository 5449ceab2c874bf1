// JobStatus on the wire ("status", the answer to a StatusQuery) and as `npu_run status --json`
// prints it.
#pragma once

#include "rendezvous/protocol/json_fields.hpp"

namespace npu_run::rdzv {

// With "type": "status" and "ok": true, as the server sends it.
json status_json(const JobStatus& status);
JobStatus status_from(const Fields& f);

}  // namespace npu_run::rdzv
