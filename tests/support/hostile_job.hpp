// A real two-node job that must survive what a hostile peer does to node 0's rendezvous server
// (the hostile-peer integration tests): the job, the attack on its port from a thread of the
// test, and the probes an attack uses to show the server still serves.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run::testing::hostile {

inline const std::string kToken = "hostile-test-token";

// Under ASan or TSan the allocator holds freed memory back (ASan's quarantine alone is 256 MiB),
// so a process's resident size says nothing about what it keeps alive.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NPU_RUN_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NPU_RUN_SANITIZED 1
#endif
#ifdef NPU_RUN_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
inline constexpr bool kResidentSizeMeansLiveMemory = !kSanitized;

inline rdzv::Hello real_hello(const std::string& nonce = std::string(64, 'a')) {
  return rdzv::Hello{rdzv::kMagic, rdzv::kProtocolVersion, "none", nonce};
}

// What an attack found wrong; checked on the test's thread (Catch2 is not thread-safe).
using Problems = std::vector<std::string>;
using Attack = std::function<void(int port, Problems& problems)>;
// An attack that also watches node 0's agent, which hosts the server.
using AttackOnNode0 = std::function<void(int port, pid_t node0, Problems& problems)>;

inline void expect(bool ok, const std::string& what, Problems& problems) {
  if (!ok) problems.push_back(what);
}

// Node 0 (hosting the server, token required unless `with_token` is false, 1 s handshake
// deadline) starts; `attack` runs against its port while node 1 starts and both nodes' workers
// run; the workers finish only once the attack is over, so every check the attack makes is
// against a live server. Returns node 0's log.
std::string job_survives(const AttackOnNode0& attack, bool with_token = true);
std::string job_survives(const Attack& attack, bool with_token = true);

// Resident memory of a process in KiB (VmRSS), 0 when it cannot be read.
long resident_kib(pid_t pid);

// The server still answers a newcomer's hello: it kept serving through the attack.
void server_still_answers(int port, Problems& problems);
void server_still_answers_without_token(int port, Problems& problems);

}  // namespace npu_run::testing::hostile
