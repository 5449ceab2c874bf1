#include "support/harness.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "basics/environment.hpp"
#include "workers/boost_process.hpp"

namespace npu_run::testing {

namespace bp = boost::process::v2;
using Clock = std::chrono::steady_clock;

namespace {

int pidfd_open(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

std::string new_marker() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  return std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + std::to_string(rd());
}

}  // namespace

// Below the kernel's ephemeral range (32768-60999 here): a port the kernel handed out could be
// handed out again as the source port of any test's outgoing connection (the hostile-peer tests
// make thousands), and a server port equal to a live connection's source port makes the agent
// think the port is served. Above the derived Slurm ports (20000-29999) and the test cluster's.
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
    if (!ec) return port;
  }
  FAIL("no free port in 30000-32767");
  return 0;
}

// NPU_RUN_UNDER_TEST replaces the binary for a whole run of the suite: ctest sets it to a
// wrapper that runs npu_run as on Linux 3.10 (tests/tools/as_old_kernel.cpp).
std::string npu_run_binary() {
  const char* under_test = std::getenv("NPU_RUN_UNDER_TEST");
  return under_test != nullptr && *under_test != '\0' ? under_test : NPU_RUN_BINARY;
}
std::string source_dir() {
  return NPU_RUN_SOURCE_DIR;
}

size_t count_occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + needle.size()))
    ++n;
  return n;
}

struct NpuRunProcess::State {
  boost::asio::io_context io;
  std::optional<bp::process> process;
  int out_fd = -1;
  int err_fd = -1;
  int pid_fd = -1;
  bool exited = false;
  std::string out;
  std::string err;
  Clock::time_point started = Clock::now();

  ~State() {
    for (int fd : {out_fd, err_fd, pid_fd}) {
      if (fd >= 0) ::close(fd);
    }
  }
};

