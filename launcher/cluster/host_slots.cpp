#include "cluster/host_slots.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "basics/text.hpp"
#include "basics/usage_error.hpp"
#include "cluster/hostlist.hpp"

namespace npu_run {

namespace {

// As many workers as an agent takes (--nproc-per-node's limit).
constexpr int kMaxSlots = 1024;

int parse_slots(std::string_view text, const std::string& where) {
  const auto value = parse_integer(text, 1, kMaxSlots);
  if (!value) {
    throw UsageError(fmt::format("{}: slots '{}' is not a number from 1 to {}", where,
                                 printable(text), kMaxSlots));
  }
  return static_cast<int>(*value);
}

// Splits at the commas outside '[...]': "a[1,3]:2,b" -> "a[1,3]:2", "b".
std::vector<std::string_view> top_level_items(std::string_view text) {
  std::vector<std::string_view> items;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      items.push_back(text.substr(start, i - start));
      start = i + 1;
    } else if (text[i] == '[') {
      ++depth;
    } else if (text[i] == ']' && depth > 0) {
      --depth;
    }
  }
  return items;
}

// Also refuses a name ssh would read as an option ("-oProxyCommand=...").
void refuse_repeats(const std::vector<HostSlots>& hosts) {
  std::map<std::string_view, const HostSlots*> seen;
  for (const HostSlots& host : hosts) {
    if (host.name.front() == '-') {
      throw UsageError(fmt::format("host '{}' ({}): a host name cannot start with '-'",
                                   printable(host.name), host.origin));
    }
    const auto [it, fresh] = seen.emplace(host.name, &host);
    if (!fresh) {
      throw UsageError(
          fmt::format("host '{}' is named twice ({}; {}): give it once, with all its slots",
                      host.name, it->second->origin, host.origin));
    }
  }
}

// An item of a list, trimmed; an empty one is refused with `if_empty`.
std::string_view nonempty(std::string_view item, const std::string& if_empty) {
  item = trim(item);
  if (item.empty()) throw UsageError(if_empty);
  return item;
}

// A filter's items: host name -> the slots listed (empty: the whole host), in the order given.
struct FilterItem {
  std::string name;
  std::vector<int> slots;
};

std::vector<FilterItem> parse_filter(std::string_view text, const std::string& flag) {
  std::vector<FilterItem> items;
  const std::string if_empty =
      fmt::format("{} '{}': an empty host between '@'s; expected HOST[:SLOT[,SLOT...]][@HOST...]",
                  flag, printable(text));
  for (std::string_view raw : split(text, '@')) {
    const std::string_view item = nonempty(raw, if_empty);
    FilterItem parsed;
    const size_t colon = item.find(':');
    parsed.name = std::string(item.substr(0, colon));
    if (colon != std::string_view::npos) {
      for (std::string_view slot : split(item.substr(colon + 1), ',')) {
        parsed.slots.push_back(
            integer_or_refuse(trim(slot), 0, kMaxSlots - 1,
                              fmt::format("{} '{}': slot '{}' of host '{}' is not a device number",
                                          flag, printable(text), printable(slot), parsed.name)));
      }
    }
    items.push_back(std::move(parsed));
  }
  return items;
}

// The device numbers a host offers to a filter: those already picked, else 0..slots-1.
std::vector<int> offered_devices(const HostSlots& host, std::optional<int> default_slots,
                                 const std::string& flag, const FilterItem& item) {
  if (!host.devices.empty()) return host.devices;
  const std::optional<int> slots = host.slots ? host.slots : default_slots;
  if (!slots) {
    throw UsageError(fmt::format(
        "{} names slots of host '{}', which has no slot count: give it one ({}:8 in --hosts, "
        "'{} slots=8' in a hostfile) or a numeric --nproc-per-node",
        flag, item.name, item.name, item.name));
  }
  std::vector<int> all(static_cast<size_t>(*slots));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  return all;
}

void check_slots_exist(const std::vector<int>& offered, const FilterItem& item,
                       const std::string& flag) {
  for (int slot : item.slots) {
    if (std::find(offered.begin(), offered.end(), slot) == offered.end()) {
      throw UsageError(fmt::format("{}: host '{}' has no slot {} (its slots: {})", flag, item.name,
                                   slot, fmt::join(offered, ",")));
    }
  }
}

void set_devices(HostSlots& host, std::vector<int> devices) {
  host.slots = static_cast<int>(devices.size());
  host.devices = std::move(devices);
}

}  // namespace

