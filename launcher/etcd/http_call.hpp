// One POST of a JSON body to one etcd member over HTTP/1.1 (Boost.Beast), on the caller's
// io_context, with one deadline for the whole exchange (connect, request, answer) and a bound
// on the answer's size: a member that stalls or floods costs a timeout, never the loop or the
// agent's memory. The socket is close-on-exec (net/cloexec_socket.hpp).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <functional>
#include <string>

#include "etcd/endpoints.hpp"

namespace npu_run::etcd {

// The largest answer read: a range of a 100k-rank job's keys is a few MB.
inline constexpr size_t kMaxAnswerBytes = size_t{16} << 20;

struct HttpAnswer {
  int status = 0;
  std::string body;
};
// `error` set: no answer (refused, timed out, reset, too large); else the member's answer.
using HttpHandler = std::function<void(const boost::system::error_code& error, HttpAnswer)>;

// The member's name is resolved on the calling thread (a literal address costs nothing).
// `auth_token`: etcd's simple token, sent as the raw Authorization header; empty: none.
void post_json(boost::asio::io_context& io, const Endpoint& member, const std::string& target,
               std::string body, const std::string& auth_token, std::chrono::milliseconds timeout,
               HttpHandler handler);

}  // namespace npu_run::etcd
