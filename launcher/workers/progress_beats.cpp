#include "workers/progress_beats.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "workers/agent_directory.hpp"

namespace npu_run {

namespace asio = boost::asio;

struct ProgressBeats::Impl : std::enable_shared_from_this<Impl> {
  struct Rank {
    int fd = -1;
    std::string path;
    RankProgress progress;
  };

  // The sockets are not Asio's: they sit in a private epoll set, one-shot, whose own
  // descriptor is what the agent's loop waits on, and only while no collection is due. A
  // socket Asio watched would wake the loop for every datagram (edge-triggered, whether or not
  // anyone waits), and so would the set if it stayed in the loop's epoll; here a burst costs
  // one wake-up (the set leaves the loop's epoll), then beats are collected kCollectEvery
  // later, from every rank at once, and only then is each socket that fired armed again and
  // the set watched again. Workers beating a thousand times a second thus cost the agent at
  // most 200 collections a second, and the kernel's queue per socket (net.unix.max_dgram_qlen,
  // 10 by default) holds what arrives meanwhile.
  Impl(asio::io_context& io, int local_ranks)
      : directory(make_agent_directory()), set(io), collect_timer(io) {
    try {
      epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
      if (epoll_fd < 0)
        throw std::runtime_error(fmt::format("epoll_create1: {}", std::strerror(errno)));
      for (int r = 0; r < local_ranks; ++r) {
        Rank rank;
        rank.path = fmt::format("{}/{}", directory, r);
        rank.fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (rank.fd < 0) throw std::runtime_error(fmt::format("socket: {}", std::strerror(errno)));
        ranks.push_back(rank);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::memcpy(address.sun_path, rank.path.c_str(), rank.path.size() + 1);
        if (::bind(rank.fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
          throw std::runtime_error(fmt::format("{}: {}", rank.path, std::strerror(errno)));
        arm(static_cast<size_t>(r), EPOLL_CTL_ADD);
      }
    } catch (...) {
      remove();
      throw;
    }
  }

  void arm(size_t r, int operation) {
    epoll_event event{};
    event.events = EPOLLIN | EPOLLONESHOT;
    event.data.u64 = r;
    if (::epoll_ctl(epoll_fd, operation, ranks[r].fd, &event) != 0 && operation == EPOLL_CTL_ADD)
      throw std::runtime_error(fmt::format("epoll_ctl: {}", std::strerror(errno)));
  }

  void wait() {
    boost::system::error_code assigned;
    set.assign(epoll_fd, assigned);
    if (assigned) {
      spdlog::warn("progress beats: cannot watch their sockets ({}); beats are no longer read",
                   assigned.message());
      return;
    }
    set.async_wait(asio::posix::stream_descriptor::wait_read,
                   [weak = weak_from_this()](boost::system::error_code ec) {
                     auto self = weak.lock();
                     if (!self || ec) return;
                     self->set.release();  // out of the loop's epoll until the collection
                     self->collect_timer.expires_after(kCollectEvery);
                     self->collect_timer.async_wait([weak](boost::system::error_code timer_ec) {
                       auto me = weak.lock();
                       if (!me || timer_ec) return;
                       me->collect();
                       me->wait();
                     });
                   });
  }

  void collect() {
    std::array<epoll_event, 64> fired{};
    for (;;) {
      const int n = ::epoll_wait(epoll_fd, fired.data(), static_cast<int>(fired.size()), 0);
      if (n <= 0) return;
      for (int i = 0; i < n; ++i) {
        const auto r = static_cast<size_t>(fired[static_cast<size_t>(i)].data.u64);
        drain(r);
        arm(r, EPOLL_CTL_MOD);
      }
      if (n < static_cast<int>(fired.size())) return;
    }
  }

  // Everything queued, a batch per system call: every datagram is a beat, the last one's text
  // the rank's progress, and the batch's beats share the time they were collected at. Automatic
  // beats (kAutomaticBeatMark first) count until the rank's first beat of its own.
  void drain(size_t r) {
    constexpr size_t kBatch = 16;
    std::array<std::array<char, kMaxBeatText + 1>, kBatch> buffers{};
    std::array<iovec, kBatch> vectors{};
    std::array<mmsghdr, kBatch> messages{};
    for (size_t i = 0; i < kBatch; ++i) {
      vectors[i] = {buffers[i].data(), buffers[i].size()};
      messages[i].msg_hdr.msg_iov = &vectors[i];
      messages[i].msg_hdr.msg_iovlen = 1;
    }
    for (;;) {
      const int n = ::recvmmsg(ranks[r].fd, messages.data(), kBatch, MSG_DONTWAIT, nullptr);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // EAGAIN: drained
      RankProgress& progress = ranks[r].progress;
      uint64_t counted = 0;
      std::string_view last_text;
      for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
        std::string_view text(buffers[i].data(), messages[i].msg_len);
        const bool automatic = !text.empty() && text.front() == kAutomaticBeatMark;
        if (automatic && progress.beats_itself) continue;
        if (!automatic && !progress.beats_itself) {
          progress.beats_itself = true;  // its own from now on: earlier automatic ones stand
        }
        if (automatic) text.remove_prefix(1);
        ++counted;
        last_text = text.substr(0, kMaxBeatText);
      }
      if (counted > 0) beat(progress, counted, last_text);
      if (static_cast<size_t>(n) < kBatch) return;
    }
  }

  static void beat(RankProgress& p, uint64_t count, std::string_view last_text) {
    const auto now = std::chrono::steady_clock::now();
    if (p.beats > 0) p.longest_interval = std::max(p.longest_interval, now - p.last);
    p.last = now;
    p.last_wall = std::chrono::system_clock::now();
    if (p.beats == 0) p.first_wall = p.last_wall;
    p.beats += count;
    // Text for log lines: control characters (a newline, an escape) become spaces.
    p.text.assign(last_text);
    for (char& c : p.text) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    }
  }

