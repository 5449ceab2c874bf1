#include "doctor/doctor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ascend/hccl_ports.hpp"
#include "ascend/hccn_conf.hpp"
#include "basics/enum_table.hpp"
#include "basics/text.hpp"
#include "basics/usage_error.hpp"
#include "devices/device_discovery.hpp"
#include "devices/device_list.hpp"
#include "etcd/member_probe.hpp"
#include "etcd/tls_context.hpp"
#include "net/address_probe.hpp"
#include "net/kernel_limits.hpp"

namespace npu_run {

namespace {

using Status = CheckResult::Status;

// Descriptors the rendezvous server needs beyond one per node (logs, pipes, workers).
constexpr long kDescriptorMargin = 1024;

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

CheckResult queue_check(const DoctorSettings& s, const net::KernelQueue& queue) {
  CheckResult r{queue.key, Status::kOk, "", ""};
  if (!queue.value) {
    r.status = Status::kWarn;
    r.detail = fmt::format("cannot read it under {}", s.proc_root);
    return r;
  }
  if (*queue.value >= s.nnodes) {
    r.detail = fmt::format("{}, enough for {} node{} connecting at once", *queue.value, s.nnodes,
                           s.nnodes == 1 ? "" : "s");
    return r;
  }
  r.status = Status::kWarn;
  r.detail = fmt::format(
      "{}, fewer than the {} nodes that connect to the rendezvous at once: connections are dropped "
      "and retried, and the job starts slower",
      *queue.value, s.nnodes);
  r.fix = net::sysctl_fix({queue}, s.nnodes);
  return r;
}

CheckResult reserved_ports_check(const DoctorSettings& s) {
  CheckResult r{"net.ipv4.ip_local_reserved_ports", Status::kOk, "", ""};
  const PortRange hccl = hccl_ports(s.env);
  const int base = hccl.first;
  const int last = hccl.last;
  const auto reserved = parse_port_ranges(
      read_text(s.proc_root + "/sys/net/ipv4/ip_local_reserved_ports").value_or(""));
  auto covered = [&](int port) {
    return std::any_of(reserved.begin(), reserved.end(),
                       [&](const auto& span) { return port >= span.first && port <= span.second; });
  };
  int covered_count = 0;
  while (covered_count < kHcclPortCount && covered(base + covered_count)) ++covered_count;
  const auto range =
      parse_port_ranges(read_text(s.proc_root + "/sys/net/ipv4/ip_local_port_range").value_or(""));
  // ip_local_port_range is "low<TAB>high"; parse_port_ranges reads it as two single ports.
  const int low = !range.empty() ? range.front().first : 32768;
  const int high = range.size() >= 2 ? range[1].first : 60999;
  const std::string ports = fmt::format("{}-{}", base, last);
  if (covered_count == kHcclPortCount) {
    r.detail = fmt::format("HCCL's host ports {} are reserved", ports);
    return r;
  }
  if (last < low || base > high) {
    r.detail =
        fmt::format("HCCL's host ports {} lie outside the ephemeral range {}-{}", ports, low, high);
    return r;
  }
  r.status = Status::kWarn;
  r.detail =
      covered_count >= 16
          ? fmt::format(
                "only {}-{} of HCCL's host ports {} are reserved; newer CANN versions use 32 ports",
                base, base + covered_count - 1, ports)
          : fmt::format(
                "HCCL's host ports {} are not reserved and lie in the ephemeral range {}-{}: an "
                "outgoing "
                "connection can take one and HCCL then fails to start",
                ports, low, high);
  std::string value = ports;
  if (const auto existing = read_text(s.proc_root + "/sys/net/ipv4/ip_local_reserved_ports");
      existing && !existing->empty()) {
    value = *existing + "," + ports;
  }
  r.fix = fmt::format("sysctl -w net.ipv4.ip_local_reserved_ports={}", value);
  return r;
}

CheckResult open_files_check(const DoctorSettings& s) {
  CheckResult r{"open files", Status::kOk, "", ""};
  long soft = -1;
  long hard = -1;
  std::ifstream limits(s.proc_root + "/self/limits");
  for (std::string line; std::getline(limits, line);) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream fields(line.substr(14));
    std::string soft_text, hard_text;
    fields >> soft_text >> hard_text;
    soft = soft_text == "unlimited"
               ? 1L << 30
               : static_cast<long>(parse_integer(soft_text, 0, 1LL << 40).value_or(-1));
    hard = hard_text == "unlimited"
               ? 1L << 30
               : static_cast<long>(parse_integer(hard_text, 0, 1LL << 40).value_or(-1));
  }
  if (hard < 0) {
    r.status = Status::kWarn;
    r.detail = fmt::format("cannot read the open-files limit from {}/self/limits", s.proc_root);
    return r;
  }
  const long need = s.nnodes + kDescriptorMargin;
  if (hard >= need) {
    r.detail = fmt::format(
        "soft {}, hard {}: the rendezvous server raises its soft limit to the hard one, enough for "
        "{} node{}",
        soft, hard, s.nnodes, s.nnodes == 1 ? "" : "s");
    return r;
  }
  r.status = hard < s.nnodes ? Status::kFail : Status::kWarn;
  r.detail =
      fmt::format("hard limit {} open files; the rendezvous server of {} nodes needs about {}",
                  hard, s.nnodes, need);
  r.fix = fmt::format(
      "add '* hard nofile {}' to /etc/security/limits.conf (or LimitNOFILE={} in a systemd unit) "
      "and "
      "log in again",
      std::max<long>(65536, need), std::max<long>(65536, need));
  return r;
}

CheckResult master_port_check(const DoctorSettings& s) {
  const std::string name = fmt::format("master port {}:{}", s.master_addr, s.master_port);
  CheckResult r{name, Status::kOk, "", ""};
  if (s.other_node_rank) {
    r.detail = fmt::format("checked by node 0; this is node {} of the job", *s.other_node_rank);
    return r;
  }
  const net::ResolvedEndpoints resolved = net::resolve_endpoints(s.master_addr, s.master_port);
  if (!resolved.error.empty()) {
    r.status = Status::kFail;
    r.detail = fmt::format("cannot resolve '{}': {}", s.master_addr, resolved.error);
    r.fix = "give --master-addr as an IP address, or fix name resolution";
    return r;
  }
  const net::BindProbe probe = net::probe_bind(resolved.endpoints);
  switch (probe.outcome) {
    case net::BindOutcome::kFree:
      r.detail = "free: node 0's agent can host the rendezvous here";
      return r;
    case net::BindOutcome::kInUse:
      r.status = Status::kFail;
      r.detail = fmt::format("port {} is already in use on {}", s.master_port,
                             probe.endpoint.address().to_string());
      r.fix =
          fmt::format("see who holds it: ss -ltnp 'sport = :{}'; or choose another --master-port",
                      s.master_port);
      return r;
    case net::BindOutcome::kNotLocal:
      break;
  }
  r.detail =
      fmt::format("{} is not an address of this host: the rendezvous runs there, check that host",
                  s.master_addr);
  return r;
}

CheckResult devices_check(const DiscoveredDevices& found) {
  CheckResult r{"devices", Status::kOk, found.description, ""};
  if (found.kind == DeviceKind::kNone) {
    r.status = Status::kWarn;
    r.detail = found.description + "; workers will run without accelerators";
    r.fix = "check the driver (ls /dev/davinci*, npu-smi info) or run on CPU";
  } else {
    r.detail += fmt::format(": {}", format_device_list(found.physical_ids));
  }
  return r;
}

CheckResult hccn_check(const DoctorSettings& s, const DiscoveredDevices& found) {
  CheckResult r{"hccn.conf", Status::kOk, "", ""};
  if (found.kind != DeviceKind::kAscend) {
    r.detail = "no Ascend NPUs here: device addresses are not needed";
    return r;
  }
  std::map<int, std::string> ips;
  try {
    ips = read_hccn_conf(s.hccn_conf);
  } catch (const UsageError& e) {
    const bool missing = std::string(e.what()).rfind("cannot read", 0) == 0;
    r.status = missing ? Status::kWarn : Status::kFail;
    r.detail = e.what();
    r.fix = missing ? "set each NPU's address with hccn_tool -i <device> -ip -s address <ip> "
                      "netmask <mask>, which "
                      "records it in /etc/hccn.conf"
                    : fmt::format("correct the line in {}", s.hccn_conf);
    return r;
  }
  const std::vector<std::string> missing = missing_addresses(ips, found.physical_ids);
  if (missing.empty()) {
    r.detail = fmt::format("{} has an address for each of the {} NPUs", s.hccn_conf,
                           found.physical_ids.size());
    return r;
  }
  r.status = Status::kWarn;
  r.detail =
      fmt::format("{} lacks {}: multi-server HCCL jobs and rank tables need every NPU's address",
                  s.hccn_conf, fmt::join(missing, ", "));
  r.fix = "hccn_tool -i <device> -ip -s address <ip> netmask <mask>";
  return r;
}

constexpr EnumTable<Status, 3> kStatusLabels(
    {{{Status::kOk, "ok"}, {Status::kWarn, "warn"}, {Status::kFail, "fail"}}});

// One check a member; a job survives a minority silent, so only a silent majority fails.
std::vector<CheckResult> etcd_member_checks(const std::string& endpoints) {
  etcd::Settings settings;
  settings.endpoints = etcd::parse_endpoints(endpoints);
  const bool tls = std::any_of(settings.endpoints.begin(), settings.endpoints.end(),
                               [](const etcd::Endpoint& member) { return member.tls; });
  if (tls) settings.tls = etcd::make_tls_context({});
  const auto probes = etcd::probe_members(settings, std::chrono::seconds(2));
  const auto silent = std::count_if(probes.begin(), probes.end(),
                                    [](const etcd::MemberProbe& p) { return !p.answers; });
  const bool quorum_lost = static_cast<size_t>(silent) * 2 >= probes.size();
  std::vector<CheckResult> results;
  for (const etcd::MemberProbe& p : probes) {
    CheckResult r{"etcd member " + p.member, Status::kOk, "answers: " + p.detail, ""};
    if (p.leader) r.detail += " (etcd's leader)";
    if (!p.answers) {
      r.status = quorum_lost ? Status::kFail : Status::kWarn;
      r.detail = "does not answer: " + p.detail;
      r.fix = fmt::format(
          "check --rdzv-endpoint and that etcd listens on {} (etcdctl "
          "--endpoints {} endpoint status)",
          p.member, p.member);
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace

std::vector<std::pair<int, int>> parse_port_ranges(const std::string& text) {
  std::vector<std::pair<int, int>> ranges;
  std::string normalized = text;
  std::replace(normalized.begin(), normalized.end(), '\t', ',');
  std::replace(normalized.begin(), normalized.end(), ' ', ',');
  for (std::string_view item : split(normalized, ',')) {
    if (item.empty()) continue;
    const auto parts = split(item, '-');
    const auto first = parse_integer(parts.front(), 0, 65535);
    const auto last = parse_integer(parts.back(), 0, 65535);
    if (first && last && parts.size() <= 2 && *first <= *last) ranges.emplace_back(*first, *last);
  }
  return ranges;
}

std::vector<CheckResult> run_doctor(const DoctorSettings& s) {
  const DiscoveredDevices found = discover_devices(s.env);
  std::vector<CheckResult> results;
  for (const net::KernelQueue& queue : net::kernel_queues(s.proc_root))
    results.push_back(queue_check(s, queue));
  for (CheckResult r : {reserved_ports_check(s), open_files_check(s), master_port_check(s),
                        devices_check(found), hccn_check(s, found)}) {
    results.push_back(std::move(r));
  }
  if (!s.etcd_endpoints.empty()) {
    for (CheckResult r : etcd_member_checks(s.etcd_endpoints)) results.push_back(std::move(r));
  }
  return results;
}

std::string format_doctor_text(const DoctorSettings& s, const std::vector<CheckResult>& results) {
  std::string out = fmt::format("npu_run doctor: this host, for a job of {} node{}\n", s.nnodes,
                                s.nnodes == 1 ? "" : "s");
  int warnings = 0;
  int failures = 0;
  for (const CheckResult& r : results) {
    warnings += r.status == Status::kWarn;
    failures += r.status == Status::kFail;
    out += fmt::format("  [{:^4}] {}: {}\n", kStatusLabels.name(r.status), r.name, r.detail);
    if (!r.fix.empty()) out += fmt::format("         fix: {}\n", r.fix);
  }
  out += fmt::format("{} warning{}, {} failure{}\n", warnings, warnings == 1 ? "" : "s", failures,
                     failures == 1 ? "" : "s");
  return out;
}

std::string format_doctor_json(const DoctorSettings& s, const std::vector<CheckResult>& results) {
  nlohmann::json checks = nlohmann::json::array();
  int warnings = 0;
  int failures = 0;
  for (const CheckResult& r : results) {
    warnings += r.status == Status::kWarn;
    failures += r.status == Status::kFail;
    checks.push_back({{"name", r.name},
                      {"status", kStatusLabels.name(r.status)},
                      {"detail", r.detail},
                      {"fix", r.fix}});
  }
  return nlohmann::json{{"nnodes", s.nnodes},
                        {"checks", checks},
                        {"warnings", warnings},
                        {"failures", failures}}
             .dump(2) +
         "\n";
}

int doctor_exit_code(const std::vector<CheckResult>& results) {
  return std::any_of(results.begin(), results.end(),
                     [](const CheckResult& r) { return r.status == Status::kFail; })
             ? 1
             : 0;
}

}  // namespace npu_run