NpuRunProcess::NpuRunProcess(const std::vector<std::string>& args, const EnvOverrides& env,
                             const std::string& cwd)
    : state_(std::make_unique<State>()), marker_(new_marker()) {
  EnvMap full = current_environment();
  // Tests describe their own launcher environment: whatever scheduler runs the test suite (a
  // Slurm job, a pod, mpirun) must not leak into the npu_run under test.
  for (auto it = full.begin(); it != full.end();) {
    const std::string& name = it->first;
    const bool launcher = name.rfind("SLURM_", 0) == 0 || name.rfind("OMPI_", 0) == 0 ||
                          name.rfind("PMIX_", 0) == 0 || name.rfind("PET_", 0) == 0 ||
                          name == "KUBERNETES_SERVICE_HOST" || name == "WORLD_SIZE" ||
                          name == "RANK" || name == "MASTER_ADDR" || name == "MASTER_PORT";
    it = launcher ? full.erase(it) : std::next(it);
  }
  if (!full.count("PYTHON_EXEC")) full["PYTHON_EXEC"] = "/usr/bin/python3";
  full[kMarkerVariable] = marker_;
  for (const auto& [name, value] : env) {
    if (value)
      full[name] = *value;
    else
      full.erase(name);
  }
  const std::vector<std::string> env_strings = to_envp(full);
  std::vector<const char*> envp;
  for (const auto& kv : env_strings) envp.push_back(kv.c_str());
  envp.push_back(nullptr);

  int out_pipe[2];
  int err_pipe[2];
  REQUIRE(::pipe2(out_pipe, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(err_pipe, O_CLOEXEC) == 0);
  bp::default_process_launcher launcher;
  launcher.env = envp.data();
  bp::error_code ec;
  if (cwd.empty()) {
    state_->process.emplace(launcher(state_->io.get_executor(), ec,
                                     std::filesystem::path(npu_run_binary()), args,
                                     bp::process_stdio{nullptr, out_pipe[1], err_pipe[1]}));
  } else {
    state_->process.emplace(
        launcher(state_->io.get_executor(), ec, std::filesystem::path(npu_run_binary()), args,
                 bp::process_stdio{nullptr, out_pipe[1], err_pipe[1]}, bp::process_start_dir(cwd)));
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  state_->out_fd = out_pipe[0];
  state_->err_fd = err_pipe[0];
  REQUIRE_FALSE(ec);
  state_->pid_fd = pidfd_open(state_->process->id());
  REQUIRE(state_->pid_fd >= 0);
}

NpuRunProcess::~NpuRunProcess() {
  if (!state_->exited) {
    ::kill(pid(), SIGKILL);
    state_->process->wait();
  } else {
    state_->process->detach();  // already reaped in wait()
  }
  // A test that failed half-way must not leave workers running into the next test.
  for (pid_t p : processes_with_marker(marker_)) ::kill(p, SIGKILL);
}

pid_t NpuRunProcess::pid() const {
  return state_->process->id();
}

void NpuRunProcess::add_pollfds(std::vector<pollfd>& fds) const {
  fds.push_back({state_->out_fd, POLLIN, 0});
  fds.push_back({state_->err_fd, POLLIN, 0});
  fds.push_back({state_->exited ? -1 : state_->pid_fd, POLLIN, 0});
}

void NpuRunProcess::read_ready(const pollfd* fds) {
  char buffer[65536];
  for (int i = 0; i < 2; ++i) {
    if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
    const ssize_t got = ::read(fds[i].fd, buffer, sizeof(buffer));
    if (got > 0) (i == 0 ? state_->out : state_->err).append(buffer, static_cast<size_t>(got));
    if (got == 0) {  // EOF
      ::close(fds[i].fd);
      (i == 0 ? state_->out_fd : state_->err_fd) = -1;
    }
  }
  if (fds[2].fd >= 0 && (fds[2].revents & POLLIN)) state_->exited = true;
}

bool NpuRunProcess::pump(milliseconds timeout) {
  std::vector<pollfd> fds;
  add_pollfds(fds);
  if (::poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) > 0) read_ready(fds.data());
  return state_->exited;
}

std::vector<Finished> NpuRunProcess::wait_all(const std::vector<NpuRunProcess*>& processes,
                                              milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto all_exited = [&] {
    return std::all_of(processes.begin(), processes.end(),
                       [](const NpuRunProcess* p) { return p->state_->exited; });
  };
  while (!all_exited()) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left <= 0ms) {
      // Where everything is blocked, looked at before anything is killed.
      std::string outputs = "processes of the test:\n";
      for (const NpuRunProcess* p : processes)
        outputs += describe_processes(processes_with_marker(p->marker()));
      for (size_t i = 0; i < processes.size(); ++i) {
        ::kill(processes[i]->pid(), SIGKILL);
        outputs += "---- process " + std::to_string(i) +
                   (processes[i]->state_->exited ? " (exited)" : " (running)") + "\nstdout:\n" +
                   processes[i]->state_->out + "\nstderr:\n" + processes[i]->state_->err + "\n";
      }
      FAIL("not every npu_run exited within " << timeout.count() << " ms\n" << outputs);
    }
    std::vector<pollfd> fds;
    for (const NpuRunProcess* p : processes) p->add_pollfds(fds);
    if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) > 0) {
      for (size_t i = 0; i < processes.size(); ++i) processes[i]->read_ready(&fds[3 * i]);
    }
  }
  std::vector<Finished> finished;
  for (NpuRunProcess* p : processes) finished.push_back(p->wait(timeout));
  return finished;
}

void NpuRunProcess::wait_for_output(const std::string& needle, int count, milliseconds timeout,
                                    bool in_stderr) {
  const auto deadline = Clock::now() + timeout;
  const std::string& text = in_stderr ? state_->err : state_->out;
  while (count_occurrences(text, needle) < static_cast<size_t>(count)) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left <= 0ms || (state_->exited && state_->out_fd < 0 && state_->err_fd < 0)) {
      FAIL("waited for '" << needle << "' x" << count << "; stdout:\n"
                          << state_->out << "\nstderr:\n"
                          << state_->err);
    }
    pump(std::min(left, milliseconds(100)));
  }
}

void NpuRunProcess::send_signal(int sig) {
  ::kill(pid(), sig);
}

