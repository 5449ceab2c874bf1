#include "agent/records/agent_log.hpp"

#include <fmt/format.h>
#include <spdlog/details/os.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <array>
#include <mutex>

#include "workers/console.hpp"

namespace npu_run {

namespace {

// spdlog's stderr sink writes with a blocking fwrite; this one hands the line to the console
// stream, which queues it while the event loop runs. Agent lines are never dropped (they are
// few, and strangers' lines are rate-limited), and they keep their order with worker lines.
class ConsoleLogSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  ConsoleLogSink()
      : colors_(spdlog::details::os::in_terminal(stderr) &&
                spdlog::details::os::is_color_terminal()) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    const std::string_view line(formatted.data(), formatted.size());
    if (!colors_ || msg.color_range_end <= msg.color_range_start) {
      console_err().write(nullptr, line);
      return;
    }
    // The level name in colour, as spdlog's own colour sink shows it on a terminal.
    static constexpr std::array<std::string_view, 7> kColors = {
        "\033[37m",        "\033[36m",        "\033[32m", "\033[33m\033[1m",
        "\033[31m\033[1m", "\033[1m\033[41m", ""};
    std::string coloured;
    coloured.append(line.substr(0, msg.color_range_start));
    coloured.append(kColors.at(static_cast<size_t>(msg.level)));
    coloured.append(
        line.substr(msg.color_range_start, msg.color_range_end - msg.color_range_start));
    coloured.append("\033[m");
    coloured.append(line.substr(msg.color_range_end));
    console_err().write(nullptr, coloured);
  }
  void flush_() override {}

 private:
  bool colors_;
};

}  // namespace

void configure_agent_logging(const std::string& level, const std::string& host,
                             std::optional<int> node_rank) {
  spdlog::drop("npu_run");
  auto logger = std::make_shared<spdlog::logger>("npu_run", std::make_shared<ConsoleLogSink>());
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
  set_agent_log_identity(node_rank.value_or(-1), host);
}

namespace {

void set_identity(const std::string& who) {
  // The identity is baked into the pattern; fmt braces must not reach spdlog's formatter.
  spdlog::set_pattern(fmt::format("%Y-%m-%d %H:%M:%S.%e [npu_run {}] %^%l%$: %v", who));
}

}  // namespace

void set_agent_log_identity(int node_rank, const std::string& host) {
  // Before the rendezvous gives it a rank, a node is its host alone ("node ?" read as broken).
  set_identity(node_rank < 0 ? host : fmt::format("node {} {}", node_rank, host));
}

void set_launcher_log_identity(const std::string& host) {
  set_identity("launcher " + host);
}

}  // namespace npu_run
