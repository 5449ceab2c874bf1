// One POST of a JSON body to one etcd member over HTTP/1.1 (Boost.Beast), over TLS for an https
// member, on the caller's io_context, with one deadline for the whole exchange (connect,
// handshake, request, answer) and a bound on the answer's size: a member that stalls or floods
// costs a timeout, never the loop or the agent's memory (etcd/member_stream.hpp). An idempotent
// request may go over a connection an earlier one left open (`kept`): a lease renewal every
// second or two then costs etcd one request, not a connection and a request.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "etcd/endpoints.hpp"
#include "etcd/tls_context.hpp"

namespace npu_run::etcd {

// The largest answer read: a range of a 100k-rank job's keys is a few MB.
inline constexpr size_t kMaxAnswerBytes = size_t{16} << 20;

class MemberStream;

struct HttpAnswer {
  int status = 0;
  std::string body;
  // The connection, open, when the member said it may be used again (HTTP/1.1 keep-alive).
  std::shared_ptr<MemberStream> reusable{};
};
// `failure` not empty: no answer, and why (refused, timed out, reset, too large, a certificate
// refused); else the member's answer.
using HttpHandler = std::function<void(const std::string& failure, HttpAnswer)>;

// The member's name is resolved on the calling thread (a literal address costs nothing).
// `auth_token`: etcd's simple token, sent as the raw Authorization header; empty: none.
// `tls`: the job's context, for an https member.
struct PostTarget {
  const Endpoint& member;
  const std::shared_ptr<boost::asio::ssl::context>& tls;
  const std::string& path;
};
// `kept`: a connection to the same member from an earlier answer's `reusable`, or null. Only an
// idempotent request may be given one: when it fails before any answer (the member closed it
// while idle), the request is sent once more on a new connection.
void post_json(boost::asio::io_context& io, const PostTarget& target, std::string body,
               const std::string& auth_token, std::chrono::milliseconds timeout,
               HttpHandler handler, std::shared_ptr<MemberStream> kept = nullptr);

}  // namespace npu_run::etcd
