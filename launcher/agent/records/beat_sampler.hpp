// Looks at the ranks' beats for the timeline while a round's workers run (AgentTimeline::
// sample), on a timer of the agent's loop that slows down as the samples fill: never per beat.
#pragma once

#include <memory>

namespace boost::asio {
class io_context;
}

namespace npu_run {

class AgentTimeline;
class ProgressBeats;

class BeatSampler {
 public:
  explicit BeatSampler(boost::asio::io_context& io);
  ~BeatSampler();
  BeatSampler(const BeatSampler&) = delete;
  BeatSampler& operator=(const BeatSampler&) = delete;

  // Samples into `timeline` until stop(); both must outlive the sampling.
  void start(AgentTimeline& timeline, const ProgressBeats& beats);
  void stop();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace npu_run
