#include "store/drop_log.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace npu_run::store {

void DropLog::dropped(const std::string& peer, const std::string& why) {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::seconds(1)) {
    ++held_back_;
    return;
  }
  spdlog::warn(
      "{}: closed the connection of {}: {}{}", who_, peer, why,
      held_back_ > 0 ? fmt::format(" ({} more since the last such line)", held_back_) : "");
  held_back_ = 0;
  last_ = now;
}

}  // namespace npu_run::store
