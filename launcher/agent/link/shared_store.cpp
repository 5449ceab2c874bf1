#include "agent/link/shared_store.hpp"

#include <spdlog/spdlog.h>

namespace npu_run {

void share_port_with_store(rdzv::ServerOptions& options, store::StoreServer& store) {
  // A connection silent through the handshake deadline is handed over then; the store's own
  // rule for silence (counted from the same accept) closes it at once.
  store.set_silent_timeout(options.handshake_timeout);
  options.other_protocol = [&store](const std::shared_ptr<net::StreamConnection>& connection,
                                    const std::string& first_bytes) {
    store.adopt(connection, first_bytes);
  };
  options.round_formed = [&store](uint64_t round) {
    if (store.keys() > 0)
      spdlog::debug("workers' store: round {} starts with a fresh key space ({} keys dropped)",
                    round, store.keys());
    store.clear();
  };
}

}  // namespace npu_run
