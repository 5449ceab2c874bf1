#include "agent/health/npu_info_snapshot.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "agent/health/tool_call.hpp"
#include "basics/descriptors.hpp"

namespace npu_run {

namespace asio = boost::asio;

namespace {

// A version file, as `cat` prints it (at most what a tool's output may be).
std::string read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text(std::istreambuf_iterator<char>(in), {});
  if (text.size() > kToolOutputCap) text.resize(kToolOutputCap);
  return text;
}

std::vector<std::string> existing_version_files() {
  std::vector<std::string> found;
  for (const std::string& file : npu_info_version_files()) {
    if (::access(file.c_str(), R_OK) == 0) found.push_back(file);
  }
  return found;
}

}  // namespace

struct NpuInfoSnapshot::Timers {
  explicit Timers(asio::io_context& io) : budget(io), pause(io) {}
  asio::steady_timer budget;
  asio::steady_timer pause;  // before a busy call's retry
};

NpuInfoSnapshot::NpuInfoSnapshot(asio::io_context& io, ChildExits& exits, Settings settings)
    : io_(io),
      exits_(exits),
      settings_(std::move(settings)),
      timers_(std::make_unique<Timers>(io)) {}

NpuInfoSnapshot::~NpuInfoSnapshot() = default;

void NpuInfoSnapshot::start(std::function<void()> done) {
  done_ = std::move(done);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  text_ = npu_info_header(std::chrono::duration_cast<std::chrono::microseconds>(now).count());
  const std::vector<NpuInfoEntry> first = npu_info_first(settings_.tools);
  waiting_.assign(first.begin(), first.end());
  chips_known_ = waiting_.empty();
  if (chips_known_) {
    const auto rest =
        npu_info_rest(settings_.tools, {}, settings_.devices, existing_version_files());
    waiting_.assign(rest.begin(), rest.end());
  }
  timers_->budget.expires_after(settings_.run.budget);
  timers_->budget.async_wait([weak = weak_from_this()](boost::system::error_code cancelled) {
    if (auto self = weak.lock(); self && !cancelled) {
      self->out_of_budget_ = true;
      self->cancel();
    }
  });
  // Posted: `done` never runs inside start().
  asio::post(io_, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->run_next();
  });
}

void NpuInfoSnapshot::cancel() {
  waiting_.clear();
  timers_->pause.cancel();
  if (running_) {
    running_->cancel();  // its answer comes, and finishes
  } else {
    asio::post(io_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->finish();
    });
  }
}

void NpuInfoSnapshot::run_next() {
  if (!done_ || running_) return;
  // "cat" entries are read here; the first tool entry starts.
  while (!waiting_.empty() && waiting_.front().argv.empty()) {
    text_ += npu_info_block(waiting_.front(), read_small_file(waiting_.front().file));
    waiting_.pop_front();
  }
  if (waiting_.empty()) return finish();
  ++tries_;
  running_ = ToolCall::start(io_, exits_, waiting_.front().argv, settings_.run.call_timeout,
                             [weak = weak_from_this()](const ToolRun& run) {
                               if (auto self = weak.lock()) self->answered(run);
                             });
}

void NpuInfoSnapshot::answered(const ToolRun& run) {
  running_.reset();
  if (!done_) return;
  if (waiting_.empty()) return finish();  // cancelled: what it printed is not kept
  if (run.busy() && tries_ < settings_.run.busy_tries && !out_of_budget_) {
    timers_->pause.expires_after(settings_.run.busy_pause);
    timers_->pause.async_wait([weak = weak_from_this()](boost::system::error_code cancelled) {
      if (auto self = weak.lock(); self && !cancelled) self->run_next();
    });
    return;
  }
  tries_ = 0;
  const NpuInfoEntry entry = std::move(waiting_.front());
  waiting_.pop_front();
  text_ += npu_info_block(entry, run.out);
  if (!chips_known_) {
    chips_known_ = true;
    std::vector<ChipMapRow> chips;
    for (const ChipMapRow& chip : parse_chip_map(run.out)) {
      if (std::find(settings_.devices.begin(), settings_.devices.end(), chip.physical_id) !=
          settings_.devices.end())
        chips.push_back(chip);
    }
    const auto rest =
        npu_info_rest(settings_.tools, chips, settings_.devices, existing_version_files());
    waiting_.insert(waiting_.end(), rest.begin(), rest.end());
  }
  run_next();
}

void NpuInfoSnapshot::finish() {
  if (!done_) return;
  timers_->budget.cancel();
  const std::string temporary = settings_.path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool written = fd >= 0 && write_fully(fd, text_);
  int error = errno;
  if (fd >= 0) ::close(fd);
  if (written && std::rename(temporary.c_str(), settings_.path.c_str()) != 0) {
    written = false;
    error = errno;
  }
  if (!written) {
    spdlog::warn("cannot write {}: {}", settings_.path, std::strerror(error));
    ::unlink(temporary.c_str());
  }
  auto done = std::move(done_);
  done_ = nullptr;
  done();
}

}  // namespace npu_run
