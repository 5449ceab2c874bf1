// etcd's JSON gateway carries keys and values as base64 (REFERENCE.md section 12).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace npu_run::etcd {

std::string base64_encode(std::string_view bytes);
// Nullopt when `text` is not base64.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace npu_run::etcd
