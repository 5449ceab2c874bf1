// Load generator for scripts/bench/store_scale.py: the workers' store traffic of a job's start.
//
//   store_loadgen root --port P
//       node 0's store as npu_run's agent serves it (store::StoreServer, the product's code) on
//       0.0.0.0:P, until stdin closes.
//   store_loadgen ranks --port P --world N --first-rank F --ranks R [--tiered | --canned]
//                       [--generation 1|2] --start-at MS
//       R simulated ranks (F .. F+R-1 of N, 8 per node) that, from the wall-clock time MS on,
//       connect and run the store traffic of init_process_group against the store on
//       127.0.0.1:P: directly, or (--tiered) through one proxy per simulated node (the agent's
//       NodeStoreProxy, the product's code, many per process), each with one connection to P.
//       --canned puts a responder with no store behind it where each node's proxy would be:
//       every request answered at once with a fixed answer of the right shape. That is what
//       the simulated ranks' own traffic costs on this machine, a floor no store here can go
//       under. Prints one JSON line: ranks done and failed, and when the last finished; a
//       failed rank ends the run at once (the others would wait for it at the barrier).
//
// The traffic per rank, from torch 2.6's env:// init recorded through a proxy (VALIDATE, PING,
// ADD "init/" 1, SET of this rank's 186-byte address, then WAIT WAIT GET of each peer's), with
// the peer exchange of gloo's full mesh (quadratic, never used at scale) replaced by what the
// NCCL/HCCL bootstrap does: rank 0 SETs the communicator id and every rank WAITs twice and
// GETs it; then a store barrier (ADD, the last one SETs "done", all WAIT for it). Generation 1
// (torch 1.13's numbering, no VALIDATE or PING) is for torch 1.13's server.
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "agent/link/node_store_proxy.hpp"
#include "net/accept_loop.hpp"
#include "net/stream_connection.hpp"
#include "store/store_proxy.hpp"
#include "store/store_server.hpp"
#include "store/wire.hpp"

using namespace npu_run::store;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

