#include "agent/hangs/worker_server_client.hpp"

#include <fmt/format.h>

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <optional>

#include "net/cloexec_socket.hpp"

namespace npu_run {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using LocalStream = asio::local::stream_protocol;

namespace {

constexpr std::string_view kRecorderHandler = "/handler/fr_trace_json";
constexpr std::string_view kTracebackHandler = "/handler/dump_traceback";

// Every worker's answers, and the one call of `done`: at the last answer or at the deadline.
class WorkerAsking {
 public:
  WorkerAsking(asio::io_context& io, size_t n, bool with_stacks,
               std::function<void(std::vector<WorkerAnswer>)> done)
      : timer(io), answers(n), outstanding(n), stacks(with_stacks), done_(std::move(done)) {}

  void answered_one() {
    if (--outstanding == 0) finish();
  }
  void finish() {
    if (finished) return;
    finished = true;
    timer.cancel();
    for (const auto& close : closers) close();
    auto done = std::move(done_);
    done(std::move(answers));
  }

  asio::steady_timer timer;
  std::vector<WorkerAnswer> answers;
  size_t outstanding;
  bool stacks;  // each worker's stacks too, after its recorder's entries
  bool finished = false;
  std::vector<std::function<void()>> closers;  // each worker's, through a weak pointer

 private:
  std::function<void(std::vector<WorkerAnswer>)> done_;
};

// One worker's two questions, each on a connection of its own (the server may close one after
// an answer).
class WorkerQuestions : public std::enable_shared_from_this<WorkerQuestions> {
 public:
  WorkerQuestions(asio::io_context& io, std::shared_ptr<WorkerAsking> all, size_t index,
                  std::string path)
      : socket_(io), all_(std::move(all)), index_(index), path_(std::move(path)) {}

  void ask(std::string_view target) {
    boost::system::error_code ec;
    socket_ = LocalStream::socket(socket_.get_executor());
    net::open_cloexec(socket_, LocalStream(), ec);
    if (ec) return give_up(ec.message());
    target_ = target;
    socket_.async_connect(LocalStream::endpoint(path_),
                          [self = shared_from_this()](boost::system::error_code error) {
                            if (self->all_->finished) return;
                            if (error) return self->give_up(error.message());
                            self->all_->answers[self->index_].connected = true;
                            self->send();
                          });
  }

  void close() {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

 private:
  void send() {
    request_ = {http::verb::post, std::string(target_), 11};
    request_.set(http::field::host, "localhost");
    request_.prepare_payload();
    http::async_write(socket_, request_,
                      [self = shared_from_this()](boost::system::error_code error, size_t) {
                        if (self->all_->finished) return;
                        if (error) return self->give_up(error.message());
                        self->receive();
                      });
  }

  void receive() {
    buffer_.clear();
    parser_.emplace();
    parser_->body_limit(kMaxWorkerAnswer);
    http::async_read(socket_, buffer_, *parser_,
                     [self = shared_from_this()](boost::system::error_code error, size_t) {
                       if (self->all_->finished) return;
                       if (error) return self->give_up(error.message());
                       self->read(self->parser_->release());
                     });
  }

  void read(http::response<http::string_body> answer) {
    close();
    WorkerAnswer& mine = all_->answers[index_];
    const bool ok = answer.result() == http::status::ok;
    if (target_ == kRecorderHandler) {
      if (ok) mine.fr_trace_json = std::move(answer.body());
      if (all_->stacks) return ask(kTracebackHandler);
      if (!ok) mine.error = fmt::format("{} answered HTTP {}", target_, answer.result_int());
      return all_->answered_one();
    }
    if (ok) mine.traceback = std::move(answer.body());
    if (!ok) mine.error = fmt::format("{} answered HTTP {}", target_, answer.result_int());
    all_->answered_one();
  }

  void give_up(const std::string& why) {
    close();
    all_->answers[index_].error = why;
    all_->answered_one();
  }

  LocalStream::socket socket_;
  std::shared_ptr<WorkerAsking> all_;
  size_t index_;
  std::string path_;
  std::string_view target_;
  http::request<http::empty_body> request_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
};

}  // namespace

std::string worker_server_path(const std::string& directory, int local_rank) {
  return fmt::format("{}/ws{}", directory, local_rank);
}

namespace {

void ask_workers(asio::io_context& io, const std::vector<WorkerServerAsk>& workers, bool stacks,
                 std::chrono::milliseconds deadline,
                 std::function<void(std::vector<WorkerAnswer>)> done) {
  auto all = std::make_shared<WorkerAsking>(io, workers.size(), stacks, std::move(done));
  for (size_t i = 0; i < workers.size(); ++i) all->answers[i].local_rank = workers[i].local_rank;
  if (workers.empty()) return all->finish();
  std::vector<std::shared_ptr<WorkerQuestions>> questions;
  for (size_t i = 0; i < workers.size(); ++i) {
    questions.push_back(std::make_shared<WorkerQuestions>(io, all, i, workers[i].path));
    all->closers.emplace_back([weak = std::weak_ptr<WorkerQuestions>(questions.back())] {
      if (const auto q = weak.lock()) q->close();
    });
  }
  all->timer.expires_after(deadline);
  all->timer.async_wait([all, deadline](boost::system::error_code ec) {
    if (ec || all->finished) return;
    for (WorkerAnswer& answer : all->answers) {
      const bool answered = all->stacks ? answer.answered() : !answer.fr_trace_json.empty();
      if (!answered && answer.error.empty())
        answer.error = fmt::format("no answer in {} ms", deadline.count());
    }
    all->finish();
  });
  for (const auto& q : questions) q->ask(kRecorderHandler);
}

}  // namespace

void ask_worker_servers(asio::io_context& io, const std::vector<WorkerServerAsk>& workers,
                        std::chrono::milliseconds deadline,
                        std::function<void(std::vector<WorkerAnswer>)> done) {
  ask_workers(io, workers, true, deadline, std::move(done));
}

void ask_worker_recorders(asio::io_context& io, const std::vector<WorkerServerAsk>& workers,
                          std::chrono::milliseconds deadline,
                          std::function<void(std::vector<WorkerAnswer>)> done) {
  ask_workers(io, workers, false, deadline, std::move(done));
}

}  // namespace npu_run
