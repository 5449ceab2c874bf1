// The job's timeline, report and metrics in real runs: a late agent blamed by name in node 0's
// log, the timeline and `npu_run status`; a job with two restarts whose report (opened in
// headless Chromium from a file:// URL) shows the figures its timeline gives, and fetches
// nothing; and --metrics-port scraped with curl, checked by promtool, its counters moving.
#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "report/html_report.hpp"
#include "report/job_figures.hpp"
#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace test_timeline_report {

using namespace npu_run::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// The one run directory under `log_dir` with a timeline (node 0's).
std::string run_directory(const std::string& log_dir) {
  std::vector<fs::path> runs;
  for (const auto& entry : fs::directory_iterator(log_dir)) {
    if (fs::exists(entry.path() / "timeline.json")) runs.push_back(entry.path());
  }
  REQUIRE(runs.size() == 1);
  return runs.front().string();
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Beats `steps` times, 20 ms apart; rank 1 of each restart below `fail_below` then raises, a
// different exception each time (the same one twice is a broken script: the job would stop).
std::string beating_script(TempDir& dir, int steps, int fail_below) {
  const std::string path = dir.file("beat.py");
  std::ofstream(path) << "import os, socket, sys, time\n"
                         "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
                         "for step in range("
                      << steps
                      << "):\n"
                         "    s.sendto(f'step {step} loss 0.1'.encode(), "
                         "os.environ['NPU_RUN_PROGRESS'])\n"
                         "    time.sleep(0.02)\n"
                         "restart = int(os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
                         "if restart < "
                      << fail_below
                      << " and os.environ['RANK'] == '1':\n"
                         "    raise [ValueError, KeyError, OSError][restart % 3]('restart ' + "
                         "str(restart))\n";
  return path;
}

// The requests a page made, from Chromium's NetLog: those with an initiator that is an origin
// (the browser's own requests, updates and the like, say "not an origin"; a file:// page's say
// "null"), other than file:// itself.
std::vector<std::string> page_requests(const std::string& net_log) {
  std::vector<std::string> urls;
  const nlohmann::json log = nlohmann::json::parse(read_text(net_log));
  for (const nlohmann::json& event : log.value("events", nlohmann::json::array())) {
    const nlohmann::json params = event.value("params", nlohmann::json::object());
    const std::string url = params.value("url", "");
    const std::string initiator = params.value("initiator", "not an origin");
    if (!url.empty() && url.rfind("file:", 0) != 0 && initiator != "not an origin")
      urls.push_back(url);
  }
  return urls;
}

}  // namespace

TEST_CASE(
    "timeline: a 4-node job whose last agent starts 3 s late names it, in the log, "
    "the timeline and npu_run status",
    "[integration][timeline]") {
  TempDir dir;
  const int port = unused_port();
  const std::string logs = dir.file("logs");
  fs::create_directory(logs);
  const std::string tmp0 = dir.file("tmp0");
  fs::create_directory(tmp0);
  std::vector<std::unique_ptr<NpuRunProcess>> nodes;
  for (int i = 0; i < 3; ++i) {
    EnvOverrides env{{kHostNameVariable, "host-" + std::to_string(i)}};
    if (i == 0) env["TMPDIR"] = tmp0;
    nodes.push_back(start_node(port, 4, 1, "sleep 3",
                               {"--node-rank", std::to_string(i), "--log-dir", logs}, env));
  }
  ::usleep(3'000'000);
  nodes.push_back(
      start_node(port, 4, 1, "sleep 3", {"--node-rank", "3"}, {{kHostNameVariable, "host-late"}}));
  nodes[0]->wait_for_output("the last node to join", 1, 30s, true);
  const Finished status = run_npu_run({"status", "--json"}, {{"TMPDIR", tmp0}}, 30s);
  std::vector<NpuRunProcess*> all;
  for (auto& n : nodes) all.push_back(n.get());
  const std::vector<Finished> done = NpuRunProcess::wait_all(all, 60s);
  for (const Finished& f : done) REQUIRE(f.exit_code == 0);
  INFO(done[0].err);
  const std::regex line(
      "round 0 formed in [0-9.]+ s: the last node to join was node 3 \\(host-late\\), "
      "[0-9.]+ s after the first; its agent started ([0-9.]+) s late");
  std::smatch m;
  REQUIRE(std::regex_search(done[0].err, m, line));
  const double late = std::stod(m[1]);
  CHECK(late >= 2.5);
  CHECK(late <= 6.0);
  INFO(status.out << status.err);
  REQUIRE(status.exit_code == 0);
  CHECK_THAT(nlohmann::json::parse(status.out).value("blame", ""), Contains("node 3 (host-late)"));
  const nlohmann::json timeline = read_json(run_directory(logs) + "/timeline.json");
  const nlohmann::json blame = timeline["rounds"][0]["blame"];
  CHECK(blame["cause"] == "late_start");
  CHECK(blame["last_node"] == 3);
  CHECK(blame["last_host"] == "host-late");
  CHECK(blame["nodes"] == 4);
  for (const auto& n : nodes) require_no_strays(*n);
}

