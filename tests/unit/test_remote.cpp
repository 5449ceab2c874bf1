// The pieces of a launch over ssh that need no ssh: control lines, the preamble, shell quoting
// (checked by a real /bin/sh), ssh's command line, who starts whom, each host's agent options,
// a host's output split into console text and control lines, and the control channel.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cstdio>

#include "remote/control_channel.hpp"
#include "remote/control_lines.hpp"
#include "remote/host_output.hpp"
#include "remote/host_plan.hpp"
#include "remote/preamble.hpp"
#include "remote/ssh_command.hpp"
#include "workers/console.hpp"

namespace test_remote {

using namespace npu_run;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;

namespace {

// What /bin/sh makes of `line`: its words, one per output line.
std::vector<std::string> shell_words(const std::string& line) {
  const std::string command =
      "sh -c 'for w in \"$@\"; do printf \"%s\\036\" \"$w\"; done' sh " + line;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  ::pclose(pipe);
  std::vector<std::string> words;
  size_t start = 0;
  for (size_t end; (end = out.find('\036', start)) != std::string::npos; start = end + 1)
    words.push_back(out.substr(start, end - start));
  return words;
}

// Runs the loop until `done()` holds (checked after every handler), for at most 5 s.
template <typename Done>
void run_until(boost::asio::io_context& io, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_one_for(std::chrono::milliseconds(20));
  }
  REQUIRE(done());
}

// Bytes waiting in a pipe.
size_t waiting(int fd) {
  int n = 0;
  REQUIRE(::ioctl(fd, FIONREAD, &n) == 0);
  return static_cast<size_t>(n);
}

HostsLaunch two_hosts() {
  HostsLaunch l;
  l.hosts = {HostSlots{"a", 2, {}, "--hosts"}, HostSlots{"u@b", std::nullopt, {}, "--hosts"},
             HostSlots{"c", 2, {1, 3}, "--include"}};
  l.nproc_per_node = "auto";
  l.agent_options = {"--max-restarts=1", "--cluster=none"};
  l.script_and_args = {"train.py", "--name", "it's"};
  l.working_directory = "/work dir";
  return l;
}

}  // namespace

TEST_CASE("remote: control lines round-trip and refuse what is not one", "[remote]") {
  for (const ControlLine& line :
       {ControlLine{ControlLine::Kind::kHello, "0.1.0", 0, ""},
        ControlLine{ControlLine::Kind::kReady, "host-1", 0, ""},
        ControlLine{ControlLine::Kind::kExit, "u@h", 130, ""},
        ControlLine{ControlLine::Kind::kFailed, "h", 255, "ssh: connect to host h: refused"}}) {
    const std::string text = format_control(line);
    REQUIRE(text.front() == kControlMark);
    REQUIRE(text.back() == '\n');
    const auto parsed = parse_control(std::string_view(text).substr(0, text.size() - 1));
    REQUIRE(parsed);
    CHECK(parsed->kind == line.kind);
    CHECK(parsed->host == line.host);
    CHECK(parsed->code == line.code);
    CHECK(parsed->text == line.text);
  }
  // A failure's text stays one line, whatever ssh said.
  CHECK_THAT(format_control({ControlLine::Kind::kFailed, "h", 1, "a\nb"}), EndsWith("a\\x0ab\n"));
  CHECK_FALSE(parse_control("\036npu_run exit h"));
  CHECK_FALSE(parse_control("\036npu_run exit h 256"));
  CHECK_FALSE(parse_control("\036npu_run wave h"));
  CHECK_FALSE(parse_control("\036npu_run ready"));
  CHECK_FALSE(parse_control("npu_run ready h"));
  CHECK(parse_stop("stop 15") == 15);
  CHECK(format_stop(2) == "stop 2\n");
  CHECK_FALSE(parse_stop("stop 0"));
  CHECK_FALSE(parse_stop("stop 99"));
  CHECK_FALSE(parse_stop("halt 2"));
}

