// --timeline, --report and --metrics-port: where node 0 writes the job's records, and where
// every agent serves its metrics; and how much memory and storage the snapshots may take.
#include <fmt/format.h>

#include "basics/usage_error.hpp"
#include "cli/host_probe.hpp"
#include "cli/resolvers.hpp"
#include "cli/value_parsers.hpp"

namespace npu_run {

namespace {

// The directory a file is to be written in must be there: found now, not at the job's end.
void require_parent_directory(const std::string& file, const std::string& source, HostProbe& host) {
  if (file.empty()) throw UsageError(fmt::format("{} '': give the file to write", source));
  const size_t slash = file.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : file.substr(0, slash == 0 ? 1 : slash);
  if (host.is_directory(file)) {
    throw UsageError(fmt::format("{} '{}' is a directory; give a file, e.g. {}/timeline.json",
                                 source, file, file));
  }
  if (!host.is_directory(dir)) {
    throw UsageError(fmt::format(
        "{} '{}': the directory {} does not exist; create it first or choose another file", source,
        file, dir));
  }
}

void resolve_metrics(const RecordFlags& f, RecordsConfig& records) {
  const std::string& text = *f.metrics_port;
  if (text.empty()) return;
  const std::string source = f.metrics_port.source();
  if (text.find(':') == std::string::npos) {
    records.metrics_port = parse_port(text, source);
  } else {
    const Endpoint ep = parse_endpoint(text, source);
    if (!ep.port) throw UsageError(fmt::format("{} '{}': give ADDR:PORT or PORT", source, text));
    records.metrics_addr = ep.host;
    records.metrics_port = *ep.port;
  }
  if (records.metrics_port == 0) {
    throw UsageError(fmt::format(
        "{} '{}': Prometheus must know the port to scrape; give one, e.g. 9464", source, text));
  }
}

}  // namespace

void resolve_records(const LaunchInputs& in, const OutputConfig& output, RecordsConfig& records) {
  const RecordFlags& f = in.options.records;
  if (f.timeline.given()) {
    require_parent_directory(*f.timeline, f.timeline.source(), in.host);
    records.timeline_file = in.host.absolute(*f.timeline);
  }
  records.report = *f.report;
  if (records.report && !records.timeline_file && !output.log_dir) {
    throw UsageError(fmt::format(
        "{}: where would report.html go? Give --log-dir DIR (it goes in the run's directory) or "
        "--timeline FILE (it goes beside it)",
        f.report.source()));
  }
  resolve_metrics(f, records);
}

void resolve_snapshots(const LaunchInputs& in, SnapshotConfig& snapshots) {
  const SnapshotFlags& f = in.options.snapshots;
  const auto [bytes, share] = parse_memory_budget(*f.memory, f.memory.source());
  if (share > 0)
    snapshots.share = share;
  else
    snapshots.bytes = bytes;
  if (*f.keep < 0 || *f.keep > 1'000'000) {
    throw UsageError(fmt::format("{} {}: expected a count of files, 0 (keep all) to 1000000",
                                 f.keep.source(), *f.keep));
  }
  snapshots.keep = *f.keep;
}

}  // namespace npu_run
