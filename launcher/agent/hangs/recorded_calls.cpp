#include "agent/hangs/recorded_calls.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "rendezvous/protocol/protocol.hpp"

namespace npu_run {

using json = nlohmann::json;

namespace {

// torch writes the sequence numbers of pg_status as strings ("5"; "-1" for none).
int64_t sequence_of(const json& value) {
  int64_t n = 0;
  if (value.is_number_integer()) {
    n = value.get<int64_t>();
  } else if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    std::from_chars(text.data(), text.data() + text.size(), n);
  }
  return std::max<int64_t>(n, 0);
}

std::string cut_to_call_limit(std::string text) {
  if (text.size() > rdzv::Limits::kMaxCallText) text.resize(rdzv::Limits::kMaxCallText);
  return text;
}

// "gloo:all_reduce" -> "all_reduce".
std::string op_of(const json& entry) {
  std::string name = entry.value("profiling_name", std::string("collective"));
  if (const auto colon = name.find(':'); colon != std::string::npos) name.erase(0, colon + 1);
  return cut_to_call_limit(name);
}

// ["0", "default_pg"] -> "default_pg": the description torch gives, else the name.
std::string group_of(const json& entry, const std::string& pg_id) {
  const json& pg = entry.contains("process_group") ? entry["process_group"] : json();
  if (pg.is_array() && pg.size() == 2 && pg[1].is_string() && !pg[1].get<std::string>().empty())
    return cut_to_call_limit(pg[1].get<std::string>());
  if (pg.is_array() && !pg.empty() && pg[0].is_string())
    return cut_to_call_limit("group " + pg[0].get<std::string>());
  return "group " + pg_id;
}

std::string dtypes_of(const json& entry) {
  std::string out;
  for (const json& dtype : entry.value("input_dtypes", json::array()))
    if (dtype.is_string()) out += (out.empty() ? "" : ", ") + dtype.get<std::string>();
  return cut_to_call_limit(out);
}

rdzv::RecordedCall call_of(const json& entry, int64_t now_ns) {
  rdzv::RecordedCall call;
  call.seq = sequence_of(entry.value("collective_seq_id", json(0)));
  call.op = op_of(entry);
  call.sizes = cut_to_call_limit(entry.value("input_sizes", json::array()).dump());
  call.dtypes = dtypes_of(entry);
  const int64_t created = entry.value("time_created_ns", int64_t{0});
  call.age_ms = created > 0 && now_ns >= created ? (now_ns - created) / 1'000'000 : -1;
  call.completed = entry.value("retired", false) || entry.value("state", "") == "completed";
  return call;
}

// The group's name and last calls, from the entries of `pg_id` (collectives only, not p2p).
void add_calls(rdzv::GroupCalls& group, const json& entries, const std::string& pg_id,
               int64_t now_ns) {
  std::vector<const json*> mine;
  for (const json& entry : entries) {
    if (!entry.is_object() || entry.value("is_p2p", false)) continue;
    const json id = entry.value("pg_id", json());
    if ((id.is_number_integer() ? std::to_string(id.get<int64_t>()) : id.dump()) != pg_id) continue;
    mine.push_back(&entry);
  }
  std::sort(mine.begin(), mine.end(), [](const json* a, const json* b) {
    return sequence_of(a->value("collective_seq_id", json(0))) <
           sequence_of(b->value("collective_seq_id", json(0)));
  });
  if (!mine.empty()) group.group = group_of(*mine.back(), pg_id);
  const size_t from = mine.size() > rdzv::Limits::kMaxRecordedCalls
                          ? mine.size() - rdzv::Limits::kMaxRecordedCalls
                          : 0;
  for (size_t i = from; i < mine.size(); ++i) group.last.push_back(call_of(*mine[i], now_ns));
}

}  // namespace

std::optional<std::vector<rdzv::GroupCalls>> recorded_groups(std::string_view fr_trace_json,
                                                             int64_t now_ns) {
  const json answer = json::parse(fr_trace_json, nullptr, /*allow_exceptions=*/false);
  if (!answer.is_object() || !answer.contains("pg_status") || !answer["pg_status"].is_object())
    return std::nullopt;
  const json entries = answer.value("entries", json::array());
  // By pg id as a number, so that the default group (0) comes first.
  std::map<int64_t, rdzv::GroupCalls> groups;
  for (const auto& [pg_id, status] : answer["pg_status"].items()) {
    if (!status.is_object()) continue;
    rdzv::GroupCalls group;
    group.group = "group " + cut_to_call_limit(pg_id);
    group.entered = sequence_of(status.value("last_enqueued_collective", json(0)));
    group.completed = sequence_of(status.value("last_completed_collective", json(0)));
    if (group.entered == 0) continue;  // never used: nothing to compare
    add_calls(group, entries.is_array() ? entries : json::array(), pg_id, now_ns);
    groups.emplace(sequence_of(json(pg_id)), std::move(group));
  }
  std::vector<rdzv::GroupCalls> out;
  for (auto& [id, group] : groups) {
    if (out.size() == rdzv::Limits::kMaxRecordedGroups) break;
    out.push_back(std::move(group));
  }
  return out;
}

std::optional<EnteredCalls> entered_calls(std::string_view fr_trace_json, int64_t after_ns) {
  const json answer = json::parse(fr_trace_json, nullptr, /*allow_exceptions=*/false);
  if (!answer.is_object() || !answer.contains("entries") || !answer["entries"].is_array())
    return std::nullopt;
  EnteredCalls out;
  out.latest_ns = after_ns;
  for (const json& entry : answer["entries"]) {
    if (!entry.is_object() || entry.value("is_p2p", false)) continue;
    const int64_t created = entry.value("time_created_ns", int64_t{0});
    if (created <= after_ns) continue;
    const json id = entry.value("pg_id", json());
    std::string group = id.is_number_integer() ? std::to_string(id.get<int64_t>()) : id.dump();
    if (group.size() > rdzv::StragglerLimits::kMaxGroupText)
      group.resize(rdzv::StragglerLimits::kMaxGroupText);
    out.calls.push_back({std::move(group), sequence_of(entry.value("collective_seq_id", json(0))),
                         created / 1'000'000});
    out.latest_ns = std::max(out.latest_ns, created);
  }
  std::sort(out.calls.begin(), out.calls.end(),
            [](const auto& a, const auto& b) { return a.entered_ms < b.entered_ms; });
  return out;
}

}  // namespace npu_run