std::vector<HostSlots> parse_hosts_list(std::string_view text, const std::string& source) {
  std::vector<HostSlots> hosts;
  const std::string if_empty = fmt::format(
      "{} '{}': an empty host; expected HOST[:SLOTS],... (e.g. server0:8,server1:8 or "
      "node[01-04]:8)",
      source, printable(text));
  for (std::string_view raw : top_level_items(text)) {
    const std::string_view item = nonempty(raw, if_empty);
    // The slots follow the last ':' outside brackets.
    const size_t colon = item.rfind(':');
    const bool has_slots = colon != std::string_view::npos && item.find(']', colon) == item.npos;
    const std::string_view expression = has_slots ? item.substr(0, colon) : item;
    std::optional<int> slots;
    if (has_slots) {
      slots = parse_slots(item.substr(colon + 1), fmt::format("{} '{}'", source, printable(item)));
    }
    for (std::string& name : expand_hostlist(expression))
      hosts.push_back(HostSlots{std::move(name), slots, {}, source});
  }
  refuse_repeats(hosts);
  return hosts;
}

std::vector<HostSlots> parse_hostfile(std::string_view content, const std::string& path) {
  std::vector<HostSlots> hosts;
  int line_number = 0;
  for (std::string_view line : split(content, '\n')) {
    ++line_number;
    const std::string where = fmt::format("hostfile {} line {}", path, line_number);
    const std::string_view text = trim(line.substr(0, line.find('#')));
    if (text.empty()) continue;
    std::vector<std::string_view> words;
    for (std::string_view word : split(text, ' ')) {
      for (std::string_view part : split(word, '\t'))
        if (!part.empty()) words.push_back(part);
    }
    HostSlots host{std::string(words.front()), std::nullopt, {}, where};
    for (size_t i = 1; i < words.size(); ++i) {
      constexpr std::string_view kSlots = "slots=";
      if (words[i].substr(0, kSlots.size()) != kSlots || host.slots) {
        throw UsageError(
            fmt::format("{}: '{}' is not 'HOST slots=N' (as in DeepSpeed's "
                        "hostfiles; '#' starts a comment)",
                        where, printable(text)));
      }
      host.slots = parse_slots(words[i].substr(kSlots.size()), where);
    }
    hosts.push_back(std::move(host));
  }
  if (hosts.empty()) {
    throw UsageError(
        fmt::format("hostfile {} names no host; write one 'HOST slots=N' line per host", path));
  }
  refuse_repeats(hosts);
  return hosts;
}

std::vector<HostSlots> filter_hosts(std::vector<HostSlots> hosts, std::string_view include,
                                    std::string_view exclude, std::optional<int> default_slots) {
  if (!include.empty() && !exclude.empty()) {
    throw UsageError(
        "--include and --exclude were both given; use one of them (DeepSpeed's "
        "rule: include names what to use, exclude what to leave out)");
  }
  if (include.empty() && exclude.empty()) return hosts;
  const bool including = !include.empty();
  const std::string flag = including ? "--include" : "--exclude";
  const std::vector<FilterItem> items = parse_filter(including ? include : exclude, flag);
  std::set<std::string> named;
  for (const FilterItem& item : items) {
    const auto host = std::find_if(hosts.begin(), hosts.end(),
                                   [&](const HostSlots& h) { return h.name == item.name; });
    if (host == hosts.end()) {
      std::vector<std::string_view> known;
      for (const HostSlots& h : hosts) known.push_back(h.name);
      throw UsageError(fmt::format("{}: host '{}' is not one of the job's hosts ({})", flag,
                                   item.name, fmt::join(known, ", ")));
    }
    if (!named.insert(item.name).second)
      throw UsageError(
          fmt::format("{}: host '{}' is named twice; name it once, with all the "
                      "slots meant (HOST:0,1,...)",
                      flag, item.name));
  }
  std::vector<HostSlots> kept;
  for (HostSlots& host : hosts) {
    const auto item = std::find_if(items.begin(), items.end(),
                                   [&](const FilterItem& i) { return i.name == host.name; });
    if (item == items.end()) {
      if (!including) kept.push_back(std::move(host));
      continue;
    }
    if (item->slots.empty()) {
      if (including) kept.push_back(std::move(host));
      continue;
    }
    std::vector<int> offered = offered_devices(host, default_slots, flag, *item);
    check_slots_exist(offered, *item, flag);
    std::vector<int> devices;
    for (int slot : offered) {
      const bool listed =
          std::find(item->slots.begin(), item->slots.end(), slot) != item->slots.end();
      if (listed == including) devices.push_back(slot);
    }
    if (devices.empty()) continue;  // every slot excluded: the host is left out
    set_devices(host, std::move(devices));
    kept.push_back(std::move(host));
  }
  if (kept.empty()) throw UsageError(fmt::format("{} leaves no host to run on", flag));
  return kept;
}

}  // namespace npu_run
