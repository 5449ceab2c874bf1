// The CANN logs' room: unless the user chose where CANN logs go (ASCEND_PROCESS_LOG_PATH), every
// rank's plogs land in its attempt's process_log/ (the folder MindCluster FaultDiag reads, beside
// the attempt's environment_check/ and rank-N.txt), not in ~/ascend/log among every job's and
// attempt's; FaultDiag's parser (`ascend-fd parse`) reads the attempt directory as it is. After a
// failed attempt the agent reads each of its ranks' plogs (found by pid,
// wherever they went) for HCCL's signatures (health/cann_log.hpp): what they name goes under the
// rank's row of the summary and, for the root cause, into its description; a broken link or
// RDMA path is a fault of the node's (the restart classification's infrastructure).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "agent/core/attempt.hpp"
#include "agent/rooms/agent_rooms.hpp"
#include "basics/environment.hpp"
#include "health/cann_log.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "workers/python_dump.hpp"

namespace npu_run {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxPlogsPerRank = 8;              // the newest
constexpr size_t kPlogTailBytes = size_t{1} << 20;  // of each, as FaultDiag reads a log's end
constexpr size_t kFindingsShown = 2;                // under a rank's row
constexpr int kLinkWeight = 45;                     // findings this telling are link faults

// Where CANN writes a worker's logs: ASCEND_PROCESS_LOG_PATH, else ASCEND_WORK_PATH/log, else
// $HOME/ascend/log (REFERENCE.md section 13).
std::string cann_log_root(const EnvMap& env) {
  if (const auto it = env.find("ASCEND_PROCESS_LOG_PATH"); it != env.end() && !it->second.empty())
    return it->second;
  if (const auto it = env.find("ASCEND_WORK_PATH"); it != env.end() && !it->second.empty())
    return it->second + "/log";
  const auto home = env.find("HOME");
  return (home != env.end() ? home->second : std::string()) + "/ascend/log";
}

// plog-<pid>_<timestamp>.log under <root>/debug/plog, the newest last, at most kMaxPlogsPerRank.
std::vector<std::string> plogs_of(const std::string& root, pid_t pid) {
  const std::string prefix = "plog-" + std::to_string(pid) + "_";
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::directory_iterator it(root + "/debug/plog", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.ends_with(".log")) found.push_back(it->path().string());
  }
  std::sort(found.begin(), found.end());  // the timestamp orders them
  if (found.size() > kMaxPlogsPerRank)
    found.erase(found.begin(), found.end() - static_cast<std::ptrdiff_t>(kMaxPlogsPerRank));
  return found;
}

struct RankLogs {
  std::string root;
  PlogOwner owner;
};

class CannLogRoom final : public AgentRoom {
 public:
  void starting(std::vector<WorkerSpec>& specs) override {
    ranks_.clear();
    give_cann_log_env(specs);
    for (WorkerSpec& spec : specs) {
      ranks_[spec.local_rank] =
          RankLogs{cann_log_root(spec.env), {spec.global_rank, spec.device_id, 0}};
      link_training_log(spec);
    }
  }

  void started(Attempt& attempt) override {
    for (auto& [local_rank, logs] : ranks_) logs.owner.world_size = attempt.assignment.world_size;
  }

  void done(GroupEnd& end, Attempt& /*attempt*/) override {
    if (end.result.outcome != GroupResult::Outcome::kFailed) return;
    for (size_t i = 0; i < end.result.workers.size(); ++i) {
      WorkerOutcome& w = end.result.workers[i];
      const auto logs = ranks_.find(w.local_rank);
      if (logs == ranks_.end() || w.pid <= 0) continue;
      const std::vector<CannFinding> found = read_rank(logs->second, w.pid);
      for (size_t k = 0; k < found.size() && k < kFindingsShown; ++k)
        w.cann_findings.push_back(found[k].text);
      // A link the rank could not use is the node's fault, as a device fault is.
      if (end.result.root_cause == i && !found.empty() && found.front().weight >= kLinkWeight &&
          end.evidence.fault.empty())
        end.evidence.fault = found.front().text.substr(0, rdzv::Limits::kMaxEvidenceText);
    }
  }

 private:
  static std::vector<CannFinding> read_rank(const RankLogs& logs, pid_t pid) {
    std::vector<CannFinding> all;
    for (const std::string& plog : plogs_of(logs.root, pid)) {
      for (CannFinding& f : read_cann_log(file_tail(plog, kPlogTailBytes), logs.owner)) {
        spdlog::warn("HCCL's log of rank {} ({}): {}", logs.owner.rank, plog, f.text);
        all.push_back(std::move(f));
      }
    }
    std::stable_sort(all.begin(), all.end(), [](const CannFinding& a, const CannFinding& b) {
      return a.weight > b.weight;
    });
    return all;
  }

  // FaultDiag reads a rank's training output as rank-<rank>.txt: beside its process_log/, a link
  // to the rank's stdout log, when it has one (-r/-t).
  static void link_training_log(const WorkerSpec& spec) {
    if (spec.log_dir.empty() || spec.out.file.empty()) return;
    const fs::path attempt = fs::path(spec.log_dir).parent_path();
    const fs::path link = attempt / ("rank-" + std::to_string(spec.global_rank) + ".txt");
    std::error_code ec;
    fs::create_directories(attempt, ec);  // the workers' own are made when they start
    fs::remove(link, ec);
    fs::create_symlink(fs::relative(spec.out.file, attempt, ec), link, ec);
  }

  std::map<int, RankLogs> ranks_;  // by local rank
};

}  // namespace

void give_cann_log_env(std::vector<WorkerSpec>& specs) {
  for (WorkerSpec& spec : specs) {
    if (spec.log_dir.empty() || spec.env.count("ASCEND_PROCESS_LOG_PATH") != 0) continue;
    const std::string logs = fs::path(spec.log_dir).parent_path().string() + "/process_log";
    spec.env["ASCEND_PROCESS_LOG_PATH"] = logs;
    spec.contract_env["ASCEND_PROCESS_LOG_PATH"] = logs;
  }
}

std::unique_ptr<AgentRoom> cann_log_room(const RoomContext& /*ctx*/) {
  return std::make_unique<CannLogRoom>();
}

}  // namespace npu_run
