#include "rendezvous/snapshot_wire.hpp"

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
  json ranges = json::array();
  for (const SnapshotRange& r : held.ranges) {
    ranges.push_back({{"first", r.first_rank},
                      {"last", r.last_rank},
                      {"memory", r.memory},
                      {"stored", r.stored}});
  }
  return {{"world_size", held.world_size}, {"ranges", std::move(ranges)}};
}

HeldSnapshots held_from(const json& j) {
  const Fields f(j, "'snapshots'");
  HeldSnapshots held;
  held.world_size = static_cast<int>(f.integer("world_size", 1, INT32_MAX));
  for (const json& r : f.array("ranges", kMaxRanges)) {
    const Fields rf(r, "snapshot range");
    SnapshotRange range;
    range.first_rank = static_cast<int>(rf.integer("first", 0, held.world_size - 1));
    range.last_rank = static_cast<int>(rf.integer("last", range.first_rank, held.world_size - 1));
    range.memory = steps_from(rf, "memory");
    range.stored = steps_from(rf, "stored");
    held.ranges.push_back(std::move(range));
  }
  return held;
}

json restore_json(const RestorePoint& point) {
  return {{"source", std::string(restore_source_name(point.source))},
          {"step", point.step},
          {"why", point.why}};
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
  return point;
}

}  // namespace npu_run::rdzv
