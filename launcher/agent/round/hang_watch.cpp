#include "agent/round/hang_watch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <vector>

#include "basics/durations.hpp"

namespace npu_run {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {}  // namespace

std::string describe(const Hang& hang, int other_workers) {
  if (hang.kind == Hang::Kind::kRecorderTimeout) {
    return fmt::format(
        "its flight recorder's watchdog found a collective past its timeout and dumped the "
        "recorder to {}",
        hang.recorder_dump);
  }
  if (hang.kind == Hang::Kind::kStraggler) {
    return fmt::format("still running {:.0f} s after the other {} local worker{} exited 0",
                       seconds(hang.silence), other_workers, other_workers == 1 ? "" : "s");
  }
  return fmt::format("no progress for {:.0f} s after '{}' (beat {}; --hang-timeout {:.0f} s)",
                     seconds(hang.silence), hang.last_text, hang.beats, seconds(hang.timeout));
}

milliseconds hang_timeout(const HangPolicy& policy, Clock::duration longest_interval) {
  if (!policy.learned) return policy.timeout;
  const auto learned = std::chrono::duration_cast<milliseconds>(
      std::chrono::duration<double, std::milli>(longest_interval) * policy.learned_factor);
  return std::max(policy.timeout, learned);
}

struct HangWatch::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io, const ProgressBeats& progress, HangPolicy hang_policy,
       HangHandler handler)
      : beats(progress), policy(hang_policy), on_hang(std::move(handler)), timer(io) {}

  void start() {
    running.assign(static_cast<size_t>(beats.local_ranks()), true);
    succeeded = 0;
    others_done_at.reset();
    watching = true;
    check();
  }

  void exited(int local_rank, bool success) {
    if (!watching || local_rank < 0 || static_cast<size_t>(local_rank) >= running.size()) return;
    running[static_cast<size_t>(local_rank)] = false;
    if (!success) return;
    ++succeeded;
    const auto still = std::count(running.begin(), running.end(), true);
    // The straggler clock starts when every other worker has exited 0.
    if (still == 1 && succeeded == static_cast<int>(running.size()) - 1) {
      others_done_at = Clock::now();
      check();
    }
  }

  void stop() {
    watching = false;
    timer.cancel();
  }

  // Reports the first rank past its deadline, else sleeps until the earliest one. Ranks that
  // have not beaten yet have no deadline: they are looked at again one timeout from now, the
  // earliest they could be late.
  void check() {
    if (!watching) return;
    const auto now = Clock::now();
    Clock::duration longest{};
    for (int r = 0; r < beats.local_ranks(); ++r)
      longest = std::max(longest, beats.rank(r).longest_interval);
    const milliseconds timeout = hang_timeout(policy, longest);
    std::optional<Clock::time_point> next;
    const auto consider = [&next](Clock::time_point at) { next = next ? std::min(*next, at) : at; };
    for (int r = 0; r < beats.local_ranks(); ++r) {
      if (!running[static_cast<size_t>(r)]) continue;
      const RankProgress& p = beats.rank(r);
      if (policy.exit_timeout && others_done_at) {
        const auto deadline = *others_done_at + *policy.exit_timeout;
        if (now >= deadline)
          return report({Hang::Kind::kStraggler, r, *policy.exit_timeout, now - *others_done_at,
                         p.beats, p.text});
        consider(deadline);
      }
      if (!policy.enabled() || p.beats == 0) continue;
      const auto deadline = p.last + timeout;
      if (now >= deadline)
        return report({Hang::Kind::kNoProgress, r, timeout, now - p.last, p.beats, p.text});
      consider(deadline);
    }
    if (policy.enabled()) consider(now + timeout);
    if (!next) return;  // nothing can hang until a worker exits
    timer.expires_at(*next);
    timer.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->check();
    });
  }

  void report(const Hang& hang) {
    watching = false;
    timer.cancel();
    on_hang(hang);
  }

  const ProgressBeats& beats;
  HangPolicy policy;
  HangHandler on_hang;
  asio::steady_timer timer;
  std::vector<bool> running;
  int succeeded = 0;
  std::optional<Clock::time_point> others_done_at;
  bool watching = false;
};

HangWatch::HangWatch(asio::io_context& io, const ProgressBeats& beats, HangPolicy policy,
                     HangHandler on_hang)
    : impl_(std::make_shared<Impl>(io, beats, policy, std::move(on_hang))) {}

HangWatch::~HangWatch() {
  impl_->stop();
}

void HangWatch::start() {
  impl_->start();
}

void HangWatch::exited(int local_rank, bool success) {
  impl_->exited(local_rank, success);
}

void HangWatch::stop() {
  impl_->stop();
}

}  // namespace npu_run
