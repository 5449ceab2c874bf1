#include "basics/token_file.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "basics/text.hpp"
#include "basics/usage_error.hpp"

namespace npu_run {

namespace {

std::string trimmed_first_line(const std::string& text) {
  return std::string(trim(std::string_view(text).substr(0, text.find('\n'))));
}

// Reads at most kMaxTokenBytes + 1 bytes: a token file that is really something else (a log, a
// device) is refused without reading all of it.
std::string read_head(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string data(kMaxTokenBytes + 1, '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in.gcount()));
  return data;
}

// Permissions a secret file must have: a regular file of ours that nobody else can read or change.
void check_private(const std::string& path, const std::string& source) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw UsageError(
        fmt::format("{} {}: cannot read it: {}; create it with: (umask 077; head -c 32 "
                    "/dev/urandom | base64 > {})",
                    source, path, std::strerror(errno), path));
  }
  if (!S_ISREG(st.st_mode)) {
    throw UsageError(
        fmt::format("{} {}: not a regular file; point it at the file whose first line is the token",
                    source, path));
  }
  if (st.st_uid != ::geteuid()) {
    throw UsageError(
        fmt::format("{} {}: owned by uid {}, not by you (uid {}); a token must be your own file",
                    source, path, st.st_uid, ::geteuid()));
  }
  if ((st.st_mode & 077) != 0) {
    throw UsageError(
        fmt::format("{} {}: group or others may access it (mode {:04o}); run chmod 600 {}", source,
                    path, st.st_mode & 07777, path));
  }
}

}  // namespace

std::string read_token_file(const std::string& path, const std::string& source) {
  check_private(path, source);
  const std::string head = read_head(path);
  if (head.size() > kMaxTokenBytes) {
    throw UsageError(fmt::format("{} {}: longer than {} bytes; a token is one short line", source,
                                 path, kMaxTokenBytes));
  }
  std::string token = trimmed_first_line(head);
  if (token.empty()) {
    throw UsageError(
        fmt::format("{} {}: the first line is empty; put the token there", source, path));
  }
  return token;
}

std::optional<std::string> user_secret_path(const EnvMap& env) {
  if (auto xdg = lookup(env, "XDG_CONFIG_HOME"); xdg && !xdg->empty())
    return *xdg + "/npu_run/rdzv_secret";
  const auto home = lookup(env, "HOME");
  if (!home || home->empty()) return std::nullopt;
  return *home + "/.config/npu_run/rdzv_secret";
}

}  // namespace npu_run
