#include "health/cann_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "basics/text.hpp"

namespace npu_run {
namespace {

// The record's message: what follows "[file.cc:line][tid]", or the whole line.
std::string_view message_of(std::string_view line) {
  const auto tid = line.find("][");
  if (tid == std::string_view::npos) return line;
  const auto end = line.find(']', tid + 2);
  return end == std::string_view::npos ? line : line.substr(end + 1);
}

// The text inside the brackets after `key` ("rank[" -> "12"), or "".
std::string bracketed(std::string_view text, std::string_view key) {
  const auto at = text.find(key);
  if (at == std::string_view::npos) return "";
  auto open = at + key.size();
  if (key.back() != '[') {
    open = text.find('[', open);
    if (open == std::string_view::npos) return "";
    ++open;
  }
  const auto close = text.find(']', open);
  return close == std::string_view::npos ? "" : std::string(trim(text.substr(open, close - open)));
}

std::vector<int> numbers_in(std::string_view text) {
  std::vector<int> out;
  for (size_t i = 0; i < text.size();) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    int n = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && n < 10'000'000)
      n = n * 10 + (text[i++] - '0');
    out.push_back(n);
  }
  return out;
}

std::string device_flag(const PlogOwner& owner) {
  return owner.device >= 0 ? std::to_string(owner.device) : "<device>";
}

