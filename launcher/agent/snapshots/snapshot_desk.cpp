#include "agent/snapshots/snapshot_desk.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "rendezvous/protocol/snapshot_wire.hpp"
#include "workers/snapshot_segments.hpp"

namespace npu_run {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxPath = 4096;

json refusal(std::string why) {
  return {{"ok", false}, {"error", std::move(why)}};
}

// A field of a request, or nullopt when it is missing or of another type.
std::optional<int64_t> number(const json& request, const char* key, int64_t min) {
  const auto it = request.find(key);
  if (it == request.end() || !it->is_number_integer()) return std::nullopt;
  const int64_t value = it->get<int64_t>();
  if (value < min) return std::nullopt;
  return value;
}

}  // namespace

SnapshotDesk::SnapshotDesk(boost::asio::io_context& io, std::string directory, int nproc,
                           uint64_t budget, int keep, std::shared_ptr<SnapshotNotes> notes,
                           std::optional<CopySettings> copies)
    : directory_(std::move(directory)),
      shelf_(nproc, budget, keep),
      notes_(std::move(notes)),
      to_write_(static_cast<size_t>(nproc), 0),
      fetching_(static_cast<size_t>(nproc)),
      copied_(static_cast<size_t>(nproc), -1),
      writer_(
          std::make_unique<SnapshotWriter>(io, [this](const SnapshotWritten& w) { written(w); })) {
  if (!copies || budget == 0) return;
  try {
    copy_server_ = std::make_unique<SnapshotCopyServer>(io, *this, copies->key, copies->run_id);
  } catch (const std::exception& e) {  // the node's own snapshots still serve its restarts
    spdlog::warn("{}: this node keeps no copies of other nodes' snapshots, nor sends its own",
                 e.what());
    return;
  }
  copy_client_ = std::make_unique<SnapshotCopyClient>(
      io, copies->key, copies->run_id,
      [this](const SnapshotCopyClient::Copy& c, const std::string& error) { copy_sent(c, error); });
}

SnapshotDesk::~SnapshotDesk() {
  copy_client_.reset();  // no callback after this
  copy_server_.reset();
  writer_.reset();  // its thread reads the segments
}

std::optional<std::string> SnapshotDesk::answer(uint64_t conversation, const std::string& line) {
  const json request = json::parse(line, nullptr, false);
  if (!request.is_object() || !request.contains("op") || !request["op"].is_string())
    return refusal("expected a JSON object with an \"op\"").dump();
  const std::string op = request["op"].get<std::string>();
  if (op == "begin") return on_begin(conversation, request).dump();
  if (op == "commit") return on_commit(conversation, request).dump();
  if (op == "abort") {
    closed(conversation);
    return json{{"ok", true}}.dump();
  }
  if (op == "restore") {
    const std::optional<json> now = on_restore(conversation, request);
    return now ? std::optional<std::string>(now->dump()) : std::nullopt;
  }
  if (op == "restored") return on_restored(request).dump();
  return refusal("unknown op '" + op.substr(0, 32) + "'").dump();
}

