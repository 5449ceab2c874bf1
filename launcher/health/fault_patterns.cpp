#include "health/fault_patterns.hpp"

#include <algorithm>
#include <cctype>

namespace npu_run {

namespace {

// Only texts that name the node's hardware or its links. Left out on purpose: HCCL's EI0002
// (a collective timed out waiting for a peer: the peer's script may have died), EI0004 and
// EI0005 (a bad rank table, arguments that differ between ranks: the job's own mistakes), CUDA's
// "illegal memory access" (mostly a kernel's bug), and torch_npu's FORCE STOP (a stop asked for).
constexpr FaultPattern kPatterns[] = {
    // HCCL's error codes for link setup (CANN's error code list; REFERENCE.md 10).
    {"EI0006", "HCCL could not set up a link to a peer in time (EI0006)"},
    {"EI0016", "HCCL's link setup was refused: TLS or link settings differ (EI0016)"},
    // torch_npu's device fault labels (its deviceErrorMap) and the runtime's codes for them.
    {"UCE ERROR", "uncorrectable device memory error (UCE)"},
    {"HBM MULTI BIT ECC ERROR", "uncorrectable multi-bit ECC error in device memory"},
    {"SUSPECT MEM ERROR", "suspected device memory error"},
    {"HCCS LINK ERROR", "HCCS link error between devices"},
    {"HCCL OP RETRY FAILED", "HCCL could not retry a collective over a faulty link"},
    {"SUSPECT REMOTE ERROR", "a fault on a peer's device or link"},
    {"error code:507053", "uncorrectable device memory error (runtime 507053)"},
    {"error code:507054", "uncorrectable multi-bit ECC error (runtime 507054)"},
    // Device loss as drivers and frameworks word it.
    {"device lost", "the device was lost", true},
    {"heartbeat lost", "the device stopped answering (heartbeat lost)", true},
    {"uncorrectable ECC error", "uncorrectable ECC error (CUDA)", true},
    {"NVLink error", "NVLink error between devices", true},
};

bool contains(std::string_view line, const FaultPattern& p) {
  if (!p.any_case) return line.find(p.text) != std::string_view::npos;
  const auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  return std::search(line.begin(), line.end(), p.text.begin(), p.text.end(),
                     [&](char a, char b) { return lower(a) == lower(b); }) != line.end();
}

std::string trimmed(std::string_view line) {
  const auto first = line.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  line.remove_prefix(first);
  line = line.substr(0, line.find_last_not_of(" \t\r") + 1);
  return std::string(line.substr(0, kMaxFaultLine));
}

}  // namespace

std::span<const FaultPattern> fault_patterns() {
  return kPatterns;
}

std::optional<FaultMatch> find_fault(std::string_view text) {
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    for (const FaultPattern& p : kPatterns) {
      if (contains(line, p)) return FaultMatch{std::string(p.meaning), trimmed(line)};
    }
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return std::nullopt;
}

}  // namespace npu_run
