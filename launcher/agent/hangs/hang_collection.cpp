#include "agent/hangs/hang_collection.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "agent/hangs/recorded_calls.hpp"
#include "agent/hangs/worker_server_client.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "workers/python_dump.hpp"

namespace npu_run {
namespace {

int64_t wall_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Writes `text` to <directory>/<name> and adds it to `files`; a failure is logged, not fatal.
void keep(const std::string& directory, const char* name, const std::string& text,
          std::vector<std::string>& files) {
  if (directory.empty() || text.empty()) return;
  const std::string path = directory + "/" + name;
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (out) {
    files.push_back(path);
  } else {
    spdlog::warn("cannot write the hang's record {}", path);
  }
}

CollectedRank read_answer(const RankToCollect& rank, WorkerAnswer& answer, int64_t now_ns) {
  CollectedRank c;
  c.local_rank = rank.local_rank;
  c.pid = rank.pid;
  // A server that took the connection and said nothing is there but stuck: a refused or
  // missing socket means no server at all.
  const bool connected = answer.answered() || answer.connected;
  c.record = answer.answered() ? rdzv::RankRecord::kServer
             : connected       ? rdzv::RankRecord::kSilent
                               : rdzv::RankRecord::kSignal;
  if (!answer.answered()) return c;
  c.frames = python_dump_main_thread_frames(answer.traceback, rdzv::Limits::kMaxStackFrames);
  if (c.frames.empty()) c.frames.emplace_back("<no Python frame>");
  if (auto groups = recorded_groups(answer.fr_trace_json, now_ns)) {
    c.recorder = true;
    c.groups = std::move(*groups);
  }
  keep(rank.directory, "stacks.txt", answer.traceback, c.files);
  if (c.recorder) keep(rank.directory, "fr_trace.json", answer.fr_trace_json, c.files);
  return c;
}

// Writes a line into each dump pipe the rank's watchdogs made (none without torch_npu or NCCL);
// the recorder then writes its dump, which is listed with the rank's records.
void poke_dump_pipes(const RankToCollect& rank, std::vector<std::string>& files) {
  if (!rank.dumped.empty()) {
    files.push_back(rank.dumped);
    return;
  }
  const std::string& directory =
      rank.attempt_directory.empty() ? rank.directory : rank.attempt_directory;
  if (directory.empty()) return;
  for (const auto& [prefix, dump] : {std::pair{kHcclDumpPipePrefix, "hccl_trace_rank_"},
                                     std::pair{kNcclDumpPipePrefix, "fr_trace_rank_"}}) {
    const std::string pipe = fmt::format("{}/{}{}.pipe", directory, prefix, rank.rank);
    struct stat info {};
    if (::stat(pipe.c_str(), &info) != 0 || !S_ISFIFO(info.st_mode)) continue;
    // Non-blocking: a pipe nobody reads any more (ENXIO) must not stall the agent.
    const int fd = ::open(pipe.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    if (::write(fd, "1\n", 2) == 2)
      files.push_back(fmt::format("{}/{}{}", directory, dump, rank.rank));
    ::close(fd);
  }
}

}  // namespace

std::vector<RankToCollect> ranks_to_collect(const std::vector<WorkerSpec>& specs,
                                            const std::string& servers) {
  std::vector<RankToCollect> ranks;
  for (const WorkerSpec& spec : specs) {
    ranks.push_back(RankToCollect{spec.local_rank, spec.global_rank, -1,
                                  worker_server_path(servers, spec.local_rank), spec.log_dir});
  }
  return ranks;
}

void collect_hang_records(boost::asio::io_context& io, const std::vector<RankToCollect>& ranks,
                          std::chrono::milliseconds deadline,
                          std::function<void(std::vector<CollectedRank>)> done) {
  std::vector<WorkerServerAsk> asks;
  std::vector<std::vector<std::string>> pipe_dumps(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    asks.push_back({ranks[i].local_rank, ranks[i].server});
    poke_dump_pipes(ranks[i], pipe_dumps[i]);
  }
  const auto started = std::chrono::steady_clock::now();
  ask_worker_servers(
      io, asks, deadline,
      [ranks, started, pipe_dumps = std::move(pipe_dumps),
       done = std::move(done)](std::vector<WorkerAnswer> answers) {
        const int64_t now_ns = wall_now_ns();
        std::vector<CollectedRank> collected;
        size_t answered = 0;
        size_t recorded = 0;
        for (size_t i = 0; i < ranks.size(); ++i) {
          collected.push_back(read_answer(ranks[i], answers[i], now_ns));
          collected.back().files.insert(collected.back().files.end(), pipe_dumps[i].begin(),
                                        pipe_dumps[i].end());
          collected.back().pipe_dump = !pipe_dumps[i].empty() && ranks[i].dumped.empty();
          answered += answers[i].answered() ? 1 : 0;
          recorded += collected.back().recorder ? 1 : 0;
        }
        spdlog::info(
            "asked {} ranks' worker servers: {} gave their stacks, {} their flight records, in "
            "{} ms",
            ranks.size(), answered, recorded,
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  started)
                .count());
        done(std::move(collected));
      });
}

}  // namespace npu_run