json SnapshotDesk::on_begin(uint64_t conversation, const json& request) {
  const auto rank = number(request, "rank", 0);
  const auto step = number(request, "step", 0);
  const auto bytes = number(request, "bytes", 0);
  if (!rank || !step || !bytes) return refusal("begin needs a rank, a step and bytes");
  if (writing_.count(conversation)) return refusal("this conversation began a save already");
  const uint64_t free = free_bytes_under(directory_);
  if (static_cast<uint64_t>(*bytes) > free) {
    return refusal(
        fmt::format("the snapshot of local rank {} at step {} needs about {}, and {} "
                    "has {} free",
                    *rank, *step, size_text(*bytes), kSegmentRoot, size_text(free)));
  }
  SnapshotShelf::Begun begun =
      shelf_.begin(static_cast<int>(*rank), *step, static_cast<uint64_t>(*bytes));
  // The node's own snapshots come first: other nodes' copies make room for them.
  while (begun.segment == nullptr && begun.dropped.empty() && make_room(*bytes))
    begun = shelf_.begin(static_cast<int>(*rank), *step, static_cast<uint64_t>(*bytes));
  remove_segments(begun.dropped);
  if (begun.segment == nullptr) return refusal(begun.refusal);
  const Segment segment = *begun.segment;
  const std::string file = file_of(segment.name);
  if (!begun.recycled.empty()) {
    // One still being sent to another node keeps its bytes: it is removed, not reused.
    if (!pinned(begun.recycled) && ::rename(file_of(begun.recycled).c_str(), file.c_str()) == 0) {
      writing_[conversation] = segment.id;
      return {{"ok", true}, {"file", file}};
    }
    remove_segments({begun.recycled});
  }
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const std::string why = std::strerror(errno);
    (void)shelf_.abandon(segment.id);
    return refusal(fmt::format("cannot make {}: {}", file, why));
  }
  ::close(fd);
  writing_[conversation] = segment.id;
  return {{"ok", true}, {"file", file}};
}

json SnapshotDesk::on_commit(uint64_t conversation, const json& request) {
  const auto it = writing_.find(conversation);
  if (it == writing_.end()) return refusal("commit without a begin");
  const auto path = request.find("path");
  if (path == request.end() || !path->is_string() || path->get_ref<const std::string&>().empty() ||
      path->get_ref<const std::string&>().front() != '/' ||
      path->get_ref<const std::string&>().size() > kMaxPath)
    return refusal("commit needs an absolute path");
  const uint64_t id = it->second;
  writing_.erase(it);
  const Segment* segment = shelf_.find(id);
  struct stat st {};
  if (segment == nullptr || ::stat(file_of(segment->name).c_str(), &st) != 0)
    return refusal("the segment is gone");
  SnapshotShelf::Begun committed =
      shelf_.commit(id, static_cast<uint64_t>(st.st_size), path->get<std::string>());
  remove_segments(committed.dropped);
  if (committed.segment == nullptr) return refusal(committed.refusal);
  const Segment& done = *committed.segment;
  const int rank = done.rank;
  if (!writer_->write(SnapshotWrite{rank, done.step, file_of(done.name), done.path}))
    ++to_write_[static_cast<size_t>(rank)];
  copy_out(done);
  note(rank);
  return {{"ok", true}};
}

std::optional<json> SnapshotDesk::on_restore(uint64_t conversation, const json& request) {
  const auto rank = number(request, "rank", 0);
  if (!rank || *rank >= shelf_.nproc()) return refusal("restore needs this node's local rank");
  Fetching& fetch = fetching_[static_cast<size_t>(*rank)];
  if (fetch.pending) {  // answered once the copy is here (fetched())
    fetch.waiting.push_back(conversation);
    return std::nullopt;
  }
  return restore_answer(static_cast<int>(*rank));
}

json SnapshotDesk::restore_answer(int rank) const {
  const std::string& failed = fetching_[static_cast<size_t>(rank)].failed;
  if (!failed.empty()) {  // the step is the round's; its file is the one left to read
    return {{"ok", true}, {"source", "storage"}, {"step", restore_.step}, {"why", failed}};
  }
  json out{{"ok", true},
           {"source", std::string(rdzv::restore_source_name(restore_.source))},
           {"step", restore_.step},
           {"why", restore_.why}};
  if (restore_.source != rdzv::RestoreSource::kMemory) return out;
  const Segment* segment = shelf_.complete(rank, restore_.step);
  if (segment == nullptr) {  // the rendezvous chose it from this agent's word: never, but safe
    spdlog::error("local rank {} holds no snapshot of step {}, which the round restores", rank,
                  restore_.step);
    return refusal("this agent lost the step the round restores");
  }
  out["file"] = file_of(segment->name);
  return out;
}