constexpr int kRanksPerNode = 8;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void raise_open_files() {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

enum class Answer { kNone, kByte, kU32, kI64, kBytes };

struct Step {
  Request request;
  Answer answer;
  bool last_sets_done = false;  // the barrier's ADD: the rank that completes it sets "done"
};

std::vector<Step> steps_of(int rank, int world, Generation generation) {
  std::vector<Step> steps;
  if (generation == Generation::kTorch2) {
    steps.push_back({{Command::kValidate, {}, {}, 0, kValidationMagic}, Answer::kNone});
    steps.push_back({{Command::kPing, {}, {}, 0, static_cast<uint32_t>(rank)}, Answer::kU32});
  }
  steps.push_back({{Command::kAdd, {"init/"}, {}, 1}, Answer::kI64});
  const std::string id = "/default_pg/0//hccl//0";
  if (rank == 0) steps.push_back({{Command::kSet, {id}, {std::string(186, 'a')}}, Answer::kNone});
  steps.push_back({{Command::kWait, {id}, {}}, Answer::kByte});
  steps.push_back({{Command::kWait, {id}, {}}, Answer::kByte});
  steps.push_back({{Command::kGet, {id}, {}}, Answer::kBytes});
  steps.push_back({{Command::kAdd, {"/barrier/arrived"}, {}, 1}, Answer::kI64, true});
  steps.push_back({{Command::kWait, {"/barrier/done"}, {}}, Answer::kByte});
  (void)world;
  return steps;
}

struct Totals {
  int done = 0;
  int failed = 0;
  int64_t last_done_ms = 0;
  std::string first_failure;
};

class SimulatedRank : public std::enable_shared_from_this<SimulatedRank> {
 public:
  SimulatedRank(asio::io_context& io, int rank, int world, Generation generation, Totals& totals)
      : socket_(io),
        world_(world),
        generation_(generation),
        totals_(totals),
        steps_(steps_of(rank, world, generation)) {}

  void start(const tcp::endpoint& store) {
    socket_.async_connect(store, [self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return self->fail("connect: " + ec.message());
      self->socket_.set_option(tcp::no_delay(true));
      self->next();
    });
  }

 private:
  // A completion handler: `then_` of this rank when the operation went through, else its
  // failure.
  auto then(const char* what, void (SimulatedRank::*then_)()) {
    return [self = shared_from_this(), what, then_](boost::system::error_code ec, size_t) {
      if (ec) return self->fail(std::string(what) + ": " + ec.message());
      ((*self).*then_)();
    };
  }

  void next() {
    if (at_ == steps_.size()) {
      ++totals_.done;
      totals_.last_done_ms = now_ms();
      socket_.close();
      return;
    }
    out_ = encode_request(generation_, steps_[at_].request);
    asio::async_write(socket_, asio::buffer(out_), then("write", &SimulatedRank::read_answer));
  }

  void read_answer() {
    const Step& step = steps_[at_];
    const size_t size = step.answer == Answer::kNone   ? 0
                        : step.answer == Answer::kByte ? 1
                        : step.answer == Answer::kU32  ? 4
                                                       : 8;
    if (size == 0) return advance();
    in_.resize(size);
    asio::async_read(socket_, asio::buffer(in_), then("read", &SimulatedRank::answered));
  }

  void answered() {
    const Step& step = steps_[at_];
    if (step.answer == Answer::kBytes) {
      uint64_t length = 0;
      std::memcpy(&length, in_.data(), 8);
      in_.resize(length);
      asio::async_read(socket_, asio::buffer(in_), then("read", &SimulatedRank::advance));
      return;
    }
    if (step.last_sets_done) {
      int64_t arrived = 0;
      std::memcpy(&arrived, in_.data(), 8);
      if (arrived == world_) {
        steps_.insert(steps_.begin() + static_cast<std::ptrdiff_t>(at_) + 1,
                      Step{{Command::kSet, {"/barrier/done"}, {"1"}}, Answer::kNone});
      }
    }
    advance();
  }

  void advance() {
    ++at_;
    next();
  }

  void fail(const std::string& why) {
    if (totals_.failed++ == 0) totals_.first_failure = why;
    socket_.close();
  }

  tcp::socket socket_;
  int world_;
  Generation generation_;
  Totals& totals_;
  std::vector<Step> steps_;
  size_t at_ = 0;
  std::string out_;
  std::string in_;
};

// The floor: answers each request at once, as if every key were there and every wait satisfied.
class CannedResponder {
 public:
  explicit CannedResponder(tcp::acceptor& acceptor) {
    acceptor.listen(asio::socket_base::max_listen_connections);
    accepting_ = npu_run::net::AcceptLoop::start(
        acceptor, "canned responder", [this](tcp::socket socket) { serve(std::move(socket)); });
  }

 private:
  void serve(tcp::socket socket) {
    auto connection = npu_run::net::StreamConnection::create(
        std::move(socket), {StoreLimits{}.max_request, 4096, size_t{1} << 20});
    auto decoder = std::make_shared<ConnectionDecoder>();
    std::weak_ptr<npu_run::net::StreamConnection> weak = connection;
    connection->start_stream({[this, weak, decoder](std::string_view bytes) {
                                auto self = weak.lock();
                                if (!self) return;
                                std::vector<Request> requests;
                                if (decoder->feed(bytes, requests)) return self->close();
                                for (const auto& request : requests) answer(*self, request);
                              },
                              // Holds the connection until it closes.
                              [connection](const npu_run::net::ConnectionClosed&) {}});
  }

  void answer(npu_run::net::StreamConnection& connection, const Request& request) {
    std::string out;
    switch (request.command) {
      case Command::kPing:
        append_u32(out, request.number);
        break;
      case Command::kAdd:
        append_i64(out, ++added_);
        break;
      case Command::kWait:
        append_byte(out, static_cast<uint8_t>(WaitReply::kStopWaiting));
        break;
      case Command::kGet:
        append_bytes(out, std::string(186, 'a'));
        break;
      default:
        return;  // VALIDATE, SET: nothing to answer
    }
    connection.send(std::make_shared<const std::string>(std::move(out)));
  }

  std::shared_ptr<npu_run::net::AcceptLoop> accepting_;
  int64_t added_ = 0;
};

int run_root(int port) {
  raise_open_files();
  asio::io_context io;
  StoreServer server(io);
  tcp::acceptor acceptor(io);
  acceptor.open(tcp::v4());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  acceptor.bind(tcp::endpoint(asio::ip::address_v4::any(), static_cast<unsigned short>(port)));
  server.listen_for_local_clients(acceptor);
  std::thread stdin_watch([&io] {
    std::string line;
    while (std::getline(std::cin, line)) {
    }
    io.stop();
  });
  std::cout << "up" << std::endl;
  io.run();
  stdin_watch.join();
  return 0;
}

// The simulated nodes of one process: a proxy (tiered) or a canned responder (the floor) per
// node, each listening on a loopback address of its own, as each real node has its own: 16,384
// listeners on one address would not find free ports beside the last run's connections in
// TIME_WAIT.
struct SimulatedNodes {
  std::vector<std::unique_ptr<npu_run::NodeStoreProxy>> proxies;
  std::vector<std::unique_ptr<CannedResponder>> responders;
  std::vector<std::unique_ptr<tcp::acceptor>> ports;
};

SimulatedNodes make_nodes(asio::io_context& io, int port, int first, int count, bool canned) {
  SimulatedNodes nodes;
  for (int n = 0; n < (count + kRanksPerNode - 1) / kRanksPerNode; ++n) {
    const int node = first / kRanksPerNode + n;
    const auto address = asio::ip::make_address(
        fmt::format("127.{}.{}.{}", 2 + node / 65536, (node / 256) % 256, node % 256));
    nodes.ports.push_back(std::make_unique<tcp::acceptor>(io, tcp::endpoint(address, 0)));
    if (canned) {
      nodes.responders.push_back(std::make_unique<CannedResponder>(*nodes.ports.back()));
      continue;
    }
    nodes.proxies.push_back(std::make_unique<npu_run::NodeStoreProxy>(
        io, *nodes.ports.back(), "127.0.0.1", port, std::chrono::seconds(120)));
  }
  return nodes;
}

// The one JSON line the harness reads: the ranks' totals and, tiered, the proxies' counts.
std::string results(const Totals& totals, const std::vector<ProxyCounters>& counted, bool tiered) {
  nlohmann::json out{{"done", totals.done},
                     {"failed", totals.failed},
                     {"last_done_ms", totals.last_done_ms},
                     {"first_failure", totals.first_failure}};
  if (tiered) {
    ProxyCounters sum;
    for (const auto& c : counted) {
      sum.client_requests += c.client_requests;
      sum.upstream_requests += c.upstream_requests;
    }
    out["client_requests"] = sum.client_requests;
    out["upstream_requests"] = sum.upstream_requests;
  }
  return out.dump();
}

int run_ranks(int port, int world, int first, int count, bool tiered, bool canned,
              Generation generation, int64_t start_at) {
  raise_open_files();
  asio::io_context io;
  Totals totals;
  const tcp::endpoint root(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port));
  std::vector<std::shared_ptr<SimulatedRank>> ranks;
  for (int r = first; r < first + count; ++r)
    ranks.push_back(std::make_shared<SimulatedRank>(io, r, world, generation, totals));
  SimulatedNodes nodes =
      tiered || canned ? make_nodes(io, port, first, count, canned) : SimulatedNodes{};
  std::this_thread::sleep_until(
      std::chrono::system_clock::time_point(std::chrono::milliseconds(start_at)));
  // A round formed: each node's proxy dials node 0 (the product's dialler: retries, backoff).
  for (auto& proxy : nodes.proxies) proxy->new_round();
  for (size_t i = 0; i < ranks.size(); ++i) {
    ranks[i]->start(nodes.ports.empty() ? root : nodes.ports[i / kRanksPerNode]->local_endpoint());
  }
  ranks.clear();  // each rank keeps itself alive through its pending operation
  asio::steady_timer watch(io);
  std::vector<ProxyCounters> counted;
  std::function<void()> check = [&] {
    // A failed rank never reaches the barrier, so the rest would wait for it forever: the
    // run ends at the first failure, and the harness stops the other processes.
    if (totals.done + totals.failed == count || totals.failed > 0) {
      for (const auto& proxy : nodes.proxies) counted.push_back(proxy->proxy().counters());
      nodes.proxies.clear();
      io.stop();
      return;
    }
    watch.expires_after(std::chrono::milliseconds(20));
    watch.async_wait([&](boost::system::error_code) { check(); });
  };
  check();
  io.run();
  std::cout << results(totals, counted, tiered) << std::endl;
  return totals.failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Logs go to stderr: stdout is the one JSON line the harness reads at the end, and a pipe
  // nobody reads while the run lasts would stall the run.
  spdlog::set_default_logger(spdlog::stderr_color_mt("loadgen"));
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{"npu_run's workers' store load generator (scripts/bench/store_scale.py)"};
  app.require_subcommand(1);
  int port = 0;
  auto* root = app.add_subcommand("root", "node 0's store, until stdin closes");
  root->add_option("--port", port)->required();
  auto* ranks = app.add_subcommand("ranks", "simulated ranks");
  int world = 0;
  int first = 0;
  int count = 0;
  bool tiered = false;
  bool canned = false;
  int generation = 2;
  int64_t start_at = 0;
  ranks->add_option("--port", port)->required();
  ranks->add_option("--world", world)->required();
  ranks->add_option("--first-rank", first)->required();
  ranks->add_option("--ranks", count)->required();
  auto* tiered_flag = ranks->add_flag("--tiered", tiered);
  ranks->add_flag("--canned", canned)->excludes(tiered_flag);
  ranks->add_option("--generation", generation)->check(CLI::IsMember({1, 2}));
  ranks->add_option("--start-at", start_at)->required();
  CLI11_PARSE(app, argc, argv);
  try {
    if (root->parsed()) return run_root(port);
    return run_ranks(port, world, first, count, tiered, canned,
                     generation == 1 ? Generation::kTorch1 : Generation::kTorch2, start_at);
  } catch (const std::exception& e) {
    std::cerr << "store_loadgen: " << e.what() << "\n";
    return 1;
  }
}
