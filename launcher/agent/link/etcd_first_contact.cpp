#include "agent/link/etcd_first_contact.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

namespace npu_run {

namespace {

using namespace std::chrono_literals;

constexpr std::chrono::milliseconds kRetry = 1s;
constexpr std::chrono::milliseconds kWarnAgain = 30s;

}  // namespace

EtcdFirstContact::EtcdFirstContact(boost::asio::io_context& io, etcd::Client& client,
                                   std::string endpoints)
    : client_(client), endpoints_(std::move(endpoints)), retry_(io) {}

void EtcdFirstContact::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  call();
}

void EtcdFirstContact::stop() {
  stopped_ = true;
  retry_.cancel();
}

void EtcdFirstContact::call() {
  ++tries_;
  client_.call("/v3/maintenance/status", nlohmann::json::object(),
               [this, alive = std::weak_ptr<int>(alive_)](etcd::Reply reply) {
                 if (alive.expired() || stopped_) return;
                 const auto* f = std::get_if<etcd::Failure>(&reply);
                 if (!f) {
                   if (tries_ > 1) spdlog::info("etcd at {} answers now", endpoints_);
                   return handlers_.answered();
                 }
                 if (f->refused()) {
                   return handlers_.refused(
                       fmt::format("etcd at {} refused this agent: {}", endpoints_, f->what));
                 }
                 warn(f->what);
                 const std::string why = f->what;
                 handlers_.unanswered(why);
                 if (alive.expired() || stopped_) return;
                 retry_.expires_after(kRetry);
                 retry_.async_wait([this, alive](boost::system::error_code ec) {
                   if (!ec && !alive.expired() && !stopped_) call();
                 });
               });
}

void EtcdFirstContact::warn(const std::string& why) {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_warning_) return;
  next_warning_ = now + kWarnAgain;
  spdlog::warn(
      "etcd at {} does not answer this agent ({}); it tries again every second until the "
      "rendezvous' join timeout: check --rdzv-endpoint and that etcd runs there",
      endpoints_, why);
}

}  // namespace npu_run
