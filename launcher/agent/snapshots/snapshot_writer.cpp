#include "agent/snapshots/snapshot_writer.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

namespace npu_run {
namespace {

constexpr size_t kChunk = size_t{64} << 20;  // between looks at `stop`

class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

std::string failure(const std::string& what, const std::string& path) {
  return fmt::format("{} {}: {}", what, path, std::strerror(errno));
}

// Copies `from` into `to` to its end: sendfile (file to file since Linux 2.6.33), else read and
// write. Empty when done; "stopped" when `stop` was set.
std::string copy_bytes(int from, int to, const std::string& target, const std::atomic<bool>& stop,
                       uint64_t& bytes) {
  bool plain = false;
  std::vector<char> buffer;
  while (!stop) {
    ssize_t n = 0;
    if (!plain) {
      n = ::sendfile(to, from, nullptr, kChunk);
      if (n < 0 && (errno == EINVAL || errno == ENOSYS)) {
        plain = true;
        buffer.resize(size_t{1} << 20);
        continue;
      }
    } else {
      n = ::read(from, buffer.data(), buffer.size());
      for (ssize_t put = 0; n > 0 && put < n;) {
        const ssize_t w = ::write(to, buffer.data() + put, static_cast<size_t>(n - put));
        if (w < 0 && errno != EINTR) return failure("cannot write", target);
        put += std::max<ssize_t>(w, 0);
      }
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return failure("cannot write", target);
    if (n == 0) return "";
    bytes += static_cast<uint64_t>(n);
  }
  return "stopped";
}

// Makes `written` durable under its name: fsync, rename over `target`, fsync of the directory.
std::string publish(Descriptor& file, const std::string& temporary, const std::string& target) {
  if (::fsync(file.get()) != 0) return failure("cannot fsync", temporary);
  if (::close(file.release()) != 0) return failure("cannot close", temporary);
  if (::rename(temporary.c_str(), target.c_str()) != 0) return failure("cannot rename to", target);
  const std::string directory = std::filesystem::path(target).parent_path().string();
  const Descriptor dir(
      ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) (void)::fsync(dir.get());  // a file system that cannot is no reason to fail
  return "";
}

// One write, as the thread does it; `stop` is read between chunks.
SnapshotWritten write_snapshot(const SnapshotWrite& job, const std::atomic<bool>& stop) {
  SnapshotWritten out{job, "", false, 0, 0};
  const auto began = std::chrono::steady_clock::now();
  Descriptor from(::open(job.segment.c_str(), O_RDONLY | O_CLOEXEC));
  if (from.get() < 0) {
    out.gone = errno == ENOENT;
    if (!out.gone) out.error = failure("cannot read the segment", job.segment);
    return out;
  }
  const std::filesystem::path target(job.path);
  const std::string temporary =
      (target.parent_path() /
       fmt::format(".{}.npu_run-{}.tmp", target.filename().string(), ::getpid()))
          .string();
  Descriptor to(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
  if (to.get() < 0) {
    out.error = failure("cannot create", temporary);
    return out;
  }
  out.error = copy_bytes(from.get(), to.get(), job.path, stop, out.bytes);
  if (out.error.empty()) out.error = publish(to, temporary, job.path);
  if (!out.error.empty()) ::unlink(temporary.c_str());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return out;
}

}  // namespace

SnapshotWriter::SnapshotWriter(boost::asio::io_context& io,
                               std::function<void(const SnapshotWritten&)> done)
    : io_(io),
      done_(std::move(done)),
      alive_(std::make_shared<SnapshotWriter*>(this)),
      thread_([this] { run(); }) {}

SnapshotWriter::~SnapshotWriter() {
  alive_.reset();
  {
    const std::lock_guard lock(mutex_);
    jobs_.clear();
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

std::optional<int64_t> SnapshotWriter::write(SnapshotWrite job) {
  std::optional<int64_t> superseded;
  {
    const std::lock_guard lock(mutex_);
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
      if (it->removals.empty() && it->write.rank == job.rank) {
        superseded = it->write.step;
        jobs_.erase(it);  // before it began
        --outstanding_;
        break;
      }
    }
    jobs_.push_back(Job{std::move(job), {}});
    ++outstanding_;
  }
  wake_.notify_one();
  return superseded;
}

void SnapshotWriter::remove(std::vector<std::string> paths) {
  if (paths.empty()) return;
  {
    const std::lock_guard lock(mutex_);
    jobs_.push_back(Job{{}, std::move(paths)});
  }
  wake_.notify_one();
}

void SnapshotWriter::when_drained(std::function<void()> drained) {
  if (outstanding_ == 0) return drained();
  drained_.push_back(std::move(drained));
}

void SnapshotWriter::run() {
  while (true) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (!job.removals.empty()) {
      for (const std::string& path : job.removals) (void)::unlink(path.c_str());
      continue;
    }
    SnapshotWritten written = write_snapshot(job.write, stop_);
    boost::asio::post(io_, [weak = watch_, written] {
      if (const auto self = weak.lock()) (*self)->finished(written);
    });
  }
}

void SnapshotWriter::finished(const SnapshotWritten& written) {
  --outstanding_;
  done_(written);
  if (outstanding_ > 0) return;
  for (auto& drained : std::exchange(drained_, {})) drained();
}

}  // namespace npu_run
