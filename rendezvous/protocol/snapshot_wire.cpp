#include "rendezvous/protocol/snapshot_wire.hpp"

#include "basics/enum_table.hpp"

namespace npu_run::rdzv {
namespace {

// Ranges in a join: a node's ranks are at most kMaxWorkersPerNode, and each makes one at worst.
constexpr size_t kMaxRanges = Limits::kMaxWorkersPerNode;

constexpr EnumTable<RestoreSource, 3> kSources({{{RestoreSource::kNone, "none"},
                                                 {RestoreSource::kMemory, "memory"},
                                                 {RestoreSource::kStorage, "storage"}}});

std::vector<int64_t> steps_from(const Fields& f, const char* key) {
  std::vector<int64_t> steps;
  for (const json& step : f.array(key, kMaxHeldSteps, false)) {
    if (!step.is_number_integer() || step.get<int64_t>() < 0)
      f.fail(fmt::format("'{}' holds a bad step", key));
    steps.push_back(step.get<int64_t>());
  }
  return steps;
}

}  // namespace

std::string_view restore_source_name(RestoreSource source) {
  return kSources.name(source);
}

json held_json(const HeldSnapshots& held) {
  const auto ranges_json = [](const std::vector<SnapshotRange>& ranges) {
    json out = json::array();
    for (const SnapshotRange& r : ranges) {
      out.push_back({{"first", r.first_rank},
                     {"last", r.last_rank},
                     {"memory", r.memory},
                     {"stored", r.stored}});
    }
    return out;
  };
  return {{"world_size", held.world_size},
          {"ranges", ranges_json(held.ranges)},
          {"copies", ranges_json(held.copies)},
          {"copy_port", held.copy_port}};
}

HeldSnapshots held_from(const json& j) {
  const Fields f(j, "'snapshots'");
  HeldSnapshots held;
  held.world_size = static_cast<int>(f.integer("world_size", 1, INT32_MAX));
  const auto ranges_from = [&](const char* key, bool required) {
    std::vector<SnapshotRange> out;
    for (const json& r : f.array(key, kMaxRanges, required)) {
      const Fields rf(r, "snapshot range");
      SnapshotRange range;
      range.first_rank = static_cast<int>(rf.integer("first", 0, held.world_size - 1));
      range.last_rank = static_cast<int>(rf.integer("last", range.first_rank, held.world_size - 1));
      range.memory = steps_from(rf, "memory");
      range.stored = steps_from(rf, "stored");
      out.push_back(std::move(range));
    }
    return out;
  };
  held.ranges = ranges_from("ranges", true);
  held.copies = ranges_from("copies", false);
  held.copy_port = f.find("copy_port") ? static_cast<int>(f.integer("copy_port", 0, 65535)) : 0;
  return held;
}

json copy_peer_json(const CopyPeer& peer) {
  return {{"host", peer.host}, {"addr", peer.addr}, {"port", peer.port}};
}

CopyPeer copy_peer_from(const json& j) {
  const Fields f(j, "copy peer");
  return CopyPeer{f.text("host", Limits::kMaxText, false), f.text("addr", Limits::kMaxText),
                  static_cast<int>(f.integer("port", 0, 65535))};
}

json restore_json(const RestorePoint& point) {
  json fetch = json::array();
  for (const RestoreFetch& f : point.fetch) {
    fetch.push_back(
        {{"first", f.first_rank}, {"last", f.last_rank}, {"from", copy_peer_json(f.from)}});
  }
  return {{"source", std::string(restore_source_name(point.source))},
          {"step", point.step},
          {"why", point.why},
          {"fetch", std::move(fetch)}};
}

RestorePoint restore_from(const json& j) {
  const Fields f(j, "'restore'");
  RestorePoint point;
  const std::string source = f.text("source", 16);
  const auto known = kSources.find(source);
  if (!known) f.fail(fmt::format("has an unknown source '{}'", source));
  point.source = *known;
  point.step = f.integer("step", -1, INT64_MAX);
  point.why = f.text("why", Limits::kMaxText, false);
  for (const json& one : f.array("fetch", kMaxRanges, false)) {
    const Fields ff(one, "restore fetch");
    RestoreFetch fetch;
    fetch.first_rank = static_cast<int>(ff.integer("first", 0, INT32_MAX));
    fetch.last_rank = static_cast<int>(ff.integer("last", fetch.first_rank, INT32_MAX));
    fetch.from = copy_peer_from(ff.object("from"));
    point.fetch.push_back(std::move(fetch));
  }
  return point;
}

}  // namespace npu_run::rdzv
