// `npu_run report RUN_DIR`: the page of a job from its timeline (report/html_report.hpp).
// RUN_DIR is the run's directory under --log-dir (its timeline.json), the --log-dir itself (its
// newest run with a timeline), or a timeline file (--timeline FILE); the page goes beside the
// timeline as report.html unless -o names another file.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "basics/usage_error.hpp"
#include "commands/commands.hpp"
#include "report/html_report.hpp"
#include "report/run_timeline.hpp"

namespace npu_run {

namespace {

namespace fs = std::filesystem;

// The newest <dir>/*/timeline.json, or "".
std::string newest_run_timeline(const fs::path& dir) {
  std::error_code ec;
  fs::path newest;
  fs::file_time_type newest_time{};
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const fs::path candidate = entry.path() / "timeline.json";
    const auto time = fs::last_write_time(candidate, ec);
    if (ec) continue;
    if (newest.empty() || time > newest_time) {
      newest = candidate;
      newest_time = time;
    }
  }
  return newest.string();
}

std::string timeline_path(const std::string& given) {
  std::error_code ec;
  if (!fs::exists(given, ec)) {
    throw UsageError(
        fmt::format("npu_run report: {} does not exist; give the run's directory "
                    "(under --log-dir) or its timeline file",
                    given));
  }
  if (!fs::is_directory(given, ec)) return given;
  const fs::path own = fs::path(given) / "timeline.json";
  if (fs::exists(own, ec)) return own.string();
  const std::string newest = newest_run_timeline(given);
  if (newest.empty()) {
    throw UsageError(fmt::format(
        "npu_run report: {} holds no timeline.json, nor does any run directory in it; a job "
        "writes one with --log-dir DIR or --timeline FILE",
        given));
  }
  std::cerr << fmt::format("npu_run report: the newest run in {}: {}\n", given, newest);
  return newest;
}

std::string default_output(const std::string& timeline) {
  return (fs::path(timeline).parent_path() / "report.html").string();
}

int write_report(const std::string& given, std::string output) {
  const std::string timeline = timeline_path(given);
  RunTimeline run;
  try {
    run = read_run_timeline(timeline);
  } catch (const std::runtime_error& e) {
    throw UsageError(fmt::format("npu_run report: {}", e.what()));
  }
  if (output.empty()) output = default_output(timeline);
  const std::string page = html_report(run);
  std::ofstream out(output, std::ios::trunc);
  out << page;
  out.close();
  if (!out) {
    throw UsageError(
        fmt::format("npu_run report: cannot write {}; give another file with -o", output));
  }
  std::cout << fmt::format("{} ({} KB, {} events)\n", output, (page.size() + 1023) / 1024,
                           run.events.size());
  return 0;
}

}  // namespace

int report_command(const std::vector<std::string>& args, const EnvMap& /*env*/) {
  CLI::App app(
      "Write one self-contained HTML page of a job from its timeline: the rounds per node, the "
      "beats, the root causes, the health verdicts, the time to first step and the goodput",
      "npu_run report");
  std::string run;
  std::string output;
  app.add_option("RUN_DIR", run,
                 "The run's directory under --log-dir, the --log-dir (its newest run), or a "
                 "--timeline file")
      ->required();
  app.add_option("-o,--output", output, "The page to write (default: report.html beside it)");
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  return run_guarded([&] { return write_report(run, output); });
}

}  // namespace npu_run