TEST_CASE("remote: the preamble round-trips its tree and refuses what it cannot use", "[remote]") {
  Preamble p;
  p.token = "t0k";
  p.env = {{"PATH", "/bin"}, {"X", "a b"}};
  p.fanout = 4;
  p.children = {
      ChildHost{"b", {"ssh", "b", "cmd"}, true, {ChildHost{"c", {"ssh", "c"}, false, {}}}}};
  const std::string line = format_preamble(p);
  REQUIRE(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);
  const Preamble q = parse_preamble(std::string_view(line).substr(0, line.size() - 1));
  CHECK(q.token == "t0k");
  CHECK(q.env == p.env);
  CHECK(q.fanout == 4);
  REQUIRE(q.children.size() == 1);
  CHECK(q.children[0].ship_binary);
  REQUIRE(q.children[0].children.size() == 1);
  CHECK(q.children[0].children[0].argv == std::vector<std::string>{"ssh", "c"});
  CHECK_THROWS_WITH(parse_preamble("{"), Contains("not a preamble of npu_run"));
  CHECK_THROWS_WITH(parse_preamble(R"({"npu_run_preamble":2})"), Contains("another version"));
  CHECK_THROWS(
      parse_preamble(R"({"npu_run_preamble":1,"token":"","env":[],"fanout":0,"children":[]})"));
  CHECK_THROWS_WITH(parse_preamble(std::string(kMaxPreambleBytes + 1, ' ')),
                    Contains("larger than 16 MiB"));
}

TEST_CASE("remote: words are quoted for the remote shell exactly", "[remote]") {
  const std::vector<std::string> words = {"plain",     "two words", "it's", "",
                                          "$HOME",     "`id`",      "a\"b", "back\\slash",
                                          "new\nline", "--x=${y}",  "*"};
  CHECK(shell_words(shell_join(words)) == words);
  CHECK(shell_quote("--node-rank=1") == "--node-rank=1");
  CHECK(shell_quote("it's") == "'it'\\''s'");
}

TEST_CASE("remote: ssh gets the user's options before npu_run's and one remote command",
          "[remote]") {
  SshSettings ssh;
  ssh.port = 2222;
  ssh.options = {"BatchMode=no", "User=me"};
  const auto argv = ssh_argv(ssh, "host", "cmd");
  const std::string joined = shell_join(argv);
  CHECK_THAT(joined, Contains("ssh -p 2222 -o BatchMode=no -o User=me -o BatchMode=yes"));
  CHECK_THAT(joined, EndsWith("-T -x -a host cmd"));
  CHECK(shell_join(ssh_config_argv(ssh, "h")).find(" -G h") != std::string::npos);
  CHECK(host_name_from_ssh_config("user root\nhostname 10.0.0.2\nport 22\n") == "10.0.0.2");
  CHECK(host_name_from_ssh_config("user root\n").empty());
}

TEST_CASE("remote: with --spares the last hosts start as spares, ranked after the nodes",
          "[remote][spares]") {
  HostsLaunch launch = two_hosts();
  launch.spares = 1;
  launch.agent_options.emplace_back("--spares=1");
  const auto plans = plan_hosts(launch, "10.0.0.1", "/opt/npu_run", std::nullopt);
  REQUIRE(plans.size() == 3);
  for (size_t i = 0; i < plans.size(); ++i) {
    const auto& args = plans[i].agent_args;
    INFO(i);
    CHECK(std::count(args.begin(), args.end(), "--nnodes=2") == 1);
    CHECK(std::count(args.begin(), args.end(), "--spares=1") == 1);
    CHECK(std::count(args.begin(), args.end(), "--node-rank=" + std::to_string(i)) == 1);
  }
}

