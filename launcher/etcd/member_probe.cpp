#include "etcd/member_probe.hpp"

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>

#include "etcd/http_call.hpp"

namespace npu_run::etcd {

namespace {

// What a member's status answer says of it.
void read_status(MemberProbe& probe, int status, const std::string& body) {
  probe.answers = true;
  const Json answer = Json::parse(body, nullptr, false);
  if (status != 200 || !answer.is_object()) {
    probe.detail = fmt::format(
        "HTTP {}: {}", status,
        answer.is_object() ? answer.value("message", body.substr(0, 120)) : body.substr(0, 120));
    return;
  }
  probe.detail = "etcd " + answer.value("version", std::string("of unknown version"));
  // Both are uint64 ids, which the gateway writes as strings.
  probe.leader = answer.contains("header") && answer.contains("leader") &&
                 answer.at("header").value("member_id", Json()) == answer.at("leader");
}

}  // namespace

std::vector<MemberProbe> probe_members(const Settings& settings,
                                       std::chrono::milliseconds timeout) {
  boost::asio::io_context io;
  std::vector<MemberProbe> probes(settings.endpoints.size());
  const std::string path = "/v3/maintenance/status";
  for (size_t i = 0; i < settings.endpoints.size(); ++i) {
    probes[i].member = settings.endpoints[i].to_string();
    post_json(io, PostTarget{settings.endpoints[i], settings.tls, path}, "{}", "", timeout,
              [&probe = probes[i]](const std::string& failure, const HttpAnswer& answer) {
                if (failure.empty()) return read_status(probe, answer.status, answer.body);
                probe.detail = failure;
              });
  }
  io.run_for(timeout + std::chrono::milliseconds(500));
  for (MemberProbe& p : probes) {
    if (!p.answers && p.detail.empty()) p.detail = "no answer in time";
  }
  return probes;
}

std::string describe_probes(const std::vector<MemberProbe>& probes) {
  std::string text;
  for (const MemberProbe& p : probes) {
    if (!text.empty()) text += ", ";
    if (p.answers) {
      text += fmt::format("{} answers ({}{})", p.member, p.detail, p.leader ? ", its leader" : "");
    } else {
      text += fmt::format("{} does not answer ({})", p.member, p.detail);
    }
  }
  return text;
}

}  // namespace npu_run::etcd
