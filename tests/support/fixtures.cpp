#include "support/fixtures.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "support/build_paths.hpp"

namespace npu_run::testing {

std::string make_gate(const std::string& path) {
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  return path;
}

void open_gate(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  INFO("open " << path << ": " << std::strerror(errno));
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "go\n", 3) == 3);
  ::close(fd);
}

// Below the kernel's ephemeral range (32768-60999 here): a port the kernel handed out could be
// handed out again as the source port of any test's outgoing connection (the hostile-peer tests
// make thousands), and a server port equal to a live connection's source port makes the agent
// think the port is served. Above the derived Slurm ports (20000-29999) and the test cluster's.
namespace {

// A port this test process picked is locked for its whole life (a file per port under /run,
// flock'ed and left open), so that no other test of the suite picks it meanwhile: ctest runs
// three at once, and two that picked one port made a test's "nothing listens there" false.
bool reserve_port(unsigned short port) {
  static const std::string dir = [] {
    ::mkdir("/run/npu_run_test_ports", 0777);
    return std::string("/run/npu_run_test_ports/");
  }();
  const int fd = ::open((dir + std::to_string(port)).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return true;  // nowhere to keep the lock: a port free a moment ago, as before
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;  // fd stays open: the lock with it
  ::close(fd);
  return false;
}

}  // namespace

int unused_port() {
  static std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(30000, 32767);
  boost::asio::io_context io;
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto port = static_cast<unsigned short>(pick(rng));
    boost::system::error_code ec;
    boost::asio::ip::tcp::acceptor probe(io);
    probe.open(boost::asio::ip::tcp::v4(), ec);
    if (!ec) probe.bind({boost::asio::ip::make_address("127.0.0.1"), port}, ec);
    if (!ec && reserve_port(port)) return port;
  }
  FAIL("no free port in 30000-32767");
  return 0;
}

// NPU_RUN_UNDER_TEST replaces the binary for a whole run of the suite: ctest sets it to a
// wrapper that runs npu_run as on Linux 3.10 (tests/tools/as_old_kernel.cpp).
std::string npu_run_binary() {
  const char* under_test = std::getenv("NPU_RUN_UNDER_TEST");
  return under_test != nullptr && *under_test != '\0' ? under_test : build_paths::kNpuRun;
}

std::string source_dir() {
  return build_paths::kSourceDir;
}

std::string test_python() {
  const char* exec = std::getenv("PYTHON_EXEC");
  return exec != nullptr && *exec != '\0' ? exec : "/usr/bin/python3";
}

std::pair<int, int> torch_version() {
  static const std::pair<int, int> version = [] {
    std::pair<int, int> v{0, 0};
    // The installed package's metadata, not an import of torch (seconds for torch 2.x, in
    // every test that asks); the import only where the metadata is missing.
    FILE* out = ::popen((test_python() +
                         " -c 'import importlib.metadata as m\n"
                         "try: print(m.version(\"torch\"))\n"
                         "except m.PackageNotFoundError: import torch; print(torch.__version__)'")
                            .c_str(),
                        "r");
    if (out == nullptr) return v;
    if (std::fscanf(out, "%d.%d", &v.first, &v.second) != 2) v = {0, 0};
    ::pclose(out);
    return v;
  }();
  return version;
}

size_t count_occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + needle.size()))
    ++n;
  return n;
}

std::pair<int, std::string> shell(const std::string& command, bool quiet) {
  std::string out;
  FILE* pipe = ::popen((command + (quiet ? " 2>/dev/null" : " 2>&1")).c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace npu_run::testing