json SnapshotDesk::on_restored(const json& request) {
  const auto seconds = request.find("seconds");
  if (seconds != request.end() && seconds->is_number())
    slowest_restore_ = std::max(slowest_restore_, seconds->get<double>());
  if (const auto step = number(request, "step", 0)) loaded_step_ = std::max(loaded_step_, *step);
  const auto source = request.find("source");
  if (source != request.end() && source->is_string())
    loaded_from_ = source->get<std::string>().substr(0, 16);
  if (++restored_ranks_ == shelf_.nproc()) restored_all();
  return {{"ok", true}};
}

// Every local rank loaded: one line, and the timeline's event.
void SnapshotDesk::restored_all() {
  std::string detail = fmt::format("from {} in {:.2f} s", loaded_from_, slowest_restore_);
  if (fetched_ranks_ > 0) {
    detail += fmt::format(" after {} fetched from another node's copy in {:.2f} s",
                          fetched_ranks_ == 1 ? "1 rank" : fmt::format("{} ranks", fetched_ranks_),
                          slowest_fetch_);
  }
  if (reached_ && loaded_step_ >= 0) {
    detail += fmt::format("; {} steps redone (the round before reached {})",
                          std::max<int64_t>(0, *reached_ - loaded_step_), *reached_);
  }
  spdlog::info("every rank of this node ({}) restored step {} {}", restored_ranks_, loaded_step_,
               detail);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  notes_->restored = RestoreRecord{
      loaded_step_, detail, std::chrono::duration_cast<std::chrono::milliseconds>(now).count()};
}

void SnapshotDesk::closed(uint64_t conversation) {
  const auto it = writing_.find(conversation);
  if (it == writing_.end()) return;
  const std::string name = shelf_.abandon(it->second);
  writing_.erase(it);
  if (!name.empty()) remove_segments({name});
}

void SnapshotDesk::workers_done() {
  writing_.clear();
  remove_segments(shelf_.abandon_writing());
}

void SnapshotDesk::restore(const rdzv::RestorePoint& point) {
  restore_ = point;
  restored_ranks_ = 0;
  slowest_restore_ = 0;
  fetched_ranks_ = 0;
  slowest_fetch_ = 0;
  loaded_step_ = -1;
  loaded_from_.clear();
  notes_->restored.reset();
  remove_segments(shelf_.drop_after(point.source == rdzv::RestoreSource::kNone ? -1 : point.step));
  for (int rank = 0; rank < shelf_.nproc(); ++rank) note(rank);
  if (point.source == rdzv::RestoreSource::kNone && point.why.empty()) return;
  spdlog::info(
      "this round restores {}: {}",
      point.source == rdzv::RestoreSource::kNone
          ? std::string("nothing npu_run holds; each rank loads its own file")
          : fmt::format("step {} from {}", point.step, rdzv::restore_source_name(point.source)),
      point.why);
}

void SnapshotDesk::note(int rank) {
  notes_->ranks.resize(static_cast<size_t>(shelf_.nproc()));
  rdzv::RankSnapshot& n = notes_->ranks[static_cast<size_t>(rank)];
  n = shelf_.note(rank);
  n.to_write = to_write_[static_cast<size_t>(rank)];
  n.copied = copied_[static_cast<size_t>(rank)];
  ++notes_->changes;
}

void SnapshotDesk::written(const SnapshotWritten& w) {
  int& waiting = to_write_[static_cast<size_t>(w.write.rank)];
  waiting = std::max(0, waiting - 1);
  if (!w.error.empty()) {
    spdlog::warn("the snapshot of local rank {} at step {} is not on storage: {}", w.write.rank,
                 w.write.step, w.error);
  } else if (!w.gone) {  // gone: superseded and dropped before it was written
    spdlog::debug("local rank {}: step {} written to {} ({}, {:.2f} s)", w.write.rank, w.write.step,
                  w.write.path, size_text(w.bytes), w.seconds);
    writer_->remove(shelf_.persisted(w.write.rank, w.write.step, w.write.path));
  }
  note(w.write.rank);
}

void SnapshotDesk::remove_segments(const std::vector<std::string>& names) const {
  for (const std::string& name : names) (void)::unlink(file_of(name).c_str());
}

}  // namespace npu_run
