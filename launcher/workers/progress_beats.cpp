#include "workers/progress_beats.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/datagram_protocol.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>

namespace npu_run {

namespace asio = boost::asio;
using datagram = asio::local::datagram_protocol;

namespace {

// sun_path holds 108 bytes with its terminating NUL; "/<rank>" follows the directory.
constexpr size_t kMaxDirectory = 96;

std::string make_private_directory() {
  std::vector<std::string> bases;
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') bases.emplace_back(tmp);
  bases.emplace_back("/tmp");
  std::string last_error;
  for (const std::string& base : bases) {
    std::string pattern = base + "/npu_run_progress_XXXXXX";
    if (pattern.size() > kMaxDirectory) {
      last_error = fmt::format("{}: too long for a socket's path", base);
      continue;
    }
    if (::mkdtemp(pattern.data()) != nullptr) return pattern;  // mode 0700
    last_error = fmt::format("{}: {}", base, std::strerror(errno));
  }
  throw std::runtime_error("cannot create a directory for the progress sockets (" + last_error + ")");
}

}  // namespace

struct ProgressBeats::Impl : std::enable_shared_from_this<Impl> {
  struct Rank {
    explicit Rank(asio::io_context& io) : socket(io) {}
    datagram::socket socket;
    std::string path;
    RankProgress progress;
  };

  Impl(asio::io_context& io, int local_ranks) : directory(make_private_directory()) {
    try {
      for (int r = 0; r < local_ranks; ++r) {
        auto rank = std::make_unique<Rank>(io);
        rank->path = fmt::format("{}/{}", directory, r);
        const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) throw std::runtime_error(fmt::format("socket: {}", std::strerror(errno)));
        boost::system::error_code ec;
        rank->socket.assign(datagram(), fd, ec);
        if (!ec) rank->socket.bind(datagram::endpoint(rank->path), ec);
        if (ec) throw std::runtime_error(fmt::format("{}: {}", rank->path, ec.message()));
        ranks.push_back(std::move(rank));
      }
    } catch (...) {
      remove();
      throw;
    }
  }

  void start() {
    for (size_t r = 0; r < ranks.size(); ++r) wait(r);
  }

  void wait(size_t r) {
    ranks[r]->socket.async_wait(datagram::socket::wait_read,
                                [weak = weak_from_this(), r](boost::system::error_code ec) {
                                  auto self = weak.lock();
                                  if (!self || ec) return;
                                  self->drain(r);
                                  self->wait(r);
                                });
  }

  // Everything queued, in one go: only the last text matters, every datagram is a beat.
  void drain(size_t r) {
    Rank& rank = *ranks[r];
    std::array<char, kMaxBeatText> buffer{};
    for (;;) {
      const ssize_t n = ::recv(rank.socket.native_handle(), buffer.data(), buffer.size(), 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        return;  // EAGAIN: drained
      }
      beat(rank.progress, std::string_view(buffer.data(), static_cast<size_t>(n)));
    }
  }

  static void beat(RankProgress& p, std::string_view text) {
    const auto now = std::chrono::steady_clock::now();
    if (p.beats > 0) p.longest_interval = std::max(p.longest_interval, now - p.last);
    ++p.beats;
    p.last = now;
    p.last_wall = std::chrono::system_clock::now();
    // Text for log lines: control characters (a newline, an escape) become spaces.
    p.text.assign(text);
    for (char& c : p.text) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    }
  }

  void remove() noexcept {
    std::error_code ignored;
    for (const auto& rank : ranks) {
      boost::system::error_code closed;
      rank->socket.close(closed);
      std::filesystem::remove(rank->path, ignored);
    }
    std::filesystem::remove(directory, ignored);
  }

  std::string directory;
  std::vector<std::unique_ptr<Rank>> ranks;
};

int64_t progress_value(const RankProgress& progress) {
  const std::string& text = progress.text;
  const auto digit = [&text](size_t i) { return std::isdigit(static_cast<unsigned char>(text[i])) != 0; };
  std::optional<int64_t> last;
  for (size_t i = 0; i < text.size();) {
    if (!digit(i)) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && digit(end)) ++end;
    // Part of a decimal ("loss 0.5") is not a step.
    const bool decimal = (i > 0 && text[i - 1] == '.') || (end < text.size() && text[end] == '.');
    if (!decimal) last = std::stoll(text.substr(i, std::min<size_t>(end - i, 18)));
    i = end;
  }
  return last.value_or(static_cast<int64_t>(progress.beats));
}

ProgressBeats::ProgressBeats(asio::io_context& io, int local_ranks)
    : impl_(std::make_shared<Impl>(io, local_ranks)) {
  impl_->start();
}

ProgressBeats::~ProgressBeats() {
  impl_->remove();
}

std::string ProgressBeats::path(int local_rank) const {
  return impl_->ranks.at(static_cast<size_t>(local_rank))->path;
}

void ProgressBeats::new_attempt() {
  for (const auto& rank : impl_->ranks) {
    const auto longest = rank->progress.longest_interval;
    rank->progress = RankProgress{};
    rank->progress.longest_interval = longest;
  }
}

const RankProgress& ProgressBeats::rank(int local_rank) const {
  return impl_->ranks.at(static_cast<size_t>(local_rank))->progress;
}

int ProgressBeats::local_ranks() const {
  return static_cast<int>(impl_->ranks.size());
}

}  // namespace npu_run
