#include "agent/records/beat_sampler.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/records/agent_timeline.hpp"

namespace npu_run {

struct BeatSampler::Impl : std::enable_shared_from_this<Impl> {
  explicit Impl(boost::asio::io_context& io) : timer(io) {}

  void wait(std::chrono::milliseconds interval) {
    timer.expires_after(interval);
    timer.async_wait([weak = weak_from_this(), run = run](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->run != run || self->timeline == nullptr) return;
      self->wait(self->timeline->sample(*self->beats));
    });
  }

  boost::asio::steady_timer timer;
  AgentTimeline* timeline = nullptr;
  const ProgressBeats* beats = nullptr;
  uint64_t run = 0;  // a stopped run's wait that already fired does nothing
};

BeatSampler::BeatSampler(boost::asio::io_context& io) : impl_(std::make_shared<Impl>(io)) {}

BeatSampler::~BeatSampler() {
  stop();
}

void BeatSampler::start(AgentTimeline& timeline, const ProgressBeats& beats) {
  stop();
  impl_->timeline = &timeline;
  impl_->beats = &beats;
  impl_->wait(AgentTimeline::kFirstInterval);
}

void BeatSampler::stop() {
  ++impl_->run;
  impl_->timeline = nullptr;
  impl_->beats = nullptr;
  impl_->timer.cancel();
}

}  // namespace npu_run
