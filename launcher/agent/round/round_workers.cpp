#include "agent/round/round_workers.hpp"

namespace npu_run {

namespace {

class GroupOfProcesses : public RoundWorkers {
 public:
  GroupOfProcesses(boost::asio::io_context& io, std::vector<WorkerSpec> specs, StopPolicy policy,
                   Guardian* guardian)
      : group_(io, std::move(specs), policy, guardian) {}
  void start(DoneHandler on_done) override { group_.start(std::move(on_done)); }
  void forward_signal(int sig) override { group_.forward_signal(sig); }
  void stop(int sig) override { group_.stop(sig); }
  std::vector<pid_t> running_pids() const override { return group_.running_pids(); }
  pid_t pid_of(int local_rank) const override { return group_.pid_of(local_rank); }
  void on_each_exit(const WorkerGroup::ExitHandler& handler) override {
    group_.on_each_exit(handler);
  }

 private:
  WorkerGroup group_;
};

}  // namespace

MakeRoundWorkers worker_groups(boost::asio::io_context& io, Guardian* guardian) {
  return [&io, guardian](std::vector<WorkerSpec> specs, StopPolicy policy) {
    return std::make_unique<GroupOfProcesses>(io, std::move(specs), policy, guardian);
  };
}

}  // namespace npu_run
