#include "workers/proc_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <string_view>

namespace npu_run {

std::string read_proc_file(const std::string& path) {
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  std::array<char, 4096> buffer{};
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n > 0) {
      text.append(buffer.data(), static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fd);
  return text;
}

// "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses, so the fields are
// counted from the last ')'.
std::optional<ProcStat> read_proc_stat(const std::string& dir) {
  const std::string text = read_proc_file(dir + "/stat");
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 4 >= text.size()) return std::nullopt;
  ProcStat stat;
  stat.state = text[close + 2];
  char* end = nullptr;
  stat.parent = static_cast<pid_t>(std::strtol(text.c_str() + close + 4, &end, 10));
  stat.group = static_cast<pid_t>(std::strtol(end, nullptr, 10));
  return stat;
}

bool proc_environ_has(const std::string& dir, const std::string& entry) {
  const std::string environ = read_proc_file(dir + "/environ");
  size_t at = 0;
  while (at < environ.size()) {
    const size_t end = std::min(environ.find('\0', at), environ.size());
    if (std::string_view(environ).substr(at, end - at) == entry) return true;
    at = end + 1;
  }
  return false;
}

std::string proc_command(const std::string& dir) {
  std::string command = read_proc_file(dir + "/cmdline");
  while (!command.empty() && command.back() == '\0') command.pop_back();
  std::replace(command.begin(), command.end(), '\0', ' ');
  if (command.empty()) {  // a kernel thread or a zombie: its name instead
    command = read_proc_file(dir + "/comm");
    while (!command.empty() && command.back() == '\n') command.pop_back();
  }
  if (command.size() > 80) command = command.substr(0, 77) + "...";
  return command;
}

}  // namespace npu_run
