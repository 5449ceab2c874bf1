#include "agent/link/job_token.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "basics/token_file.hpp"
#include "basics/usage_error.hpp"
#include "rendezvous/protocol/auth.hpp"

namespace npu_run {

namespace {

// Writes a fresh secret next to `path` and links it into place; link() fails if another node
// (or process) got there first, and then that one's secret is the one everybody reads.
void create_secret(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  ::chmod(path.parent_path().c_str(), 0700);
  // Unique per attempt: several agents (or threads) may be creating it at the same moment.
  const std::string temp =
      fmt::format("{}.{}.{}.tmp", path.string(), ::getpid(), rdzv::random_nonce().substr(0, 16));
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw UsageError(fmt::format(
        "cannot create the rendezvous secret {}: {}; give a token with --rdzv-token-file or {}",
        path.string(), std::strerror(errno), kTokenVariable));
  }
  const std::string secret = rdzv::random_nonce() + "\n";
  const bool written =
      ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
  ::close(fd);
  const bool linked = written && ::link(temp.c_str(), path.c_str()) == 0;
  const int link_errno = errno;
  ::unlink(temp.c_str());
  if (!linked && !(written && link_errno == EEXIST)) {
    throw UsageError(fmt::format(
        "cannot create the rendezvous secret {}: {}; give a token with --rdzv-token-file or {}",
        path.string(), std::strerror(written ? link_errno : EIO), kTokenVariable));
  }
}

}  // namespace

std::string derive_job_token(const std::string& secret_path, const std::string& job_id) {
  if (!std::filesystem::exists(secret_path)) create_secret(secret_path);
  const std::string secret = read_token_file(secret_path, "rendezvous secret");
  return rdzv::hmac_sha256_hex(secret, "slurm job " + job_id);
}

LaunchConfig with_derived_token(LaunchConfig cfg) {
  if (const auto* derived = std::get_if<DerivedToken>(&cfg.rendezvous.token);
      derived != nullptr && !cfg.agent.dry_run) {
    cfg.rendezvous.token =
        GivenToken{derive_job_token(derived->secret_path, derived->job), derived->source};
  }
  return cfg;
}

}  // namespace npu_run
