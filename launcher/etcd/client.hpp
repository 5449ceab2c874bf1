// etcd v3 over its JSON gateway for the agent's event loop: a call is a POST to one member,
// the one that answered last, then each other in turn while none answers (refused, timed out,
// "no leader"), so a 3-member cluster that lost one is no different to the caller. With a user
// it logs in first, and again when etcd says the token expired (simple tokens lapse after 5
// minutes unused). The password is never logged nor put in a message.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "etcd/endpoints.hpp"
#include "etcd/http_call.hpp"
#include "etcd/requests.hpp"
#include "etcd/tls_context.hpp"

namespace npu_run::etcd {

class MemberStream;

struct Settings {
  std::vector<Endpoint> endpoints;
  std::string user;  // empty: no authentication
  std::string password;
  std::chrono::milliseconds timeout{3000};  // one request on one member
  // For https members (make_tls_context); shared by every connection and the watch.
  std::shared_ptr<boost::asio::ssl::context> tls;
};

struct Failure {
  std::string what;     // names the members and what each said, or etcd's own message
  int http_status = 0;  // the answer's status; 0 when no member answered
  int code = 0;         // etcd's (gRPC) code in an error answer: 9 failed precondition, ...
  bool certificates_refused = false;  // every member's TLS handshake failed on a certificate
  bool answered() const { return http_status != 0; }
  // etcd or its TLS said no: trying again cannot help.
  bool refused() const { return answered() || certificates_refused; }
};
using Reply = std::variant<Json, Failure>;
using ReplyHandler = std::function<void(Reply)>;

class Client {
 public:
  Client(boost::asio::io_context& io, Settings settings);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // POSTs `body` to `path` ("/v3/kv/range"); `done` runs once, from the loop, never after the
  // client is gone. An `idempotent` call (a lease renewal) goes over the connection the last one
  // left open to that member, if any, and leaves its own open for the next.
  void call(const std::string& path, const Json& body, ReplyHandler done, bool idempotent = false);

  // Asks every member which one is etcd's own leader and sends calls there first from then on:
  // a follower passes each lease renewal on to the leader over etcd's peer HTTP, so a renewal
  // sent to the leader costs etcd half as much. `done` runs once every member answered or not.
  void prefer_leader(std::function<void()> done);

  // POSTs `body` to `path` on every member at once (an idempotent call: a lease renewal when
  // the renewals sent one at a time all hang on a member that has not yet heard of etcd's new
  // leader). `done` runs once, from the loop: with the first member's 200 answer (that member
  // becomes the one calls go to), or with a failure naming what each member said. With a user
  // and no token yet it is an ordinary call, which logs in first.
  void call_every_member(const std::string& path, const Json& body, ReplyHandler done);

  const Settings& settings() const { return settings_; }
  // The member that answered last ("host:port"), and its index in the settings.
  std::string member() const { return settings_.endpoints.at(current_).to_string(); }
  size_t member_index() const { return current_; }
  // The login's token ("" before one, or without a user): a watch sends it too.
  const std::string& token() const { return token_; }

 private:
  struct Call;
  void log_in_then(const std::shared_ptr<Call>& call);
  void send(const std::shared_ptr<Call>& call);
  void on_answer(const std::shared_ptr<Call>& call, size_t index, int status,
                 const std::string& body);
  void try_next(const std::shared_ptr<Call>& call, const std::string& why);
  using MemberAnswer =
      std::function<void(size_t index, const std::string& failure, const HttpAnswer& answer)>;
  // Posts `body` to every member at once; `each` runs for every member's answer or failure.
  void post_to_every_member(const std::string& path, const std::string& body,
                            const MemberAnswer& each);

  boost::asio::io_context& io_;
  Settings settings_;
  size_t current_ = 0;
  std::string token_;
  std::vector<std::shared_ptr<MemberStream>> kept_;  // by member: open for idempotent calls
  // By member: its TLS refused this agent's certificate, and it has not answered since. Under
  // TLS 1.3 a member judges the certificate after the client's handshake, and its alert can be
  // overtaken by the reset of the request already sent: a try that sees only the reset does
  // not undo what an earlier try heard.
  std::vector<bool> refused_certificate_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace npu_run::etcd
