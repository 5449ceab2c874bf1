// Progress beats and the hang watch on a real io_context: datagrams to each rank's socket are
// that rank's beats (text kept, cleaned, cut), a rank silent past the timeout is reported once,
// a rank that never beat is not, and a straggler is found once the others exited 0.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "agent/round/hang_watch.hpp"
#include "agent/round/rank_beats.hpp"
#include "support/run_until.hpp"
#include "support/temp_dir.hpp"
#include "workers/proc_files.hpp"
#include "workers/progress_beats.hpp"
#include "workers/stack_dump.hpp"

namespace test_hang_watch {

using namespace npu_run;
using npu_run::testing::run_until;
using npu_run::testing::TempDir;
using namespace std::chrono_literals;

namespace {

void send_beat(const std::string& path, const std::string& text) {
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  ::sendto(fd, text.data(), text.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&address),
           sizeof address);
  ::close(fd);
}

// A node's beats and a watch over them, recording what it reports.
struct Watched {
  Watched(int ranks, HangPolicy policy)
      : beats(io, ranks), watch(io, beats, policy, [this](const Hang& h) { hangs.push_back(h); }) {
    watch.start();
  }
  boost::asio::io_context io;
  ProgressBeats beats;
  std::vector<Hang> hangs;
  HangWatch watch;
};

HangPolicy beat_timeout(std::chrono::milliseconds timeout) {
  HangPolicy policy;
  policy.timeout = timeout;
  return policy;
}

HangPolicy exit_timeout(std::chrono::milliseconds timeout) {
  HangPolicy policy;
  policy.exit_timeout = timeout;
  return policy;
}

}  // namespace

TEST_CASE("progress beats: every datagram is a beat of its rank, the last text kept and cleaned",
          "[unit][hangs]") {
  boost::asio::io_context io;
  std::string directory;
  {
    ProgressBeats beats(io, 2);
    directory = std::filesystem::path(beats.path(0)).parent_path();
    CHECK(beats.path(0) != beats.path(1));
    CHECK(beats.path(0).size() < 108);  // fits a socket address
    // The kernel queues few datagrams per socket (net.unix.max_dgram_qlen, 10 by default):
    // the agent reads as they come; here the test reads between bursts of 5.
    for (int i = 0; i < 100; ++i) {
      send_beat(beats.path(1), "step " + std::to_string(i));
      if (i % 5 == 4) {
        REQUIRE(run_until(
            io, [&] { return beats.rank(1).beats == static_cast<uint64_t>(i + 1); }, 5s));
      }
    }
    CHECK(beats.rank(1).text == "step 99");
    CHECK(beats.rank(0).beats == 0);
    send_beat(beats.path(0), "line\nbreak\x1b[31m" + std::string(500, 'x'));
    REQUIRE(run_until(
        io, [&] { return beats.rank(0).beats == 1; }, 5s));
    CHECK(beats.rank(0).text.substr(0, 15) == "line break [31m");
    CHECK(beats.rank(0).text.size() == kMaxBeatText);
    // As a report, the summary and npu_run status give them: ages from a moment, never < 0.
    const auto later = rank_beats(beats, beats.rank(1).last + 1500ms);
    REQUIRE(later.size() == 2);
    CHECK((later[1].local_rank == 1 && later[1].beats == 100 && later[1].text == "step 99"));
    CHECK(later[1].age_ms == 1500);
    CHECK(rank_beats(beats, beats.rank(1).last - 1s)[1].age_ms == 0);
    beats.new_attempt();
    CHECK(rank_beats(beats, std::chrono::steady_clock::now())[0].age_ms == -1);
    CHECK(beats.rank(1).beats == 0);
    CHECK(beats.rank(1).longest_interval > 0s);  // kept across attempts for auto
    CHECK(std::filesystem::exists(directory));
  }
  CHECK_FALSE(std::filesystem::exists(directory));  // removed with its sockets
}

TEST_CASE("progress beats: automatic beats count until the rank's first beat of its own",
          "[unit][hangs]") {
  boost::asio::io_context io;
  ProgressBeats beats(io, 1);
  const std::string automatic(1, kAutomaticBeatMark);
  send_beat(beats.path(0), automatic + "step 1");
  send_beat(beats.path(0), automatic + "step 2");
  REQUIRE(run_until(
      io, [&] { return beats.rank(0).beats == 2; }, 5s));
  CHECK(beats.rank(0).text == "step 2");  // the mark is not part of the text
  CHECK_FALSE(beats.rank(0).beats_itself);
  // A marked beat of the longest text keeps all of it.
  send_beat(beats.path(0), automatic + std::string(kMaxBeatText, 'y'));
  REQUIRE(run_until(
      io, [&] { return beats.rank(0).beats == 3; }, 5s));
  CHECK(beats.rank(0).text == std::string(kMaxBeatText, 'y'));
  // The script beats itself: its text, and from then on the automatic beats are dropped, in the
  // same batch as in later ones and in later attempts.
  send_beat(beats.path(0), "epoch 1 batch 7");
  send_beat(beats.path(0), automatic + "step 3");
  REQUIRE(run_until(
      io, [&] { return beats.rank(0).beats == 4; }, 5s));
  beats.collect_now();
  CHECK(beats.rank(0).beats == 4);
  CHECK(beats.rank(0).text == "epoch 1 batch 7");
  CHECK(beats.rank(0).beats_itself);
  beats.new_attempt();
  send_beat(beats.path(0), automatic + "step 1");
  send_beat(beats.path(0), "epoch 0 batch 1");
  REQUIRE(run_until(
      io, [&] { return beats.rank(0).beats == 1; }, 5s));
  beats.collect_now();
  CHECK(beats.rank(0).beats == 1);
  CHECK(beats.rank(0).text == "epoch 0 batch 1");
}

