#include "etcd/watch.hpp"

#include <fmt/format.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <stdexcept>

#include "etcd/base64.hpp"
#include "etcd/http_call.hpp"
#include "etcd/member_stream.hpp"

namespace npu_run::etcd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

WatchLine parse_watch_line(const std::string& line) {
  const Json json = Json::parse(line, nullptr, false);
  if (!json.is_object()) throw std::invalid_argument("etcd's watch sent a line that is not JSON");
  if (json.contains("error")) {
    const Json& e = json.at("error");
    throw std::invalid_argument(
        fmt::format("etcd ended the watch: {}", e.is_object() ? e.value("message", "") : ""));
  }
  const Json& result = json.contains("result") ? json.at("result") : json;
  if (result.value("canceled", false)) {
    throw std::invalid_argument(fmt::format(
        "etcd canceled the watch: {}{}", result.value("cancel_reason", "no reason given"),
        json_int(result, "compact_revision") ? " (the revision was compacted)" : ""));
  }
  WatchLine out;
  out.revision = header_revision(result);
  if (!result.contains("events")) return out;
  for (const Json& event : result.at("events")) {
    WatchEvent e;
    e.deleted = event.value("type", "PUT") == "DELETE";  // a PUT has no "type"
    const Json kvs = Json{{"kvs", Json::array({event.value("kv", Json::object())})}};
    e.kv = range_kvs(kvs).at(0);
    out.events.push_back(std::move(e));
  }
  return out;
}

struct Watch::Stream : std::enable_shared_from_this<Watch::Stream> {
  Stream(asio::io_context& context, const Client& client, std::string watched, int64_t from,
         WatchHandlers h)
      : io(context),
        settings(client.settings()),
        token(client.token()),
        prefix(std::move(watched)),
        next_revision(from),
        handlers(std::move(h)),
        member(client.member_index()),
        retry(context) {}

  void connect();
  void write();
  void read();
  void on_header();
  size_t on_chunk(std::string_view data, beast::error_code& ec);
  void broken(const std::string& why);
  void close();

  asio::io_context& io;
  Settings settings;
  std::string token;
  std::string prefix;
  int64_t next_revision;  // where the next stream starts
  int64_t last = 0;       // the newest revision delivered
  WatchHandlers handlers;
  size_t member;
  size_t failed_in_a_row = 0;
  bool stopped = false;     // no more reading or connecting
  bool owner_gone = false;  // Watch::stop(): no handler runs any more, whatever is in flight
  asio::steady_timer retry;
  std::unique_ptr<MemberStream> socket;
  beast::flat_buffer buffer;
  std::unique_ptr<http::response_parser<http::string_body>> parser;
  std::function<size_t(uint64_t, beast::string_view, beast::error_code&)> chunk_callback;
  http::request<http::string_body> request;
  std::string pending;  // the part of a line not complete yet
};

void Watch::Stream::connect() {
  const Endpoint& target = settings.endpoints.at(member);
  Json create{{"key", base64_encode(prefix)}, {"range_end", base64_encode(prefix_end(prefix))}};
  if (next_revision > 0) create["start_revision"] = std::to_string(next_revision);
  request = {http::verb::post, "/v3/watch", 11};
  request.set(http::field::host, target.to_string());
  request.set(http::field::content_type, "application/json");
  if (!token.empty()) request.set(http::field::authorization, token);
  request.body() = Json{{"create_request", create}}.dump();
  request.prepare_payload();
  socket = std::make_unique<MemberStream>(io, target, settings.tls);
  buffer.clear();
  pending.clear();
  parser = std::make_unique<http::response_parser<http::string_body>>();
  parser->body_limit(boost::none);  // the stream never ends; lines are bounded in on_chunk
  chunk_callback = [this](uint64_t, beast::string_view data, beast::error_code& ec) {
    return on_chunk(std::string_view(data.data(), data.size()), ec);
  };
  parser->on_chunk_body(chunk_callback);
  // The deadline runs until the answer's header; then the stream is open-ended.
  socket->open(settings.timeout, [self = shared_from_this()](const std::string& failure) {
    if (self->stopped) return;
    if (!failure.empty()) {
      return self->broken(
          fmt::format("{}: {}", self->settings.endpoints.at(self->member).to_string(), failure));
    }
    self->write();
  });
}