Finished NpuRunProcess::wait(milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!state_->exited) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left <= 0ms) {
      const std::string blocked = describe_processes(processes_with_marker(marker_));
      ::kill(pid(), SIGKILL);
      FAIL("npu_run did not exit within " << timeout.count() << " ms; its processes:\n"
                                          << blocked << "stdout:\n"
                                          << state_->out << "\nstderr:\n"
                                          << state_->err);
    }
    pump(left);
  }
  state_->process->wait();
  const double seconds = std::chrono::duration<double>(Clock::now() - state_->started).count();
  // Collect what is still buffered; stop at EOF or when nothing more is there (a leaked worker
  // holding the pipe must not hang the test: the stray check reports it instead).
  while (state_->out_fd >= 0 || state_->err_fd >= 0) {
    pollfd fds[2] = {{state_->out_fd, POLLIN, 0}, {state_->err_fd, POLLIN, 0}};
    if (::poll(fds, 2, 50) <= 0) break;
    char buffer[65536];
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      const ssize_t got = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (got > 0)
        (i == 0 ? state_->out : state_->err).append(buffer, static_cast<size_t>(got));
      else {
        ::close(fds[i].fd);
        (i == 0 ? state_->out_fd : state_->err_fd) = -1;
      }
    }
  }
  Finished f;
  const int status = state_->process->native_exit_code();
  if (WIFEXITED(status)) f.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) f.term_signal = WTERMSIG(status);
  f.out = state_->out;
  f.err = state_->err;
  f.seconds = seconds;
  return f;
}

Finished run_npu_run(const std::vector<std::string>& args, const EnvOverrides& env,
                     milliseconds timeout, const std::string& cwd) {
  NpuRunProcess p(args, env, cwd);
  Finished f = p.wait(timeout);
  require_no_strays(p);
  return f;
}

void require_no_strays(const NpuRunProcess& p) {
  const auto strays = wait_until_no_marker_processes(p.marker(), 5s);
  INFO("left behind:\n" << describe_processes(strays));
  CHECK(strays.empty());
}

std::string make_gate(const std::string& path) {
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  return path;
}

void open_gate(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "go\n", 3) == 3);
  ::close(fd);
}

std::string describe_processes(const std::vector<pid_t>& pids) {
  std::string text;
  for (pid_t pid : pids) {
    const std::string dir = "/proc/" + std::to_string(pid);
    std::ifstream cmdline_file(dir + "/cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(cmdline_file)),
                        std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    std::ifstream status(dir + "/status");
    std::string state;
    std::string ppid;
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("State:", 0) == 0) state = line.substr(7);
      if (line.rfind("PPid:", 0) == 0) ppid = line.substr(6);
    }
    // The kernel's wait channel says where a hung process is blocked (futex, pipe, epoll).
    std::ifstream wchan_file(dir + "/wchan");
    std::string wchan;
    std::getline(wchan_file, wchan);
    text += "pid " + std::to_string(pid) + " (" + cmdline + ") state " + state + " ppid " + ppid +
            " wchan " + (wchan.empty() ? "-" : wchan) + "\n";
  }
  return text;
}

std::vector<pid_t> processes_with_marker(const std::string& marker) {
  const std::string needle = std::string(kMarkerVariable) + "=" + marker;
  std::vector<pid_t> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == ::getpid()) continue;
    std::ifstream environ(std::string("/proc/") + entry->d_name + "/environ", std::ios::binary);
    std::stringstream content;
    content << environ.rdbuf();
    const std::string env = content.str();
    // Whole entries only: the marker must be followed by the NUL that ends the entry.
    for (auto pos = env.find(needle); pos != std::string::npos; pos = env.find(needle, pos + 1)) {
      const bool starts_entry = pos == 0 || env[pos - 1] == '\0';
      const bool ends_entry = pos + needle.size() == env.size() || env[pos + needle.size()] == '\0';
      if (starts_entry && ends_entry) {
        found.push_back(static_cast<pid_t>(pid));
        break;
      }
    }
  }
  ::closedir(proc);
  return found;
}

size_t wait_for_marker_processes(const std::string& marker, size_t count, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  size_t found = processes_with_marker(marker).size();
  while (found < count && Clock::now() < deadline) {
    ::usleep(10'000);
    found = processes_with_marker(marker).size();
  }
  return found;
}

std::vector<pid_t> wait_until_no_marker_processes(const std::string& marker, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const std::vector<pid_t> pids = processes_with_marker(marker);
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (pids.empty() || left <= 0ms) return pids;
    // Wait for the first of them to exit, then look again (it may have had children).
    std::vector<pollfd> fds;
    for (pid_t p : pids) {
      const int fd = pidfd_open(p);
      if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    }
    if (!fds.empty()) ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    for (const pollfd& f : fds) ::close(f.fd);
  }
}

}  // namespace npu_run::testing