TEST_CASE("hang watch: a rank silent past the timeout is reported once, one that never beat is not",
          "[unit][hangs]") {
  Watched w(3, beat_timeout(300ms));
  send_beat(w.beats.path(1), "step 7");
  const auto started = std::chrono::steady_clock::now();
  REQUIRE(run_until(
      w.io, [&] { return !w.hangs.empty(); }, 5s));
  CHECK(std::chrono::steady_clock::now() - started >= 290ms);
  run_until(
      w.io, [] { return false; }, 500ms);  // no second report in the meantime
  REQUIRE(w.hangs.size() == 1);
  CHECK(w.hangs[0].local_rank == 1);
  CHECK(w.hangs[0].kind == Hang::Kind::kNoProgress);
  CHECK(w.hangs[0].last_text == "step 7");
  CHECK(describe(w.hangs[0], 2).find("after 'step 7'") != std::string::npos);
}

TEST_CASE("hang watch: an exited rank is not hung, a straggler after the others' success is",
          "[unit][hangs]") {
  Watched w(3, exit_timeout(200ms));
  w.watch.exited(0, true);
  run_until(
      w.io, [] { return false; }, 400ms);
  CHECK(w.hangs.empty());  // rank 1 and 2 still run: nobody is the last one yet
  w.watch.exited(2, true);
  REQUIRE(run_until(
      w.io, [&] { return !w.hangs.empty(); }, 5s));
  CHECK(w.hangs[0].local_rank == 1);
  CHECK(w.hangs[0].kind == Hang::Kind::kStraggler);
  CHECK(describe(w.hangs[0], 2) == "still running 0 s after the other 2 local workers exited 0");
}

TEST_CASE("hang watch: a failed exit starts no straggler clock", "[unit][hangs]") {
  Watched w(2, exit_timeout(100ms));
  w.watch.exited(0, false);
  run_until(
      w.io, [] { return false; }, 400ms);
  CHECK(w.hangs.empty());
}

TEST_CASE(
    "hang watch: the learned timeout is a multiple of the longest interval, at least the floor",
    "[unit][hangs]") {
  HangPolicy policy;
  policy.timeout = 1000ms;
  policy.learned = true;
  CHECK(hang_timeout(policy, 100ms) == 1000ms);
  CHECK(hang_timeout(policy, 400ms) == 2000ms);
  policy.learned = false;
  CHECK(hang_timeout(policy, 400ms) == 1000ms);
}

TEST_CASE("progress value: the last number of the beat's text, else the beat count",
          "[unit][hangs]") {
  RankProgress p;
  p.beats = 7;
  p.text = "epoch 2 step 1200 loss 0.5";
  CHECK(progress_value(p) == 1200);  // the last whole number: a decimal is no step
  p.text = "epoch 2 step 1200";
  CHECK(progress_value(p) == 1200);
  p.text = "training";
  CHECK(progress_value(p) == 7);
  p.text = "step 123456789012345678901234";
  CHECK(progress_value(p) > 0);  // cut, not thrown
}

TEST_CASE("stack dump: the kernel's view names each thread and its wait channel", "[unit][hangs]") {
  const std::string stacks = kernel_stacks(::getpid());
  CHECK(stacks.find("task " + std::to_string(::getpid()) + " (") != std::string::npos);
  CHECK(stacks.find("wchan") != std::string::npos);
  CHECK_FALSE(runs_python(::getpid()));
  CHECK(kernel_stacks(-1).empty());
  // The process group disable_core_dumps matches on, read as the escape sweep reads /proc. A
  // child's file, not /proc/self: qemu-user answers /proc/self/stat itself, with zeros for the
  // group (seen in the aarch64 run), and the sweeps only ever read other processes' files.
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  const auto stat = read_proc_stat("/proc/" + std::to_string(child));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(stat);
  CHECK(stat->group == ::getpgrp());
  CHECK(stat->parent == ::getpid());
  CHECK_FALSE(read_proc_stat("/proc/-1"));
}

TEST_CASE("progress beats: a SIGKILLed agent's directory is removed when the next agent starts",
          "[unit][hangs]") {
  TempDir tmp;
  // A pid that is gone: a child that exited and was reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::string stale = tmp.file("npu_run_progress_" + std::to_string(child) + "_abcdef");
  const std::string live = tmp.file("npu_run_progress_" + std::to_string(::getppid()) + "_abcdef");
  const std::string other = tmp.file("unrelated_dir");
  for (const auto& dir : {stale, live, other}) std::filesystem::create_directory(dir);
  std::ofstream(stale + "/0") << "";
  const char* saved = std::getenv("TMPDIR");
  const std::string saved_value = saved != nullptr ? saved : "";
  ::setenv("TMPDIR", tmp.path().c_str(), 1);
  {
    boost::asio::io_context io;
    ProgressBeats beats(io, 1);
    CHECK(beats.path(0).rfind(tmp.path() + "/npu_run_progress_" + std::to_string(::getpid()) + "_",
                              0) == 0);
    CHECK_FALSE(std::filesystem::exists(stale));
    CHECK(std::filesystem::exists(live));  // its agent is alive
    CHECK(std::filesystem::exists(other));
  }
  if (saved != nullptr)
    ::setenv("TMPDIR", saved_value.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
}

}  // namespace test_hang_watch