void Watch::Stream::write() {
  socket->visit([this](auto& stream) {
    http::async_write(stream, request, [self = shared_from_this()](beast::error_code e, size_t) {
      if (self->stopped) return;
      if (e) return self->broken(self->socket->describe(e));
      self->read();
    });
  });
}

void Watch::Stream::read() {
  socket->visit([this](auto& stream) {
    http::async_read_some(
        stream, buffer, *parser, [self = shared_from_this()](beast::error_code e, size_t) {
          if (self->stopped) return;
          if (e) return self->broken(self->socket->describe(e));
          if (self->parser->is_header_done() && self->socket->tcp().socket().is_open())
            self->on_header();
          if (self->parser->is_done()) return self->broken("the member ended the stream");
          self->read();
        });
  });
}

// Once per stream: a refusal (not 200) ends it at the end of its body; else no deadline more.
void Watch::Stream::on_header() {
  if (parser->get().result_int() != 200) {
    if (!parser->is_done()) return;
    const std::string why =
        fmt::format("{} answered HTTP {}: {}", settings.endpoints.at(member).to_string(),
                    parser->get().result_int(), parser->get().body());
    if (parser->get().result_int() == 401) {
      stopped = true;
      close();
      return handlers.end(why);
    }
    return broken(why);
  }
  socket->tcp().expires_never();
  failed_in_a_row = 0;
}

size_t Watch::Stream::on_chunk(std::string_view data, beast::error_code& ec) {
  pending.append(data);
  for (size_t end = pending.find('\n'); end != std::string::npos; end = pending.find('\n')) {
    const std::string line = pending.substr(0, end);
    pending.erase(0, end + 1);
    if (line.find_first_not_of(" \r") == std::string::npos) continue;
    WatchLine parsed;
    try {
      parsed = parse_watch_line(line);
    } catch (const std::invalid_argument& e) {
      stopped = true;
      ec = asio::error::operation_aborted;
      asio::post(io, [self = shared_from_this(), why = std::string(e.what())] {
        self->close();
        if (!self->owner_gone) self->handlers.end(why);
      });
      return data.size();
    }
    if (parsed.revision > last && !parsed.events.empty()) {
      last = parsed.revision;
      next_revision = last + 1;
      handlers.events(parsed.events, parsed.revision);
      if (stopped) {  // the handler stopped the watch (a new election replaces it)
        ec = asio::error::operation_aborted;
        return data.size();
      }
    }
  }
  if (pending.size() > kMaxAnswerBytes) ec = http::error::body_limit;
  return data.size();
}

void Watch::Stream::broken(const std::string& why) {
  close();
  if (handlers.trouble) handlers.trouble(why);
  if (stopped) return;  // the handler stopped the watch
  member = (member + 1) % settings.endpoints.size();
  // After a whole round of members that failed, wait a second before the next.
  if (++failed_in_a_row % settings.endpoints.size() != 0) return connect();
  retry.expires_after(std::chrono::seconds(1));
  retry.async_wait([self = shared_from_this()](boost::system::error_code e) {
    if (!e && !self->stopped) self->connect();
  });
}

void Watch::Stream::close() {
  if (socket) socket->close();
}

Watch::Watch(asio::io_context& io, const Client& client, std::string prefix, int64_t from_revision,
             WatchHandlers handlers)
    : stream_(std::make_shared<Stream>(io, client, std::move(prefix), from_revision,
                                       std::move(handlers))) {
  stream_->connect();
}

Watch::~Watch() {
  stop();
}

void Watch::stop() {
  stream_->stopped = true;
  stream_->owner_gone = true;
  stream_->retry.cancel();
  stream_->close();
}

int64_t Watch::last_revision() const {
  return stream_->last;
}

}  // namespace npu_run::etcd
