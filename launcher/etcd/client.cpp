#include "etcd/client.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <utility>

#include "etcd/member_stream.hpp"

namespace npu_run::etcd {

namespace {

constexpr int kUnauthenticated = 16;  // gRPC: the token is unknown or expired
// How long a call pauses before its second round when etcd was electing its leader.
constexpr std::chrono::milliseconds kElectionPause{500};
constexpr int kUnavailable = 14;  // gRPC: "etcdserver: no leader", a member stopping
const std::string kStatusPath = "/v3/maintenance/status";

// etcd's error answer: {"error": ..., "message": ..., "code": N}; anything else as text.
Failure failure_of(int status, const std::string& body, const std::string& member) {
  Failure f;
  f.http_status = status;
  const Json answer = Json::parse(body, nullptr, false);
  std::string message =
      answer.is_object() ? answer.value("message", answer.value("error", "")) : body.substr(0, 200);
  if (answer.is_object() && answer.contains("code") && answer.at("code").is_number_integer())
    f.code = answer.at("code").get<int>();
  f.what = fmt::format("etcd at {} answered HTTP {}: {}", member, status, message);
  if (message.find("CommonName of client") != std::string::npos) {
    f.what +=
        " (with etcd's --client-cert-auth and a login, the client certificate (cert=) "
        "must carry no CommonName: the user is the login's)";
  }
  return f;
}

// A member's 200 answer: its JSON, or a failure when it is none.
Reply json_answer(const std::string& member, const std::string& body) {
  Json answer = Json::parse(body, nullptr, false);
  if (answer.is_discarded())
    return Failure{fmt::format("etcd at {} answered with no JSON", member), 200, 0};
  return answer;
}

}  // namespace

struct Client::Call {
  std::string path;
  std::string body;
  ReplyHandler done;
  size_t tried = 0;      // members tried for this call
  std::string failures;  // what each said
  bool logged_in_again = false;
  bool electing = false;  // a member said etcd is choosing its leader
  bool second_round = false;
  bool idempotent = false;  // may use, and leaves, a kept connection
};

Client::Client(boost::asio::io_context& io, Settings settings)
    : io_(io),
      settings_(std::move(settings)),
      kept_(settings_.endpoints.size()),
      refused_certificate_(settings_.endpoints.size(), false) {}

Client::~Client() = default;

void Client::call(const std::string& path, const Json& body, ReplyHandler done, bool idempotent) {
  auto c = std::make_shared<Call>(Call{path, body.dump(), std::move(done), 0, {}, false});
  c->idempotent = idempotent;
  if (!settings_.user.empty() && token_.empty()) return log_in_then(c);
  send(c);
}

// /v3/auth/authenticate, through the same failover, then the call itself.
void Client::log_in_then(const std::shared_ptr<Call>& c) {
  const Json login{{"name", settings_.user}, {"password", settings_.password}};
  auto then = [this, c](Reply reply) {
    if (auto* f = std::get_if<Failure>(&reply)) {
      f->what = fmt::format("logging in to etcd as user '{}': {}", settings_.user, f->what);
      return c->done(std::move(*f));
    }
    token_ = std::get<Json>(reply).value("token", "");
    send(c);
  };
  send(std::make_shared<Call>(
      Call{"/v3/auth/authenticate", login.dump(), std::move(then), 0, {}, true}));
}

void Client::send(const std::shared_ptr<Call>& c) {
  const size_t index = (current_ + c->tried) % settings_.endpoints.size();
  const bool login = c->path == "/v3/auth/authenticate";
  const Endpoint& member = settings_.endpoints[index];
  std::shared_ptr<MemberStream> kept = c->idempotent ? std::move(kept_[index]) : nullptr;
  post_json(
      io_, PostTarget{member, settings_.tls, c->path}, c->body, login ? "" : token_,
      settings_.timeout,
      [this, c, index, alive = std::weak_ptr<int>(alive_)](const std::string& failure,
                                                           const HttpAnswer& answer) {
        if (alive.expired()) return;
        if (!failure.empty()) {
          if (failure.starts_with(kCertificateRefused)) refused_certificate_[index] = true;
          return try_next(c,
                          fmt::format("{}: {}", settings_.endpoints[index].to_string(), failure));
        }
        if (c->idempotent) kept_[index] = answer.reusable;
        refused_certificate_[index] = false;
        on_answer(c, index, answer.status, answer.body);
      },
      std::move(kept));
}

void Client::post_to_every_member(const std::string& path, const std::string& body,
                                  const MemberAnswer& each) {
  for (size_t index = 0; index < settings_.endpoints.size(); ++index) {
    post_json(io_, PostTarget{settings_.endpoints[index], settings_.tls, path}, body, token_,
              settings_.timeout,
              [index, each, alive = std::weak_ptr<int>(alive_)](const std::string& failure,
                                                                const HttpAnswer& answer) {
                if (!alive.expired()) each(index, failure, answer);
              });
  }
}

void Client::prefer_leader(std::function<void()> done) {
  auto waiting = std::make_shared<size_t>(settings_.endpoints.size());
  post_to_every_member(
      kStatusPath, "{}",
      [this, waiting, done = std::move(done)](size_t index, const std::string& failure,
                                              const HttpAnswer& answer) {
        const Json status = Json::parse(answer.body, nullptr, false);
        // Both are uint64 ids, which the gateway writes as strings.
        if (failure.empty() && answer.status == 200 && status.is_object() &&
            status.contains("header") && status.contains("leader") &&
            status.at("header").value("member_id", Json()) == status.at("leader")) {
          current_ = index;
        }
        if (--*waiting == 0) done();
      });
}

// The first member to answer 200 gives the reply; the rest are dropped. A fan-out is kept for
// the rare moment a lease is lapsing: it carries no login of its own (call() does that).
void Client::call_every_member(const std::string& path, const Json& body, ReplyHandler done) {
  if (!settings_.user.empty() && token_.empty()) return call(path, body, std::move(done), true);
  struct FanOut {
    ReplyHandler done;
    size_t waiting;
    std::string failures;
  };
  auto fan = std::make_shared<FanOut>(FanOut{std::move(done), settings_.endpoints.size(), {}});
  post_to_every_member(
      path, body.dump(),
      [this, fan](size_t index, const std::string& failure, const HttpAnswer& answer) {
        if (!fan->done) return;  // answered already
        const std::string member = settings_.endpoints[index].to_string();
        if (failure.empty() && answer.status == 200) {
          current_ = index;
          return std::exchange(fan->done, nullptr)(json_answer(member, answer.body));
        }
        const std::string why = failure.empty()
                                    ? failure_of(answer.status, answer.body, member).what
                                    : fmt::format("{}: {}", member, failure);
        fan->failures += (fan->failures.empty() ? "" : "; ") + why;
        if (--fan->waiting == 0)
          std::exchange(fan->done, nullptr)(
              Failure{fmt::format("no etcd member answered ({})", fan->failures), 0, 0});
      });
}

void Client::on_answer(const std::shared_ptr<Call>& c, size_t index, int status,
                       const std::string& body) {
  const std::string member = settings_.endpoints[index].to_string();
  if (status == 200) {
    current_ = index;
    return c->done(json_answer(member, body));
  }
  Failure f = failure_of(status, body, member);
  if (f.code == kUnavailable) {
    c->electing = true;
    return try_next(c, f.what);
  }
  if (f.code == kUnauthenticated && !settings_.user.empty() && !c->logged_in_again) {
    c->logged_in_again = true;  // the token lapsed: once more with a fresh one
    token_.clear();
    return log_in_then(c);
  }
  c->done(std::move(f));
}

void Client::try_next(const std::shared_ptr<Call>& c, const std::string& why) {
  c->failures += (c->failures.empty() ? "" : "; ") + why;
  if (++c->tried < settings_.endpoints.size()) return send(c);
  if (c->electing && !c->second_round) {
    // etcd was electing its own leader (a member lost): it takes about a second, so every
    // member is asked once more after a pause rather than the caller failing in that window.
    c->second_round = true;
    c->tried = 0;
    c->failures += "; again after etcd's election:";
    auto pause = std::make_shared<boost::asio::steady_timer>(io_, kElectionPause);
    pause->async_wait(
        [this, c, pause, alive = std::weak_ptr<int>(alive_)](boost::system::error_code ec) {
          if (!ec && !alive.expired()) send(c);
        });
    return;
  }
  Failure f{fmt::format("no etcd member answered ({})", c->failures), 0, 0};
  f.certificates_refused = std::all_of(refused_certificate_.begin(), refused_certificate_.end(),
                                       [](bool refused) { return refused; });
  c->done(std::move(f));
}

}  // namespace npu_run::etcd
