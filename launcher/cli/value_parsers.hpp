// Parsers of the values flags and variables take, each naming `source` (the flag as typed or the
// PET_ variable) and the fix in its UsageError.
#pragma once

#include <chrono>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/launch_config.hpp"
#include "health/gate_settings.hpp"

namespace npu_run {

// Upper bounds: far above any real job, low enough that a typo is caught before it does harm.
inline constexpr int kMaxWorkersPerNode = 1024;
inline constexpr int kMaxNodes = 1'000'000;

// An integer in [1, max]; `what` names it in the message ("a node count").
int parse_positive(const std::string& text, int max, const std::string& source, const char* what);

// "N" or "MIN:MAX" -> {min, max}.
std::pair<int, int> parse_nnodes(const std::string& text, const std::string& source);

// Seconds within [min, max], as milliseconds.
std::chrono::milliseconds seconds_option(double value, double min, double max,
                                         const std::string& source);

// --health-timeout: "S" (the budget of a node's checks) or "S,CALL_S" (and each call's).
HealthRunSettings parse_health_timeout(const std::string& value, const std::string& source);

// --hang-timeout: "" or "0" (off), seconds, "auto" or "auto:<floor seconds>".
HangPolicy parse_hang_timeout(const std::string& value, const std::string& source);

// --checkpoint-memory: "4G", "512M", "1.5T", "1000000" (bytes) -> bytes; "30%" -> a share in
// (0, 0.9], as {0, share}.
std::pair<uint64_t, double> parse_memory_budget(const std::string& text, const std::string& source);

// Run ids and role names: letters, digits, '-', '_' and '.' (they name directories).
void check_name(const std::string& value, const std::string& source, const char* what);

// --signals-to-handle: "SIGTERM,INT,..." -> signal numbers, without repeats.
std::vector<int> parse_signals(const std::string& text, const std::string& source);

// --local-ranks-filter: "0,1" -> ranks below `nproc`.
std::set<int> parse_rank_filter(const std::string& text, const std::string& source, int nproc);

// --duplicate-*-filters: "a,b" -> {"a", "b"}; ",," stands for a comma inside a filter, as in
// torchrun; empty items are dropped (an empty filter would copy every line).
std::vector<std::string> parse_line_filters(const std::string& text);

// --rdzv-conf: "key=value,..." with torchrun's keys.
std::map<std::string, std::string> parse_rdzv_conf(const std::string& text,
                                                   const std::string& source);

// A number in --rdzv-conf's `key`, named as the user wrote it when it is wrong.
// A true/false --rdzv-conf value, with torch's spellings; nullopt when the key is absent.
std::optional<bool> conf_bool(const std::map<std::string, std::string>& conf,
                              const std::string& key, const std::string& source);
double conf_number(const std::map<std::string, std::string>& conf, const std::string& key,
                   const std::string& source);

// --rdzv-endpoint: HOST, HOST:PORT or [V6]:PORT.
struct Endpoint {
  std::string host;
  std::optional<int> port;
};
Endpoint parse_endpoint(const std::string& text, const std::string& source);

// "::1", "fe80::1%eth0" is not one (a scope needs the name service); no brackets.
bool is_ipv6_literal(const std::string& text);
// 1-65535, or 0 for "a free port".
int parse_port(const std::string& text, const std::string& source);

// A value that must be one of `choices`: "SOURCE 'VALUE': expected a, b or c" otherwise.
void check_choice(const std::string& value, std::initializer_list<const char*> choices,
                  const std::string& source);

// The --log-level type name shown in --help, which the completion offers as words.
inline constexpr const char* kLogLevelChoices = "{trace,debug,info,warn,error,critical,off}";

// --log-level as spdlog names the levels ("warning" for "warn" too); the canonical name.
std::string parse_log_level(const std::string& text, const std::string& source);

}  // namespace npu_run
