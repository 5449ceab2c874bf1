#include "cluster/node_ledger.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "basics/text.hpp"

namespace npu_run {

namespace {

using nlohmann::json;

std::string cut(std::string text) {
  if (text.size() > kMaxLedgerText) text.resize(kMaxLedgerText);
  return text;
}

std::string utc_time(int64_t ms) {
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[32];
  if (std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &utc) == 0) return "?";
  return text;
}

std::string text_of(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? cut(it->get<std::string>()) : std::string();
}

}  // namespace

std::string ledger_line(const LedgerEntry& e) {
  json j{{"host", cut(e.host)}, {"time_ms", e.time_ms}, {"time", utc_time(e.time_ms)}};
  if (e.cleared) {
    j["cleared"] = true;
  } else {
    j["addr"] = cut(e.addr);
    j["node_rank"] = e.node_rank;
    j["reason"] = cut(e.reason);
    j["evidence"] = cut(e.evidence);
    j["job"] = cut(e.job);
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::vector<LedgerEntry> ledger_entries(std::string_view text) {
  std::vector<LedgerEntry> entries;
  for (const std::string_view line : split(text, '\n')) {
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("host") || !j["host"].is_string() || !j.contains("time_ms") ||
        !j["time_ms"].is_number_integer())
      continue;
    LedgerEntry e;
    e.host = text_of(j, "host");
    e.time_ms = j["time_ms"].get<int64_t>();
    e.cleared = j.value("cleared", false);
    e.addr = text_of(j, "addr");
    e.reason = text_of(j, "reason");
    e.evidence = text_of(j, "evidence");
    e.job = text_of(j, "job");
    if (const auto rank = j.find("node_rank"); rank != j.end() && rank->is_number_integer())
      e.node_rank = rank->get<int>();
    if (!e.host.empty()) entries.push_back(std::move(e));
  }
  return entries;
}

std::vector<LedgerEntry> active_entries(const std::vector<LedgerEntry>& all, int64_t now_ms,
                                        int64_t ttl_ms) {
  std::map<std::string, const LedgerEntry*> last;  // a clear record voids what came before
  for (const LedgerEntry& e : all) last[e.host] = &e;
  std::vector<LedgerEntry> active;
  for (const auto& [host, e] : last) {
    if (!e->cleared && now_ms - e->time_ms < ttl_ms) active.push_back(*e);
  }
  return active;
}

std::vector<LedgerEntry> read_ledger(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return {};
    throw std::runtime_error(
        fmt::format("cannot read the ledger of bad nodes {}: {}", path, std::strerror(errno)));
  }
  in.seekg(0, std::ios::end);
  const std::streamoff end = in.tellg();
  if (end <= 0) return {};  // empty, or not a regular file
  const auto size = static_cast<size_t>(end);
  const size_t from = size > kMaxLedgerBytes ? size - kMaxLedgerBytes : 0;
  in.seekg(static_cast<std::streamoff>(from));
  std::string text(size - from, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (from > 0) text.erase(0, text.find('\n') + 1);  // a cut first line is not an entry
  return ledger_entries(text);
}

void append_to_ledger(const std::string& path, const LedgerEntry& entry) {
  const std::string line = ledger_line(entry);
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error(
        fmt::format("cannot open the ledger of bad nodes {}: {}", path, std::strerror(errno)));
  }
  const ssize_t written = ::write(fd, line.data(), line.size());
  const int err = errno;
  ::close(fd);
  if (written != static_cast<ssize_t>(line.size())) {
    throw std::runtime_error(fmt::format("cannot write to the ledger of bad nodes {}: {}", path,
                                         written < 0 ? std::strerror(err) : "a short write"));
  }
}

std::string describe(const LedgerEntry& e) {
  std::string where = fmt::format("job '{}'", e.job);
  if (e.node_rank >= 0) where += fmt::format(", node {}", e.node_rank);
  if (!e.addr.empty()) where += ", " + e.addr;
  return fmt::format("{} at {} ({}){}", e.reason, utc_time(e.time_ms), where,
                     e.evidence.empty() ? "" : ": " + e.evidence);
}

}  // namespace npu_run
