#include "agent/link/etcd_job_memory.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>
#include <vector>

namespace npu_run {

EtcdJobMemory::EtcdJobMemory(boost::asio::io_context& io, etcd::Client& client, std::string key,
                             std::string leader_key, std::function<bool()> leading)
    : io_(io),
      client_(client),
      key_(std::move(key)),
      leader_key_(std::move(leader_key)),
      leading_(std::move(leading)) {}

EtcdJobMemory::~EtcdJobMemory() = default;

void EtcdJobMemory::follow(std::function<void()> read,
                           std::function<void(const std::string&)> failed) {
  read_ = std::move(read);
  failed_ = std::move(failed);
  read_then_watch();
}

void EtcdJobMemory::read_then_watch() {
  client_.call("/v3/kv/range", etcd::range_request(key_, false),
               [this, alive = std::weak_ptr<int>(alive_)](etcd::Reply reply) {
                 if (alive.expired()) return;
                 if (const auto* f = std::get_if<etcd::Failure>(&reply)) {
                   if (failed_) failed_(f->what);
                   return;
                 }
                 const nlohmann::json& answer = std::get<nlohmann::json>(reply);
                 for (const etcd::KeyValue& kv : etcd::range_kvs(answer)) take(kv.value);
                 watch_from(etcd::header_revision(answer) + 1);
                 if (read_) read_();
               });
}

void EtcdJobMemory::watch_from(int64_t revision) {
  etcd::WatchHandlers on;
  on.events = [this](const std::vector<etcd::WatchEvent>& events, int64_t) {
    for (const etcd::WatchEvent& e : events) {
      if (!e.deleted && !leading_()) take(e.kv.value);
    }
  };
  on.end = [this](const std::string& why) {
    spdlog::warn("etcd ended the watch of the job's memory ({}); reading it afresh", why);
    // Not from inside the watch's own handler: it is gone once this returns.
    boost::asio::post(io_, [this, alive = std::weak_ptr<int>(alive_)] {
      if (alive.expired()) return;
      watch_.reset();
      read_then_watch();
    });
  };
  watch_ = std::make_unique<etcd::Watch>(io_, client_, key_, revision, std::move(on));
}

void EtcdJobMemory::take(const std::string& value) {
  try {
    latest_ = rdzv::memory_from(nlohmann::json::parse(value));
  } catch (const std::exception& e) {
    spdlog::warn("etcd holds a job memory npu_run cannot read: {}", e.what());
  }
}

void EtcdJobMemory::write(const rdzv::JobMemory& memory, int64_t epoch, int64_t lease,
                          std::function<void()> fenced_out) {
  latest_ = memory;
  Write w{memory, epoch, lease, std::move(fenced_out)};
  if (writing_) {
    next_write_ = std::move(w);
    return;
  }
  start_write(std::move(w));
}

void EtcdJobMemory::start_write(Write w) {
  writing_ = true;
  const auto puts =
      std::vector<std::pair<std::string, std::string>>{{key_, rdzv::to_json(w.memory).dump()}};
  client_.call(
      "/v3/kv/txn", etcd::guarded_txn_request(leader_key_, w.epoch, puts, {}, w.lease),
      [this, alive = std::weak_ptr<int>(alive_),
       fenced_out = std::move(w.fenced_out)](etcd::Reply reply) {
        if (alive.expired()) return;
        writing_ = false;
        if (const auto* f = std::get_if<etcd::Failure>(&reply)) {
          spdlog::warn(
              "the job's memory was not written to etcd ({}): a successor would continue from "
              "an older one",
              f->what);
        } else if (!etcd::txn_result(std::get<nlohmann::json>(reply)).succeeded) {
          if (fenced_out) fenced_out();
          if (alive.expired()) return;
        }
        if (next_write_) {
          Write next = std::move(*next_write_);
          next_write_.reset();
          start_write(std::move(next));
        } else if (auto then = std::move(after_writes_)) {
          after_writes_ = nullptr;
          then();
        }
      });
}

void EtcdJobMemory::after_writes(std::function<void()> then) {
  if (!writing_) {
    then();
    return;
  }
  after_writes_ = std::move(then);
}

void EtcdJobMemory::stop() {
  watch_.reset();
}

}  // namespace npu_run
