// libFuzzer target: what a launch over ssh reads that others wrote. The first byte picks the
// reader: a host's control line, a preamble (what a host-agent reads from its stdin), a
// hostfile, --hosts with --include/--exclude, an env file. Bad input is refused with the
// reader's own error; anything else (a crash, a hang, unbounded memory) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "basics/env_file.hpp"
#include "basics/usage_error.hpp"
#include "cluster/host_slots.hpp"
#include "remote/control_lines.hpp"
#include "remote/preamble.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 5) {
      case 0:
        if (const auto line = npu_run::parse_control(text)) {
          // What parses formats back to a line that parses the same.
          const std::string again = npu_run::format_control(*line);
          const auto reparsed = npu_run::parse_control(again.substr(0, again.size() - 1));
          if (!reparsed || reparsed->kind != line->kind || reparsed->host != line->host)
            std::abort();
        }
        (void)npu_run::parse_stop(text);
        break;
      case 1: {
        const npu_run::Preamble p = npu_run::parse_preamble(text);
        const std::string line = npu_run::format_preamble(p);
        if (npu_run::parse_preamble(line.substr(0, line.size() - 1)).env != p.env) std::abort();
        break;
      }
      case 2:
        for (const auto& host : npu_run::parse_hostfile(text, "fuzz"))
          if (host.name.empty()) std::abort();
        break;
      case 3: {
        // --hosts, then the filter after the first newline (include or exclude by a bit).
        const size_t newline = text.find('\n');
        const auto hosts = npu_run::parse_hosts_list(text.substr(0, newline), "--hosts");
        const std::string_view filter =
            newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
        const bool include = (data[0] & 0x80) != 0;
        for (const auto& host : npu_run::filter_hosts(hosts, include ? filter : "",
                                                      include ? "" : filter, 8)) {
          if (!host.devices.empty() && *host.slots != static_cast<int>(host.devices.size()))
            std::abort();
        }
        break;
      }
      default:
        for (const auto& [name, value] : npu_run::parse_env_file(text, "fuzz"))
          if (!npu_run::is_variable_name(name)) std::abort();
        break;
    }
  } catch (const npu_run::UsageError&) {
  } catch (const std::runtime_error&) {  // parse_preamble's refusals
  }
  return 0;
}