TEST_CASE("remote: each host's agent gets its node rank, slots, devices and the master",
          "[remote]") {
  const auto plans = plan_hosts(two_hosts(), "10.0.0.1", "/opt/npu_run", std::nullopt);
  REQUIRE(plans.size() == 3);
  CHECK(plans[0].agent_args ==
        std::vector<std::string>{"--max-restarts=1", "--cluster=none", "--nnodes=3",
                                 "--node-rank=0", "--nproc-per-node=2", "--master-addr=10.0.0.1",
                                 "--log-line-prefix-template=a: ", "--", "train.py", "--name",
                                 "it's"});
  CHECK(plans[1].nproc == "auto");  // no slots: each host counts its own devices
  CHECK(plans[2].agent_args[5] == "--devices=1,3");
  // The remote command line, as the host's shell will split it.
  const std::string& command = plans[1].ssh.back();
  CHECK(plans[1].ssh[plans[1].ssh.size() - 2] == "u@b");
  const auto words = shell_words(command.substr(command.find("&& exec ") + 8));
  CHECK(words.front() == "/opt/npu_run");
  CHECK(std::vector<std::string>(words.begin() + 1, words.begin() + 5) ==
        std::vector<std::string>{"host-agent", "--name", "u@b", "--"});
  CHECK(words.back() == "it's");
  CHECK_THAT(command, Contains("cd -- '/work dir' && exec"));
  // Shipped: asks for the binary by its content's name.
  const auto shipped =
      plan_hosts(two_hosts(), "m", "/x", ShippedBinary{std::string(64, 'f'), 1234});
  CHECK_THAT(shipped[0].ssh.back(),
             Contains("$HOME/.cache/npu_run/npu_run-ffffffffffffffff") && Contains("head -c 1234"));
}

TEST_CASE("remote: with --ssh-tree each starter starts at most fanout hosts", "[remote]") {
  const StartTree flat = start_tree(5, 2, false);
  CHECK(flat.roots == std::vector<size_t>{0, 1, 2, 3, 4});
  const StartTree tree = start_tree(10, 2, true);
  CHECK(tree.roots == std::vector<size_t>{0, 1});
  CHECK(tree.children[0] == std::vector<size_t>{2, 3});
  CHECK(tree.children[1] == std::vector<size_t>{6, 7});
  CHECK(tree.children[2] == std::vector<size_t>{4});
  CHECK(tree.children[3] == std::vector<size_t>{5});
  // Every host is started exactly once, by nobody more than fanout hosts; depth is logarithmic.
  const StartTree big = start_tree(1000, 32, true);
  std::vector<int> started(1000, 0);
  for (size_t r : big.roots) ++started[r];
  size_t widest = big.roots.size();
  for (const auto& c : big.children) {
    widest = std::max(widest, c.size());
    for (size_t h : c) ++started[h];
  }
  CHECK(std::all_of(started.begin(), started.end(), [](int n) { return n == 1; }));
  CHECK(widest == 32);
  for (size_t r : big.roots) {
    for (size_t c : big.children[r]) CHECK(big.children[c].empty());  // two rounds
  }
}

