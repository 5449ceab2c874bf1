// Asking workers' servers without stopping them (issue 46): a server that answers both handlers,
// one that takes the connection and never answers (cut off at the deadline), one that claims an
// answer past the bound (its connection closed, nothing kept), and no server at all.
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <memory>

#include "agent/hangs/worker_server_client.hpp"
#include "support/temp_dir.hpp"

namespace test_worker_server_client {

using namespace npu_run;
namespace asio = boost::asio;
namespace http = boost::beast::http;
using Local = asio::local::stream_protocol;
using namespace std::chrono_literals;

namespace {

enum class Manner { kAnswers, kSilent, kOversized };

// A stand-in for torch's worker server: answers each POST as `manner` says.
class FakeWorkerServer {
 public:
  FakeWorkerServer(asio::io_context& io, const std::string& path, Manner manner)
      : acceptor_(io, Local::endpoint(path)), manner_(manner) {
    accept();
  }

 private:
  struct Connection {
    explicit Connection(Local::socket s) : socket(std::move(s)) {}
    Local::socket socket;
    boost::beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::response<http::string_body> response;
  };

  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, Local::socket socket) {
      if (ec) return;
      auto c = std::make_shared<Connection>(std::move(socket));
      held_.push_back(c);
      if (manner_ != Manner::kSilent) serve(c);
      accept();
    });
  }

  void serve(const std::shared_ptr<Connection>& c) {
    http::async_read(
        c->socket, c->buffer, c->request, [this, c](boost::system::error_code ec, size_t) {
          if (ec) return;
          c->response.result(http::status::ok);
          c->response.version(11);
          if (manner_ == Manner::kOversized) {
            c->response.set(http::field::content_length, std::to_string(kMaxWorkerAnswer + 1));
            c->response.body() = std::string(64, 'x');
          } else {
            c->response.body() = c->request.target() == "/handler/fr_trace_json"
                                     ? std::string("{\"pg_status\": {}}")
                                     : std::string("Thread 0x1 (most recent call first):\n");
            c->response.prepare_payload();
          }
          http::async_write(c->socket, c->response, [](boost::system::error_code, size_t) {});
        });
  }

  Local::acceptor acceptor_;
  Manner manner_;
  std::vector<std::shared_ptr<Connection>> held_;  // silent ones stay open
};

std::vector<WorkerAnswer> ask(asio::io_context& io, const std::vector<WorkerServerAsk>& workers,
                              std::chrono::milliseconds deadline) {
  std::vector<WorkerAnswer> answers;
  int calls = 0;
  ask_worker_servers(io, workers, deadline, [&](std::vector<WorkerAnswer> got) {
    answers = std::move(got);
    ++calls;
    io.stop();  // the fake servers would keep it running
  });
  io.run_for(deadline + 2s);
  REQUIRE(calls == 1);
  return answers;
}

}  // namespace

TEST_CASE("worker servers: each is asked at once and the slow one is cut off at the deadline",
          "[unit][flight-recorder]") {
  testing::TempDir dir;
  asio::io_context io;
  FakeWorkerServer answers(io, dir.path() + "/ws0", Manner::kAnswers);
  FakeWorkerServer silent(io, dir.path() + "/ws1", Manner::kSilent);
  FakeWorkerServer oversized(io, dir.path() + "/ws2", Manner::kOversized);
  const auto start = std::chrono::steady_clock::now();
  const auto got = ask(io,
                       {{0, dir.path() + "/ws0"},
                        {1, dir.path() + "/ws1"},
                        {2, dir.path() + "/ws2"},
                        {3, dir.path() + "/none"}},
                       300ms);
  // The silent server holds everything up to the deadline, and no longer.
  CHECK(std::chrono::steady_clock::now() - start < 1500ms);
  REQUIRE(got.size() == 4);
  CHECK(got[0].local_rank == 0);
  CHECK(got[0].answered());
  CHECK(got[0].fr_trace_json == "{\"pg_status\": {}}");
  CHECK(got[0].traceback.starts_with("Thread 0x1"));
  CHECK_FALSE(got[1].answered());
  CHECK(got[1].connected);
  CHECK(got[1].error == "no answer in 300 ms");
  CHECK_FALSE(got[2].answered());
  CHECK(got[2].fr_trace_json.empty());
  CHECK_THAT(got[2].error, Catch::Matchers::Contains("body limit"));
  CHECK_FALSE(got[3].connected);
  CHECK_FALSE(got[3].error.empty());
}

TEST_CASE("worker servers: when all answer, nobody waits for the deadline",
          "[unit][flight-recorder]") {
  testing::TempDir dir;
  asio::io_context io;
  FakeWorkerServer a(io, dir.path() + "/ws0", Manner::kAnswers);
  FakeWorkerServer b(io, dir.path() + "/ws1", Manner::kAnswers);
  const auto start = std::chrono::steady_clock::now();
  std::vector<WorkerAnswer> got;
  ask_worker_servers(io, {{0, dir.path() + "/ws0"}, {1, dir.path() + "/ws1"}}, 10s,
                     [&](std::vector<WorkerAnswer> answers) {
                       got = std::move(answers);
                       io.stop();
                     });
  io.run_for(12s);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  REQUIRE(got.size() == 2);
  CHECK(got[0].answered());
  CHECK(got[1].answered());
  CHECK(worker_server_path("/run/a", 7) == "/run/a/ws7");
}

}  // namespace test_worker_server_client