TEST_CASE(
    "report: a job with two restarts, its figures as the timeline gives them, seen in "
    "headless Chromium from a file:// URL without a network request",
    "[integration][timeline][report][kernel-neutral]") {
  TempDir dir;
  const std::string logs = dir.file("logs");
  fs::create_directory(logs);
  NpuRunProcess job({"--nproc-per-node", "2", "--max-restarts", "2", "--log-dir", logs, "--report",
                     "--rdzv-id", "nightly", beating_script(dir, 40, 2)});
  const Finished f = job.wait(120s);
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  require_no_strays(job);
  const std::string run = run_directory(logs);
  const npu_run::RunTimeline timeline = npu_run::read_run_timeline(run + "/timeline.json");
  const npu_run::JobFigures figures = npu_run::job_figures(timeline);
  CHECK(figures.restarts == 2);
  REQUIRE(figures.restart_costs.size() == 2);
  CHECK(figures.rounds.size() == 3);
  CHECK(figures.goodput > 0.2);
  CHECK(figures.goodput < 1.0);
  CHECK(figures.exit_code == 0);
  const std::string page = read_text(run + "/report.html");
  CHECK(page == npu_run::html_report(timeline));  // --report wrote what `npu_run report` makes
  const Finished again = run_npu_run({"report", run, "-o", dir.file("again.html")});
  REQUIRE(again.exit_code == 0);
  CHECK(read_text(dir.file("again.html")) == page);
  // Headless Chromium: a screenshot at 1,280 px and at a phone's 390 px, the page's text, and
  // a log of every network request it made.
  const std::string url = "file://" + run + "/report.html";
  // Chromium's own background requests (updates, sync, accounts) are turned off, and no name
  // resolves: nothing can leave this host, and what the page asked for would still be logged.
  const std::string chromium =
      "timeout 90 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
      "--no-first-run --disable-background-networking --disable-component-update "
      "--disable-sync --disable-default-apps --disable-client-side-phishing-detection "
      "--disable-features=Translate,OptimizationHints,MediaRouter,SpellcheckService "
      "'--host-resolver-rules=MAP * ~NOTFOUND' --user-data-dir=" +
      dir.file("profile") + " ";
  auto [shot_rc, shot_out] =
      shell(chromium + "--window-size=1280,1600 --screenshot=" + dir.file("wide.png") + " " + url);
  INFO(shot_out);
  REQUIRE(fs::file_size(dir.file("wide.png")) > 10'000);
  shell(chromium + "--window-size=390,2400 --screenshot=" + dir.file("phone.png") + " " + url);
  CHECK(fs::file_size(dir.file("phone.png")) > 10'000);
  auto [dom_rc, dom] =
      shell(chromium + "--log-net-log=" + dir.file("net.json") + " --dump-dom " + url, true);
  REQUIRE(dom_rc == 0);
  CHECK_THAT(dom, Contains("npu_run report: nightly"));
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  CHECK_THAT(dom, Contains(std::string("0 ") + host));
  CHECK_THAT(dom, Contains("ValueError at beat.py:8 in &lt;module&gt;"));
  CHECK_THAT(dom, Contains("KeyError at beat.py:8 in &lt;module&gt;"));
  CHECK_THAT(dom, Contains(fmt::format("{:.1f} %", figures.goodput * 100)));
  CHECK_THAT(dom, Contains("time to first step"));
  const std::vector<std::string> requests = page_requests(dir.file("net.json"));
  INFO(fmt::format("{}", fmt::join(requests, "\n")));
  CHECK(requests.empty());
  // The same look finds a page's request where there is one.
  std::ofstream(dir.file("fetching.html")) << "<img src=\"http://example.invalid/x.png\">";
  shell(chromium + "--log-net-log=" + dir.file("control.json") + " --dump-dom file://" +
            dir.file("fetching.html"),
        true);
  CHECK(page_requests(dir.file("control.json")) ==
        std::vector<std::string>{"http://example.invalid/x.png"});
}

TEST_CASE("metrics: curl during a job gets what promtool accepts, and the counters move",
          "[integration][timeline][metrics][kernel-neutral]") {
  TempDir dir;
  const int port = unused_port();
  NpuRunProcess job({"--nproc-per-node", "2", "--max-restarts", "1", "--metrics-port",
                     "127.0.0.1:" + std::to_string(port), beating_script(dir, 150, 1)});
  const std::string curl =
      "curl -sS --max-time 5 http://127.0.0.1:" + std::to_string(port) + "/metrics";
  auto scrape_until = [&](const std::string& needle) {
    const auto until = std::chrono::steady_clock::now() + 30s;
    std::string text;
    while (std::chrono::steady_clock::now() < until) {
      auto [rc, out] = shell(curl);
      text = out;
      if (rc == 0 && out.find(needle) != std::string::npos) return text;
      ::usleep(100'000);
    }
    FAIL("no scrape held '" << needle << "'; the last: " << text);
    return text;
  };
  // Prometheus' own checker of the text format; its complaints, or "" when it accepts.
  auto promtool_complaints = [&](const std::string& text, const std::string& name) {
    std::ofstream(dir.file(name)) << text;
    auto [rc, out] = shell("promtool check metrics < " + dir.file(name));
    return rc == 0 ? std::string() : "promtool exited " + std::to_string(rc) + ": " + out;
  };
  const std::string first = scrape_until("npu_run_rounds_total 1\n");
  INFO(first);
  CHECK(promtool_complaints(first, "first.txt").empty());
  CHECK_THAT(first, Contains("npu_run_workers_alive 2"));
  CHECK_THAT(first, Contains("npu_run_restarts_total{class=\"other\"} 0"));
  const std::string second = scrape_until("npu_run_rounds_total 2\n");
  INFO(second);
  CHECK(promtool_complaints(second, "second.txt").empty());
  CHECK_THAT(second, Contains("npu_run_restarts_total{class=\"other\"} 1"));
  CHECK_THAT(second, Contains("npu_run_phase_seconds{phase=\"start\"}"));
  // Only GET: anything else is refused with 405.
  auto [post_rc, post] = shell(
      "curl -sS -o /dev/null -w '%{http_code}' -X POST --max-time 5 "
      "http://127.0.0.1:" +
      std::to_string(port) + "/metrics");
  CHECK(post == "405");
  const Finished f = job.wait(60s);
  CHECK(f.exit_code == 0);
  require_no_strays(job);
}

}  // namespace test_timeline_report