// The columns of a `LINK_ERROR_INFO` row, split on '|', by the header's names.
std::vector<std::string> cells(std::string_view message) {
  std::vector<std::string> out;
  for (const std::string_view cell : split(message, '|')) out.emplace_back(trim(cell));
  while (!out.empty() && out.front().empty()) out.erase(out.begin());
  while (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

// One failed link of the table: "10.0.1.13(13)" is the peer's address and rank.
CannFinding link_finding(const std::map<std::string, std::string>& row, const PlogOwner& owner) {
  auto get = [&](const char* name) {
    const auto it = row.find(name);
    return it == row.end() ? std::string() : it->second;
  };
  std::string dest = get("dest_ip(user_rank)");
  std::vector<int> blamed;
  if (const auto paren = dest.find('('); paren != std::string::npos) {
    const std::string rank = dest.substr(paren + 1, dest.find(')', paren) - paren - 1);
    blamed = numbers_in(rank);
    dest.resize(paren);
  }
  const std::string tls = get("TlsStatus");
  const bool tls_suspect = !tls.empty() && tls != "OK" && tls != "ok";
  CannFinding f;
  f.text = fmt::format(
      "rank {} could not connect to {}:{}{} (status: {}{}); {}", owner.rank, dest, get("dest_port"),
      blamed.empty() ? "" : fmt::format(", rank {}", blamed.front()), get("Status"),
      tls.empty() ? "" : ", TLS status: " + tls,
      tls_suspect ? fmt::format("run `hccn_tool -i {} -tls -g` on both", device_flag(owner))
                  : fmt::format("check the link: `hccn_tool -i {} -link -g` on "
                                "both",
                                device_flag(owner)));
  f.blamed = blamed;
  f.weight = 60;
  return f;
}

}  // namespace

namespace {

struct CodeMeaning {
  std::string_view code;
  std::string_view meaning;
};

// CANN's error code list (REFERENCE.md section 13).
constexpr CodeMeaning kCodes[] = {
    {"EI0006", "a socket to a peer timed out while HCCL set up its links"},
    {"EI0002", "a notify wait timed out: a peer never reached the collective"},
    {"EI0014", "the rank table is of a version for another chip"},
    {"EJ0001", "the device is held by a leftover process"},
    {"EJ0002", "the NPU's network port is down"},
    {"EJ0003", "HCCL's port is in use on this host"},
};

// Everything read from one log, in the order seen, before the findings are made.
class PlogReading {
 public:
  explicit PlogReading(const PlogOwner& owner) : owner_(owner) {}

  void line(std::string_view raw) {
    const std::string_view m = message_of(raw);
    codes(m);
    if (!header_.empty()) table_row(m);
    if (m.find("dest_ip(user_rank)") != std::string_view::npos) header_ = cells(m);
    if (m.find("topo exchange server get socket timeout") != std::string_view::npos)
      topo_timeout_ = true;
    if (topo_timeout_ && m.find("connected num") != std::string_view::npos)
      connected_num_ = bracketed(m, "connected num is");
    if (topo_timeout_ && m.find("connected rank") != std::string_view::npos)
      for (const int r : numbers_in(m.substr(m.find("connected rank")))) connected_.insert(r);
    if (notify_lines_ > 0) notify_detail(m);
    if (m.find("Notify Wait") != std::string_view::npos) {
      notify_lines_ = 6;
      notify_detail(m);
    }
    if (m.find("cqe error") != std::string_view::npos) cqe(m);
    if (m.find("status[LOST]") != std::string_view::npos) lost(m);
    if (m.find("firewall is incorrectly configured") != std::string_view::npos)
      add(fmt::format("a socket receive on rank {} timed out, and HCCL says a firewall may be "
                      "wrongly configured: check both hosts' rules for HCCL's ports",
                      owner_.rank),
          {}, 30);
  }

  std::vector<CannFinding> findings() {
    if (topo_timeout_) topo();
    if (!notify_.empty()) notify();
    std::stable_sort(found_.begin(), found_.end(), [](const CannFinding& a, const CannFinding& b) {
      return a.weight > b.weight;
    });
    return found_;
  }

 private:
  void add(std::string text, std::vector<int> blamed, int weight) {
    for (const CannFinding& f : found_)
      if (f.text == text) return;
    found_.push_back(CannFinding{std::move(text), std::move(blamed), weight});
  }

  void codes(std::string_view m) {
    for (const CodeMeaning& c : kCodes) {
      if (m.find(c.code) == std::string_view::npos || seen_codes_.count(c.code) > 0) continue;
      seen_codes_.insert(c.code);
      add(fmt::format("{} on rank {}: {}", c.code, owner_.rank, c.meaning), {}, 10);
    }
  }

  void table_row(std::string_view m) {
    const std::vector<std::string> row = cells(m);
    if (row.size() != header_.size() || m.find('|') == std::string_view::npos) {
      if (m.find('|') == std::string_view::npos) header_.clear();  // the table ended
      return;
    }
    if (row == header_) return;
    std::map<std::string, std::string> named;
    for (size_t i = 0; i < row.size(); ++i) named[header_[i]] = row[i];
    CannFinding f = link_finding(named, owner_);
    add(std::move(f.text), std::move(f.blamed), f.weight);
  }

  void topo() {
    std::vector<int> missing;
    for (int r = 0; r < owner_.world_size && missing.size() < 64; ++r)
      if (connected_.count(r) == 0 && r != owner_.rank) missing.push_back(r);
    std::string who = missing.empty()       ? std::string("some ranks")
                      : missing.size() == 1 ? fmt::format("rank {}", missing.front())
                                            : fmt::format("ranks {}", fmt::join(missing, ", "));
    add(fmt::format("the root of HCCL's topology exchange (rank {}) never heard from {}{}: they "
                    "did not start, or cannot reach its port",
                    owner_.rank, who,
                    connected_num_.empty()
                        ? ""
                        : fmt::format(" ({} of {} connected)", connected_num_, owner_.world_size)),
        missing, 50);
  }

  void notify_detail(std::string_view m) {
    --notify_lines_;
    for (const auto& [key, field] :
         {std::pair{"remote rank:[", &notify_.remote}, std::pair{"tag[", &notify_.tag},
          std::pair{"group:[", &notify_.group}, std::pair{"rankSize[", &notify_.size}}) {
      if (field->empty()) *field = bracketed(m, key);
    }
    if (notify_.remote.empty() && notify_.tag.empty()) notify_.tag = " ";  // seen, no detail
  }

  void notify() {
    const std::vector<int> remote = numbers_in(notify_.remote);
    add(fmt::format(
            "rank {}'s {} waited on {} until HCCL's execution timeout (notify wait{}): "
            "look at that rank, or the link to it",
            owner_.rank, trim(notify_.tag).empty() ? "collective" : trim(notify_.tag),
            remote.empty() ? "a peer" : fmt::format("remote rank {}", remote.front()),
            notify_.group.empty()
                ? ""
                : fmt::format("; group {}{}", notify_.group,
                              notify_.size.empty() ? "" : " of " + notify_.size + " ranks")),
        remote.empty() ? std::vector<int>{} : std::vector<int>{remote.front()}, 40);
  }

  void cqe(std::string_view m) {
    add(fmt::format("rank {}'s RDMA retries to {} were exhausted (cqe status {}): the link or the "
                    "NPU at its other end; run `hccn_tool -i {} -link -g` and `-net_health -g`",
                    owner_.rank, bracketed(m, "remoteIP:["), bracketed(m, "status["),
                    device_flag(owner_)),
        {}, 45);
  }

  void lost(std::string_view m) {
    const std::vector<int> by = numbers_in(bracketed(m, "by rank"));
    add(fmt::format("HCCL's heartbeat on rank {} marks a peer lost{}: its process or node died",
                    owner_.rank,
                    by.empty() ? "" : fmt::format(" (by rank {})", fmt::join(by, ", "))),
        {}, 35);
  }

  struct NotifyWait {
    std::string remote, tag, group, size;
    bool empty() const { return remote.empty() && tag.empty(); }
  };

  PlogOwner owner_;
  std::vector<std::string> header_;  // of the LINK_ERROR_INFO table being read
  bool topo_timeout_ = false;
  std::string connected_num_;
  std::set<int> connected_;
  int notify_lines_ = 0;  // lines after a Notify Wait record that may hold its details
  NotifyWait notify_;
  std::set<std::string_view> seen_codes_;
  std::vector<CannFinding> found_;
};

}  // namespace

std::vector<CannFinding> read_cann_log(std::string_view text, const PlogOwner& owner) {
  PlogReading reading(owner);
  for (const std::string_view line : split(text, '\n')) reading.line(line);
  return reading.findings();
}

}  // namespace npu_run