  void remove() noexcept {
    collect_timer.cancel();
    if (set.is_open()) set.release();  // closed below, with the sockets
    if (epoll_fd >= 0) ::close(epoll_fd);
    epoll_fd = -1;
    std::error_code ignored;
    for (Rank& rank : ranks) {
      if (rank.fd >= 0) ::close(rank.fd);
      rank.fd = -1;
      std::filesystem::remove(rank.path, ignored);
    }
    std::filesystem::remove_all(directory, ignored);  // with the agent's status socket
  }

  static constexpr std::chrono::milliseconds kCollectEvery{5};

  std::string directory;
  std::vector<Rank> ranks;
  int epoll_fd = -1;                   // the private epoll set
  asio::posix::stream_descriptor set;  // epoll_fd while the loop watches it
  asio::steady_timer collect_timer;
};

int64_t progress_value(const RankProgress& progress) {
  const std::string& text = progress.text;
  const auto digit = [&text](size_t i) {
    return std::isdigit(static_cast<unsigned char>(text[i])) != 0;
  };
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
  impl_->wait();
}

ProgressBeats::~ProgressBeats() {
  impl_->remove();
}

const std::string& ProgressBeats::directory() const {
  return impl_->directory;
}

std::string ProgressBeats::path(int local_rank) const {
  return impl_->ranks.at(static_cast<size_t>(local_rank)).path;
}

void ProgressBeats::collect_now() {
  for (size_t r = 0; r < impl_->ranks.size(); ++r) impl_->drain(r);
}

void ProgressBeats::new_attempt() {
  for (auto& rank : impl_->ranks) {
    const auto longest = rank.progress.longest_interval;
    const bool beats_itself = rank.progress.beats_itself;
    rank.progress = RankProgress{};
    rank.progress.longest_interval = longest;
    rank.progress.beats_itself = beats_itself;
  }
}

const RankProgress& ProgressBeats::rank(int local_rank) const {
  return impl_->ranks.at(static_cast<size_t>(local_rank)).progress;
}

int ProgressBeats::local_ranks() const {
  return static_cast<int>(impl_->ranks.size());
}

}  // namespace npu_run
