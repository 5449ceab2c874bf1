// Small text helpers shared by every parser of flag and variable values, so that splitting a
// list and reading a number behave the same everywhere.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npu_run {

// Splits on `separator`, keeping empty items ("a,,b" -> a, "", b; "" -> one empty item), so
// that callers can reject them with a message.
std::vector<std::string_view> split(std::string_view text, char separator);

// `text` without leading and trailing blanks (spaces, tabs, newlines).
std::string_view trim(std::string_view text);

// The whole of `text` as a decimal integer within [min, max]; nullopt otherwise (empty text,
// trailing characters, overflow, out of range).
std::optional<long long> parse_integer(std::string_view text, long long min, long long max);
// The same as an int, or a UsageError with `message` (which names the value and the fix).
int integer_or_refuse(std::string_view text, int min, int max, const std::string& message);

// `text` safe to print in a message: control characters (a NUL would cut the message short, a
// newline or escape sequence would forge log lines) become \xNN; everything else is kept.
std::string printable(std::string_view text);

// `size` bytes as lowercase hex digits, two per byte (digests, nonces).
std::string to_hex(const unsigned char* data, size_t size);

// `word` as one word of a POSIX shell: 'abc', with each ' written '\''. Plain words made of
// letters, digits and -_./=:@%+, stay as they are, so that plans and command lines stay
// readable.
std::string shell_quote(std::string_view word);
// The words quoted and joined by spaces.
std::string shell_join(const std::vector<std::string>& words);

// The local time of day to the millisecond ("10:00:01.123"), as failure tables and root causes
// show it; "-" for the epoch (an unknown time).
std::string clock_time(std::chrono::system_clock::time_point t);

}  // namespace npu_run
