#include "support/harness.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <utility>

#include "basics/environment.hpp"
#include "support/output_pipes.hpp"
#include "workers/boost_process.hpp"

namespace npu_run::testing {

namespace bp = boost::process::v2;
using Clock = std::chrono::steady_clock;

struct NpuRunProcess::State {
  boost::asio::io_context io;
  std::optional<bp::process> process;
  std::optional<OutputPipes> output;
  int pid_fd = -1;
  bool exited = false;
  bool stdout_paused = false;
  Clock::time_point started = Clock::now();

  const std::string& out() const { return output->out(); }
  const std::string& err() const { return output->err(); }

  ~State() {
    if (pid_fd >= 0) ::close(pid_fd);
  }
};

namespace {

// The program the harness starts and its arguments: npu_run itself, or behind the wrappers an
// override asks for. Each wrapper execs, so npu_run keeps the pid the test knows.
std::pair<std::filesystem::path, std::vector<std::string>> command_for(
    const std::vector<std::string>& args, const EnvOverrides& env) {
  std::filesystem::path program = npu_run_binary();
  std::vector<std::string> argv = args;
  // A host of its own: npu_run in a UTS namespace with that host name (the same pid, as
  // unshare and sh exec it), so that loopback nodes differ by host as real ones do.
  if (const auto name = env.find(kHostNameVariable); name != env.end() && name->second) {
    argv = {"--uts",       "/bin/sh",       "-c", "hostname \"$0\" && exec \"$@\"",
            *name->second, program.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    program = "/usr/bin/unshare";
  }
  // Its own session and process group, as under timeout(1), a batch system or a login shell:
  // setsid(1) calls setsid() and execs, since the harness's child leads no group.
  if (env.count(kOwnSessionVariable) != 0) {
    argv.insert(argv.begin(), program.string());
    program = "/usr/bin/setsid";
  }
  return {program, argv};
}

}  // namespace

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
  auto [program, argv] = command_for(args, env);
  if (cwd.empty()) {
    state_->process.emplace(launcher(state_->io.get_executor(), ec, program, argv,
                                     bp::process_stdio{nullptr, out_pipe[1], err_pipe[1]}));
  } else {
    state_->process.emplace(launcher(state_->io.get_executor(), ec, program, argv,
                                     bp::process_stdio{nullptr, out_pipe[1], err_pipe[1]},
                                     bp::process_start_dir(cwd)));
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  state_->output.emplace(out_pipe[0], err_pipe[0]);
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
  state_->output->add_pollfds(fds);
  if (state_->stdout_paused) fds[fds.size() - 2].fd = -1;  // a console that stopped reading
  fds.push_back({state_->exited ? -1 : state_->pid_fd, POLLIN, 0});
}

void NpuRunProcess::read_ready(const pollfd* fds) {
  state_->output->read_ready(fds);
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
                   processes[i]->state_->out() + "\nstderr:\n" + processes[i]->state_->err() + "\n";
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
  if (!saw_output(needle, count, timeout, in_stderr)) {
    FAIL("waited for '" << needle << "' x" << count << "; stdout:\n"
                        << state_->out() << "\nstderr:\n"
                        << state_->err());
  }
}

bool NpuRunProcess::saw_output(const std::string& needle, int count, milliseconds timeout,
                               bool in_stderr) {
  const auto deadline = Clock::now() + timeout;
  const std::string& text = in_stderr ? state_->err() : state_->out();
  while (count_occurrences(text, needle) < static_cast<size_t>(count)) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left <= 0ms || (state_->exited && state_->output->all_closed())) return false;
    pump(std::min(left, milliseconds(100)));
  }
  return true;
}

void NpuRunProcess::pause_stdout() {
  state_->stdout_paused = true;
}

void NpuRunProcess::wait_until_stdout_full(milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  // Nothing signals that a writer blocked: npu_run's threads are looked at every 10 ms, until
  // one of them sleeps in pipe_write (a pipe's fill level in bytes says nothing exact: the
  // pipe is full when its pages are, however many bytes they hold).
  while (!thread_blocked_in(pid(), "pipe_write")) {
    if (Clock::now() > deadline) {
      FAIL("npu_run's stdout did not fill within " << timeout.count() << " ms; stderr:\n"
                                                   << state_->err());
    }
    pump(10ms);
  }
}

void NpuRunProcess::resume_stdout() {
  state_->stdout_paused = false;
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
                                          << state_->out() << "\nstderr:\n"
                                          << state_->err());
    }
    pump(left);
  }
  state_->process->wait();
  const double seconds = std::chrono::duration<double>(Clock::now() - state_->started).count();
  // Collect what is still buffered; a leaked worker holding the pipe must not hang the test:
  // the stray check reports it instead.
  state_->output->drain(50);
  Finished f;
  const int status = state_->process->native_exit_code();
  if (WIFEXITED(status)) f.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) f.term_signal = WTERMSIG(status);
  f.out = state_->out();
  f.err = state_->err();
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

}  // namespace npu_run::testing
