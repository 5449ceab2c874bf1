// What the rendezvous state machine sends, picked out for a test: the first message of a type
// addressed to one agent.
#pragma once

#include <algorithm>
#include <vector>

#include "rendezvous/state/state.hpp"

namespace npu_run::testing {

template <typename T>
const T* message_to(const std::vector<rdzv::Outgoing>& out, rdzv::ClientId id) {
  for (const rdzv::Outgoing& o : out) {
    if (std::find(o.to.begin(), o.to.end(), id) != o.to.end()) {
      if (const T* m = std::get_if<T>(&o.message)) return m;
    }
  }
  return nullptr;
}

}  // namespace npu_run::testing
