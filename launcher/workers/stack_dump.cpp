#include "workers/stack_dump.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "basics/text.hpp"
#include "workers/proc_files.hpp"

namespace npu_run {

namespace {

// The first line of a /proc file ("futex_wait_queue" from wchan, which has no newline).
std::string first_line(const std::string& path) {
  const std::string text = read_proc_file(path);
  return text.substr(0, text.find('\n'));
}

// "[<0>] futex_wait_queue+0x60/0xa0" -> "futex_wait_queue".
std::string frame_name(const std::string& line) {
  auto start = line.find(']');
  start = start == std::string::npos ? 0 : start + 1;
  while (start < line.size() && line[start] == ' ') ++start;
  const auto end = line.find('+', start);
  return line.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

bool runs_python(pid_t pid) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
  return !ec && exe.filename().string().rfind("python", 0) == 0;
}

namespace {

// One thread's kernel stack, innermost first, names only; empty where it is not readable.
std::vector<std::string> kernel_frames(const std::string& task_dir) {
  std::vector<std::string> frames;
  const std::string stack = read_proc_file(task_dir + "/stack");  // the views below point into it
  for (const std::string_view frame : split(stack, '\n')) {
    if (!frame.empty()) frames.push_back(frame_name(std::string(frame)));
  }
  return frames;
}

}  // namespace

std::string kernel_stacks(pid_t pid) {
  constexpr int kMaxThreads = 64;
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  std::string out;
  std::error_code ec;
  int threads = 0;
  for (const auto& task : std::filesystem::directory_iterator(task_dir, ec)) {
    if (++threads > kMaxThreads) {
      out += "(more threads not shown)\n";
      break;
    }
    const std::string dir = task.path().string();
    const std::string tid = task.path().filename().string();
    std::string line =
        "task " + tid + " (" + first_line(dir + "/comm") + "): wchan " + first_line(dir + "/wchan");
    std::string frames;
    for (const std::string& frame : kernel_frames(dir))
      frames += (frames.empty() ? "" : " <- ") + frame;
    if (!frames.empty()) line += "; stack: " + frames;
    out += line + "\n";
  }
  return out;
}

std::vector<std::string> kernel_top_frames(pid_t pid, size_t max_frames) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid);
  std::vector<std::string> frames = kernel_frames(dir);
  if (frames.empty()) {
    const std::string wchan = first_line(dir + "/wchan");
    if (wchan.empty()) return {};
    frames.push_back(wchan == "0" ? "running" : wchan);
  }
  if (frames.size() > max_frames) frames.resize(max_frames);
  for (std::string& frame : frames) frame = "(kernel) " + frame;
  return frames;
}

int disable_core_dumps(const std::vector<pid_t>& process_groups) {
  int lowered = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    const auto stat = read_proc_stat(entry.path().string());
    if (!stat || std::find(process_groups.begin(), process_groups.end(), stat->group) ==
                     process_groups.end())
      continue;
    const auto pid = static_cast<pid_t>(std::strtol(name.c_str(), nullptr, 10));
    rlimit limit{};
    if (::prlimit(pid, RLIMIT_CORE, nullptr, &limit) != 0) continue;
    limit.rlim_cur = 0;
    if (::prlimit(pid, RLIMIT_CORE, &limit, nullptr) == 0) ++lowered;
  }
  return lowered;
}

}  // namespace npu_run
