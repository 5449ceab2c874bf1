// The agent's own log lines (spdlog, to stderr): every line names the node rank and host, so
// lines from many nodes gathered by a scheduler stay attributable.
#pragma once

#include <optional>
#include <string>

namespace npu_run {

// Installs the default logger; `level` as accepted by --log-level. `node_rank` is the one given
// (flag, Slurm...), shown until the rendezvous confirms it; unknown shows as "?".
void configure_agent_logging(const std::string& level, const std::string& host,
                             std::optional<int> node_rank);

// The launching npu_run of a launch over ssh is no node: its lines say "launcher".
void set_launcher_log_identity(const std::string& host);

// Updates the identity once the rendezvous has assigned the node rank.
void set_agent_log_identity(int node_rank, const std::string& host);

}  // namespace npu_run