TEST_CASE("remote: a host's output reaches the console, its control lines do not", "[remote]") {
  boost::asio::io_context io;
  int data[2];
  int console_pipe[2];
  REQUIRE(::pipe2(data, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(console_pipe, O_CLOEXEC) == 0);
  ConsoleStream console(console_pipe[1]);
  std::vector<ControlLine> lines;
  bool ended = false;
  auto output = std::make_shared<HostOutput>(
      io, data[0], console, [&](const ControlLine& l) { lines.push_back(l); },
      [&] { ended = true; });
  output->hold();
  output->start();
  const std::string sent =
      "ssh: warning\n\036npu_run hello 0.1\nh: line 1\n\036npu_run ready h\n\036not ours\nh: "
      "prog\rress\n\036npu_run exit h 3\nh: no newline";
  REQUIRE(::write(data[1], sent.data(), sent.size()) == static_cast<ssize_t>(sent.size()));
  ::close(data[1]);
  run_until(io, [&] { return ended; });
  REQUIRE(lines.size() == 3);
  CHECK(lines[1].kind == ControlLine::Kind::kReady);
  CHECK(lines[2].code == 3);
  // Held: nothing on the console yet, and the held text is what came.
  const std::string text = "ssh: warning\nh: line 1\n\036not ours\nh: prog\rress\nh: no newline";
  CHECK(output->held() == text);
  output->release();
  ::close(console_pipe[1]);
  std::string shown(4096, '\0');
  shown.resize(static_cast<size_t>(::read(console_pipe[0], shown.data(), shown.size())));
  ::close(console_pipe[0]);
  CHECK(shown == text + "\n");  // the stream ended: its last line is ended
}

TEST_CASE("remote: the control channel turns stop lines into stops and EOF into a hang-up",
          "[remote]") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  const std::string sent =
      "{\"preamble\":1}\nstop 2\n" + std::string(300, 'x') + "\nstop 15\ngarbage\n";
  REQUIRE(::write(fds[1], sent.data(), sent.size()) == static_cast<ssize_t>(sent.size()));
  std::string rest;
  CHECK(read_line_with_deadline(fds[0], std::chrono::seconds(1), 1024, rest) == "{\"preamble\":1}");
  boost::asio::io_context io;
  std::vector<int> stops;
  bool closed = false;
  auto channel = std::make_shared<ControlChannel>(
      io, fds[0], [&](int sig) { stops.push_back(sig); }, [&] { closed = true; });
  channel->start(rest);
  ::close(fds[1]);
  run_until(io, [&] { return closed; });
  CHECK(stops == std::vector<int>{2, 15});
  // A preamble that never comes, or never ends.
  int quiet[2];
  REQUIRE(::pipe2(quiet, O_CLOEXEC) == 0);
  CHECK_THROWS_WITH(read_line_with_deadline(quiet[0], std::chrono::milliseconds(50), 10, rest),
                    Contains("in time"));
  REQUIRE(::write(quiet[1], "0123456789abcdef", 16) == 16);
  CHECK_THROWS_WITH(read_line_with_deadline(quiet[0], std::chrono::seconds(1), 10, rest),
                    Contains("too long"));
  ::close(quiet[1]);
  CHECK_THROWS_WITH(read_line_with_deadline(quiet[0], std::chrono::seconds(1), 100, rest),
                    Contains("ended"));
  ::close(quiet[0]);
}

TEST_CASE("remote: two hosts' lines never cut into each other on the console", "[remote]") {
  boost::asio::io_context io;
  int a[2];
  int b[2];
  int console_pipe[2];
  REQUIRE(::pipe2(a, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(b, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(console_pipe, O_CLOEXEC) == 0);
  ConsoleStream console(console_pipe[1]);
  bool a_ended = false;
  bool b_ended = false;
  auto from_a = std::make_shared<HostOutput>(io, a[0], console, nullptr, [&] { a_ended = true; });
  auto from_b = std::make_shared<HostOutput>(io, b[0], console, nullptr, [&] { b_ended = true; });
  from_a->start();
  from_b->start();
  // Host a's worker writes its line in pieces (python -u's print("x", "y")); host b's whole
  // line arrives between them.
  REQUIRE(::write(a[1], "a: agent runs", 13) == 13);
  // Nothing of a's unfinished line shows; b's whole line does, at once.
  REQUIRE(::write(b[1], "b: line\n", 8) == 8);
  run_until(io, [&] { return waiting(console_pipe[0]) == 8; });
  REQUIRE(::write(a[1], " /path\n", 7) == 7);
  run_until(io, [&] { return waiting(console_pipe[0]) == 8 + 20; });
  // A prompt without its newline still shows, once the wait is over.
  const auto prompt_at = std::chrono::steady_clock::now();
  REQUIRE(::write(b[1], "b: password?", 12) == 12);
  run_until(io, [&] { return waiting(console_pipe[0]) == 8 + 20 + 12; });
  CHECK(std::chrono::steady_clock::now() - prompt_at >= HostOutput::kLineWait);
  ::close(a[1]);
  ::close(b[1]);
  run_until(io, [&] { return a_ended && b_ended; });  // b's open line is ended
  ::close(console_pipe[1]);
  std::string shown(4096, '\0');
  shown.resize(static_cast<size_t>(::read(console_pipe[0], shown.data(), shown.size())));
  ::close(console_pipe[0]);
  CHECK(shown == "b: line\na: agent runs /path\nb: password?\n");
}

}  // namespace test_remote
